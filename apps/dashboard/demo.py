"""Demo data: a platform admin, two organizations with teams, and one user per persona.

Everything goes through the services, so the demo's audit log shows how the console records work.
Re-running is safe: existing rows are kept and passwords are reset to the one printed.
"""

from __future__ import annotations

from apps.accounts import services as accounts
from apps.accounts.models import Membership, User
from apps.accounts.roles import Role
from apps.tenancy import services as tenancy
from apps.tenancy.models import Tenant

TENANTS = [
    # slug, name, parent slug, description
    ("acme", "Acme AI", None, "An organization with two GPU teams."),
    ("acme-llm", "LLM team", "acme", "Pre-training and serving large language models."),
    ("acme-vision", "Vision team", "acme", "Image and video models."),
    ("lab", "Research Lab", None, "A university lab sharing the fleet."),
    ("lab-rl", "RL group", "lab", "Reinforcement learning experiments."),
]

PEOPLE = [
    # username, role, tenant slug (None: console-wide), what they show
    ("alice", Role.TENANT_ADMIN, "acme", "team admin of Acme AI and its teams"),
    ("bob", Role.MEMBER, "acme-llm", "member of the LLM team"),
    ("carol", Role.MEMBER, "lab-rl", "member of the RL group (another tenant)"),
    ("dave", Role.ONCALL, None, "on-call engineer"),
    ("erin", Role.VIEWER, "acme", "read-only viewer of Acme AI"),
]


def seed_demo(admin_username: str, password: str) -> list[tuple[str, str]]:
    """Create or refresh the demo; returns (username, what they show) for the printed login table."""
    admin = accounts.bootstrap_platform_admin(username=admin_username, password=password)
    for slug, name, parent_slug, description in TENANTS:
        if not Tenant.objects.filter(slug=slug).exists():
            parent = Tenant.objects.get(slug=parent_slug) if parent_slug else None
            tenancy.create_tenant(admin, name=name, slug=slug, parent=parent, description=description)
    logins = [(admin_username, "platform admin")]
    for username, role, tenant_slug, what in PEOPLE:
        user = User.objects.filter(username=username).first()
        if user is None:
            user = accounts.create_user(
                admin, username=username, password=password, email=f"{username}@example.com", reason="demo user"
            )
        else:
            user.set_password(password)
            user.save(update_fields=["password"])
        tenant = Tenant.objects.get(slug=tenant_slug) if tenant_slug else None
        if not Membership.objects.filter(user=user, tenant=tenant).exists() and not (
            tenant is None and Membership.objects.filter(user=user, tenant=None, role=role).exists()
        ):
            accounts.grant_membership(admin, user=user, tenant=tenant, role=role, reason="demo persona")
        logins.append((username, what))
    if not User.objects.filter(username="ci-llm").exists():
        accounts.create_service_account(
            admin,
            username="ci-llm",
            tenant=Tenant.objects.get(slug="acme-llm"),
            role=Role.MEMBER,
            reason="demo CI pipeline",
        )
    return logins
