from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, JSONParser
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts import services
from apps.accounts.api.serializers import (
    ApiTokenCreatedSerializer,
    ApiTokenSerializer,
    FederatedTrustSerializer,
    GroupMappingSerializer,
    MembershipSerializer,
    MembershipUpdateSerializer,
    MeSerializer,
    ReasonSerializer,
    ServiceAccountSerializer,
    TokenExchangeResponseSerializer,
    TokenExchangeSerializer,
    UserSerializer,
)
from apps.accounts.filtersets import ApiTokenFilterSet, MembershipFilterSet, UserFilterSet
from apps.accounts.models import ApiToken, FederatedTrust, GroupMapping, Membership, User
from apps.accounts.permissions import require
from apps.accounts.roles import Action
from apps.core.api.errors import error_body
from apps.core.api.views import ScopedViewSetMixin


class MeView(APIView):
    """Who am I: the user, the token in use (if any) and the effective permissions."""

    @extend_schema(responses=MeSerializer)
    def get(self, request):
        return Response(MeSerializer(request.user).data)


class UserViewSet(ScopedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    """Users sharing a tenant with you (to add as members)."""

    model = User
    serializer_class = UserSerializer
    filterset_class = UserFilterSet
    lookup_field = "username"
    ordering_fields = ["username", "date_joined"]
    ordering = ["username"]

    def get_queryset(self):
        return super().get_queryset().select_related("owner_tenant").prefetch_related("memberships__tenant")

    @extend_schema(request=ReasonSerializer, responses=UserSerializer)
    @action(detail=True, methods=["post"], url_path="allow-sso-link")
    def allow_sso_link(self, request, username=None):
        """Let this local account be taken over by the identity provider's person of the same user name at their
        next single sign-on log-in (platform admins; docs/sso.md, "Accounts")."""
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        user = services.allow_sso_link(request.user, self.get_object(), **body.validated_data)
        return Response(UserSerializer(user).data)


class MembershipViewSet(
    ScopedViewSetMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin, viewsets.ReadOnlyModelViewSet
):
    """Roles held on tenants. Grant with POST, change with PATCH {role}, revoke with DELETE."""

    model = Membership
    serializer_class = MembershipSerializer
    filterset_class = MembershipFilterSet
    select_related = ("user", "tenant")
    ordering_fields = ["created_at", "role"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = services.grant_membership(
            self.request.user,
            user=data["user"],
            tenant=data.get("tenant"),
            role=data["role"],
            reason=data.get("reason", ""),
        )

    @extend_schema(request=MembershipUpdateSerializer, responses=MembershipSerializer)
    def partial_update(self, request, *args, **kwargs):
        body = MembershipUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        membership = services.change_membership_role(request.user, self.get_object(), **body.validated_data)
        return Response(MembershipSerializer(membership).data)

    @extend_schema(responses={204: None})
    def destroy(self, request, *args, **kwargs):
        services.revoke_membership(request.user, self.get_object(), reason=request.query_params.get("reason", ""))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ServiceAccountViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Tokens-only users owned by a tenant, for CI pipelines."""

    model = User
    serializer_class = ServiceAccountSerializer
    lookup_field = "username"
    ordering_fields = ["username", "date_joined"]
    ordering = ["username"]

    def get_queryset(self):
        return super().get_queryset().filter(is_service_account=True).prefetch_related("memberships__tenant")

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = services.create_service_account(
            self.request.user,
            username=data["username"],
            tenant=data["owner_tenant"],
            role=data["role"],
            reason=data.get("reason", ""),
        )


class ApiTokenViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """API tokens: yours, and your tenants' service accounts'. The raw token is in the create response only."""

    model = ApiToken
    serializer_class = ApiTokenSerializer
    filterset_class = ApiTokenFilterSet
    select_related = ("user", "tenant")
    ordering_fields = ["created_at", "last_used_at", "expires_at"]

    @extend_schema(request=ApiTokenSerializer, responses={201: ApiTokenCreatedSerializer})
    def create(self, request, *args, **kwargs):
        serializer = ApiTokenSerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        token, raw = services.issue_token(
            request.user,
            user=data.get("user", request.user),
            name=data["name"],
            tenant=data.get("tenant"),
            role=data["role"],
            expires_in_days=data.get("expires_in_days"),
            reason=data.get("reason", ""),
        )
        token.token = raw
        return Response(ApiTokenCreatedSerializer(token).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ReasonSerializer, responses=ApiTokenSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        token = services.revoke_token(request.user, self.get_object(), **body.validated_data)
        return Response(ApiTokenSerializer(token).data)


class GroupMappingViewSet(mixins.CreateModelMixin, mixins.DestroyModelMixin, viewsets.ReadOnlyModelViewSet):
    """Identity provider groups (or patterns such as `gpu:{tenant}:{role}`) that give roles at single sign-on
    log-ins (docs/sso.md). Platform admins only: create with POST, remove with DELETE."""

    serializer_class = GroupMappingSerializer
    http_method_names = ["get", "post", "delete", "head", "options"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the OpenAPI schema's generation
            return GroupMapping.objects.none()
        require(self.request.user, Action.ADMINISTER, None)
        return GroupMapping.objects.select_related("tenant").order_by("group")

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = services.create_group_mapping(
            self.request.user,
            group=data["group"],
            tenant=data.get("tenant"),
            role=data.get("role", ""),
            reason=data.get("reason", ""),
        )

    @extend_schema(responses={204: None})
    def destroy(self, request, *args, **kwargs):
        mapping = self.get_object()
        services.delete_group_mapping(request.user, mapping, reason=request.query_params.get("reason", ""))
        return Response(status=status.HTTP_204_NO_CONTENT)


class FederatedTrustViewSet(
    ScopedViewSetMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin, viewsets.ReadOnlyModelViewSet
):
    """Service accounts' trusts in OIDC issuers (CI pipelines' ID tokens, docs/sso.md): those of the tenants you
    manage. Create with POST, remove with DELETE."""

    model = FederatedTrust
    serializer_class = FederatedTrustSerializer
    select_related = ("service_account", "service_account__owner_tenant")
    http_method_names = ["get", "post", "delete", "head", "options"]

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = services.create_federated_trust(
            self.request.user,
            service_account=data["service_account"],
            issuer=data["issuer"],
            audience=data["audience"],
            conditions=data.get("conditions", {}),
            max_minutes=data.get("max_minutes", 15),
            enabled=data.get("enabled", True),
            reason=data.get("reason", ""),
        )

    @extend_schema(responses={204: None})
    def destroy(self, request, *args, **kwargs):
        trust = self.get_object()
        services.delete_federated_trust(request.user, trust, reason=request.query_params.get("reason", ""))
        return Response(status=status.HTTP_204_NO_CONTENT)


class TokenExchangeView(APIView):
    """RFC 8693 token exchange: a CI job's OIDC ID token for a console token of its service account, valid for
    the trust's minutes (docs/sso.md, "CI pipelines"). No authentication: the ID token is the credential.
    A token no trust accepts answers 401 `invalid_grant`, the same whatever the reason; a token of a trusted issuer
    whose keys cannot be read now answers 503 `temporarily_unavailable` with Retry-After (retrying may help)."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    parser_classes = [JSONParser, FormParser]

    @extend_schema(request=TokenExchangeSerializer, responses={200: TokenExchangeResponseSerializer}, auth=[])
    def post(self, request):
        from apps.accounts import federation

        body = TokenExchangeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            trust, claims = federation.match(body.validated_data["subject_token"])
        except federation.Unavailable as exc:
            services.record_refused_exchange(str(exc), exc.claims)
            answer = error_body(
                _("The token's issuer cannot be reached to check its signature; retry later."),
                "temporarily_unavailable",
            )
            answer["error"] = "temporarily_unavailable"
            return Response(answer, status=status.HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": "30"})
        except federation.Refused as exc:
            services.record_refused_exchange(str(exc), exc.claims)
            answer = error_body(_("The subject token is not accepted."), "invalid_grant")
            answer["error"] = "invalid_grant"
            return Response(answer, status=status.HTTP_401_UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})
        token, raw = services.exchange_token(trust, claims)
        expires_in = round((token.expires_at - token.created_at).total_seconds())
        return Response(
            {
                "access_token": raw,
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                "token_type": "Bearer",
                "expires_in": expires_in,
            },
            headers={"Cache-Control": "no-store"},
        )
