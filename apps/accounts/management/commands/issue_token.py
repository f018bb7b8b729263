"""Print a new API token, for bootstrapping automation.

python manage.py issue_token --user ci-bot --tenant llm --role member --expires 90
"""

from django.core.management.base import BaseCommand, CommandError

from apps.accounts import services
from apps.accounts.models import Tenant, User
from apps.accounts.roles import Role
from apps.core.errors import ServiceError


class Command(BaseCommand):
    help = "Create an API token for USER (narrowed to --tenant and --role) and print it once."

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True, help="username the token acts as")
        parser.add_argument("--tenant", help="tenant slug the token is limited to (omit for console-wide)")
        parser.add_argument("--role", choices=Role.values, help="role of the token (default: the user's role there)")
        parser.add_argument(
            "--expires",
            type=int,
            metavar="DAYS",
            help="days until it expires (default, and most: API_TOKEN_MAX_LIFETIME_DAYS)",
        )
        parser.add_argument("--name", default="issued by manage.py issue_token")

    def handle(self, *args, **opts):
        user = User.objects.filter(username=opts["user"]).first()
        if user is None:
            raise CommandError(f"No user {opts['user']!r}.")
        tenant = None
        if opts["tenant"]:
            tenant = Tenant.objects.filter(slug=opts["tenant"]).first()
            if tenant is None:
                raise CommandError(f"No tenant {opts['tenant']!r}.")
        role = opts["role"] or self._default_role(user, tenant)
        try:
            # The command runs as the user itself: a token can never exceed what the user holds.
            _, raw = services.issue_token(
                user,
                user=user,
                name=opts["name"],
                tenant=tenant,
                role=role,
                expires_in_days=opts["expires"],
                reason="manage.py issue_token",
            )
        except ServiceError as exc:
            raise CommandError(exc.message + "".join(f"\n  {k}: {' '.join(v)}" for k, v in exc.fields.items())) from exc
        self.stdout.write(raw)

    @staticmethod
    def _default_role(user, tenant) -> str:
        membership = user.memberships.filter(tenant=tenant).first()
        if membership is None and tenant is not None:
            for ancestor in Tenant.objects.filter(id__in=tenant.ancestor_ids()).order_by("-path"):
                membership = user.memberships.filter(tenant=ancestor).first()
                if membership:
                    break
        if membership is None:
            if user.is_superuser and tenant is None:
                return Role.PLATFORM_ADMIN
            raise CommandError(
                f"{user.username} has no role on {tenant.slug if tenant else 'the console'}; "
                "pass --role or grant one first."
            )
        return membership.role
