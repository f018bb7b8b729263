"""The session's user read with their memberships in one statement (every page asks for both).

`ModelBackend` is Django's, except `get_user`: Django reads the user (`UserModel.objects.get`) and the console's
permission checks then read the memberships (`permissions.user_grants`); here one statement reads both, as the
API's token lookup does (`authentication.find_token`). Who may log in, and how, is unchanged.
"""

from __future__ import annotations

from django.contrib.auth.backends import ModelBackend as DjangoModelBackend

from apps.accounts.authentication import user_with_grants


class ModelBackend(DjangoModelBackend):
    def get_user(self, user_id):
        user = user_with_grants(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None
