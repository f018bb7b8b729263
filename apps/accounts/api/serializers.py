from rest_framework import serializers

from apps.accounts.api.fields import TenantField, VisibleUserField
from apps.accounts.models import ApiToken, FederatedTrust, GroupMapping, Membership, Tenant, User
from apps.accounts.roles import SERVICE_ACCOUNT_ROLE_CHOICES, Role
from apps.core.api.serializers import StrictModelSerializer, StrictSerializer


class MembershipBriefSerializer(serializers.ModelSerializer):
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "tenant", "role"]


class UserSerializer(serializers.ModelSerializer):
    memberships = MembershipBriefSerializer(many=True, read_only=True)
    sso = serializers.SerializerMethodField(
        help_text="linked: logs in through the identity provider; pending: a platform admin allowed the link, "
        "made at the next single sign-on log-in; empty: a local account."
    )
    owner_tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = User
        fields = [
            "id",
            "username",
            "first_name",
            "last_name",
            "email",
            "is_service_account",
            "owner_tenant",
            "is_active",
            "sso",
            "memberships",
        ]
        read_only_fields = fields

    def get_sso(self, user) -> str:
        return "linked" if user.oidc_subject else "pending" if user.oidc_link_pending else ""


class MeSerializer(UserSerializer):
    token = serializers.SerializerMethodField()
    permissions = serializers.SerializerMethodField()

    class Meta(UserSerializer.Meta):
        fields = [*UserSerializer.Meta.fields, "token", "permissions"]
        read_only_fields = fields

    def get_token(self, user) -> dict | None:
        token = getattr(user, "api_token", None)
        if token is None:
            return None
        return {
            "name": token.name,
            "prefix": token.prefix,
            "role": token.role,
            "tenant": token.tenant.slug if token.tenant else None,
        }

    def get_permissions(self, user) -> dict:
        from apps.accounts.permissions import scope_for

        scope = scope_for(user)
        slugs = dict(Tenant.objects.filter(id__in=scope.tenant_actions).values_list("id", "slug"))
        return {
            "console": sorted(scope.global_actions),
            "tenants": {slugs[t]: sorted(a) for t, a in scope.tenant_actions.items() if t in slugs},
        }


class MembershipSerializer(StrictModelSerializer):
    user = serializers.SlugRelatedField(slug_field="username", queryset=User.objects.all())
    tenant = TenantField(allow_null=True, required=False)
    role = serializers.ChoiceField(choices=Role.choices)
    reason = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=2000)

    class Meta:
        model = Membership
        fields = ["id", "user", "tenant", "role", "source", "created_at", "reason"]
        read_only_fields = ["id", "source", "created_at"]
        validators = []  # uniqueness and role/tenant rules are the service's


class MembershipUpdateSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=Role.choices)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class ServiceAccountSerializer(StrictModelSerializer):
    tenant = TenantField(source="owner_tenant")
    role = serializers.ChoiceField(choices=SERVICE_ACCOUNT_ROLE_CHOICES, default=Role.MEMBER, write_only=True)
    reason = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=2000)
    memberships = MembershipBriefSerializer(many=True, read_only=True)

    class Meta:
        model = User
        fields = ["id", "username", "tenant", "role", "reason", "memberships", "date_joined"]
        read_only_fields = ["id", "memberships", "date_joined"]
        extra_kwargs = {"username": {"validators": []}}


class ApiTokenSerializer(StrictModelSerializer):
    user = VisibleUserField(required=False)
    tenant = TenantField(allow_null=True, required=False)
    role = serializers.ChoiceField(choices=Role.choices)
    # At most API_TOKEN_MAX_LIFETIME_DAYS (the service refuses more with a 400); empty or null: that maximum.
    expires_in_days = serializers.IntegerField(write_only=True, required=False, allow_null=True, min_value=1)
    reason = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=2000)
    status = serializers.CharField(read_only=True)

    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "user",
            "tenant",
            "role",
            "prefix",
            "status",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
            "expires_in_days",
            "reason",
        ]
        read_only_fields = ["id", "prefix", "status", "created_at", "expires_at", "revoked_at", "last_used_at"]


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    """The create response: the only time the raw token is shown."""

    token = serializers.CharField(read_only=True, help_text="Shown once. Store it now; it cannot be recovered.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]


class ReasonSerializer(StrictSerializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class GroupMappingSerializer(StrictModelSerializer):
    """An identity provider group, or a pattern with {tenant} and {role}, and the role it gives (docs/sso.md)."""

    tenant = TenantField(allow_null=True, required=False)
    role = serializers.ChoiceField(choices=Role.choices, required=False, allow_blank=True, default="")
    reason = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=2000)

    class Meta:
        model = GroupMapping
        fields = ["id", "group", "tenant", "role", "created_at", "reason"]
        read_only_fields = ["id", "created_at"]
        extra_kwargs = {"group": {"validators": []}}  # uniqueness is the service's (409)


class FederatedTrustSerializer(StrictModelSerializer):
    """A service account's trust in an OIDC issuer's ID tokens (docs/sso.md, "CI pipelines")."""

    service_account = VisibleUserField()
    conditions = serializers.JSONField(required=False, default=dict)
    max_minutes = serializers.IntegerField(required=False, default=15)
    reason = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=2000)

    class Meta:
        model = FederatedTrust
        fields = [
            "id",
            "service_account",
            "issuer",
            "audience",
            "conditions",
            "max_minutes",
            "enabled",
            "created_at",
            "reason",
        ]
        read_only_fields = ["id", "created_at"]
        extra_kwargs = {"issuer": {"validators": []}}  # the outbound policy is the service's check


class TokenExchangeSerializer(StrictSerializer):
    """RFC 8693 token exchange: a CI job's OIDC ID token for a short-lived console token."""

    grant_type = serializers.ChoiceField(choices=["urn:ietf:params:oauth:grant-type:token-exchange"])
    subject_token = serializers.CharField(max_length=16384, trim_whitespace=True)
    subject_token_type = serializers.ChoiceField(
        choices=["urn:ietf:params:oauth:token-type:id_token", "urn:ietf:params:oauth:token-type:jwt"]
    )


class TokenExchangeResponseSerializer(serializers.Serializer):
    access_token = serializers.CharField()
    issued_token_type = serializers.CharField()
    token_type = serializers.CharField()
    expires_in = serializers.IntegerField()
