"""Django's makemessages, plus the console's own marker `N_` (apps/core/text.py).

Pure modules (the spec parser, admission, the health rules) mark their English templates with `N_(...)`
because they cannot import gettext; xgettext extracts them when told the keyword. `scripts/i18n update`
and tests/i18n/test_catalog.py both run this command, so the catalog and its check see the same strings.
"""

from __future__ import annotations

from django.core.management.commands import makemessages

KEYWORDS = ["--keyword=N_"]


class Command(makemessages.Command):
    xgettext_options = [*makemessages.Command.xgettext_options, *KEYWORDS]
