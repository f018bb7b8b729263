"""Settings for the GPU cluster operations console.

Everything that differs between the demo, CI and a real deployment comes from the environment
through the typed helpers in `console.env`, which fail fast on bad values. The defaults are the
zero-set-up demo: an SQLite file and an embedded (filesystem) Celery broker.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import timedelta
from pathlib import Path

from csp.constants import NONCE, NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from console.env import READ as ENV_READ
from console.env import env_bool, env_int, env_list, env_name_prefix, env_networks, env_str, parse_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("CONSOLE_VAR_DIR", str(BASE_DIR / "var")))

#
# Core
#

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", "" if not DEBUG else "insecure-demo-key-change-me")
if not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off (make demo sets DEBUG=1 for you)")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "console.admin_site.ConsoleAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "axes",
    "csp",
    "apps.core",
    "apps.accounts",
    "apps.tenancy",
    "apps.audit",
    "apps.operations",
    "apps.fleet",
    "apps.backends",
    "apps.notifications",
    "apps.workloads",
    "apps.chargeback",
    "apps.inference",
    "apps.health",
    "apps.dashboard",
    "apps.observability",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "apps.core.middleware.RequestIdMiddleware",
    "apps.core.middleware.RefuseNulMiddleware",
    "apps.core.metrics.RequestMetricsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last: it turns a locked-out log-in attempt into the login page saying so (apps.accounts.lockout).
    "axes.middleware.AxesMiddleware",
    "apps.accounts.middleware.CurrentTenantMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"
ASGI_APPLICATION = "console.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps.accounts.context_processors.tenant_context",
                "csp.context_processors.nonce",
            ],
        },
    },
]

#
# Database
#

DATABASES = {"default": parse_database_url(env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'console.sqlite3'}"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

#
# Authentication
#

AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:home"
LOGOUT_REDIRECT_URL = "login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
SESSION_COOKIE_HTTPONLY = True
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto, let Django see requests as https.
if env_bool("SECURE_PROXY_SSL", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
# HSTS whenever the cookies are HTTPS-only: a site that needs TLS for its session says so to browsers.
# 0 turns the header off; SecurityMiddleware sends it on HTTPS responses only.
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000, minimum=0) if SESSION_COOKIE_SECURE else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = False
# Addresses: behind this many reverse proxies, the client is the N-th address from the right of
# X-Forwarded-For (0: REMOTE_ADDR). Used by the log-in lockout and the API rate limits.
NUM_PROXIES = env_int("NUM_PROXIES", 0, minimum=0)

# Log-in lockout (django-axes): failures are counted per user name and client address; after
# LOGIN_FAILURE_LIMIT of them that pair is refused, right password included, for LOGIN_COOLOFF_MINUTES.
AUTHENTICATION_BACKENDS = [
    "apps.accounts.lockout.LockoutBackend",
    # LOCAL_LOGIN off: refuses password log-ins but the break-glass accounts' (apps/accounts/sso/backend.py).
    "apps.accounts.sso.backend.BreakGlassBackend",
    # Django's ModelBackend, reading the session's user with their memberships in one statement. (Sessions made
    # under "django.contrib.auth.backends.ModelBackend" before this change log in again once.)
    "apps.accounts.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# The cool-off runs from the lock, not from the attacker's latest try.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "apps.accounts.lockout.lockout_response"
AXES_CLIENT_IP_CALLABLE = "apps.core.client_ip.client_ip"
AXES_VERBOSE = False
# Axes' own admin would let lock records be edited unaudited: unlock with `manage.py axes_reset_username`.
AXES_ENABLE_ADMIN = False
AXES_DISABLE_ACCESS_LOG = True  # successful log-ins are in the audit trail already ("user.login")

# Single sign-on with OpenID Connect (docs/sso.md, apps/accounts/sso/): off while OIDC_ISSUER_URL is empty. The
# issuer's discovery document gives every endpoint and its keys; its URLs pass the outbound policy
# (OUTBOUND_ALLOWED_NETWORKS must list a private IdP's network).
OIDC_ISSUER_URL = env_str("OIDC_ISSUER_URL", "").strip().rstrip("/")
OIDC_CLIENT_ID = env_str("OIDC_CLIENT_ID", "")
OIDC_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET", "")
OIDC_SCOPES = env_str("OIDC_SCOPES", "openid email profile groups")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_USERNAME_CLAIM = env_str("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_BUTTON_LABEL = env_str("OIDC_BUTTON_LABEL", "")  # empty: "Log in with single sign-on", translated
OIDC_TIMEOUT_S = env_int("OIDC_TIMEOUT_S", 10, minimum=1, maximum=60)
# Off: password log-in (the log-in page, the Django admin's) only for the break-glass accounts named here.
LOCAL_LOGIN = env_bool("LOCAL_LOGIN", True)
LOCAL_LOGIN_BREAK_GLASS_USERS = env_list("LOCAL_LOGIN_BREAK_GLASS_USERS", [])
if not LOCAL_LOGIN and not OIDC_ISSUER_URL and not LOCAL_LOGIN_BREAK_GLASS_USERS:
    raise ImproperlyConfigured("LOCAL_LOGIN is off with no OIDC_ISSUER_URL and no LOCAL_LOGIN_BREAK_GLASS_USERS")
if OIDC_ISSUER_URL:
    if not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", OIDC_ISSUER_URL):
        raise ImproperlyConfigured(f"OIDC_ISSUER_URL={OIDC_ISSUER_URL!r} is not an http(s) URL without query")
    if not OIDC_CLIENT_ID or not OIDC_CLIENT_SECRET:
        raise ImproperlyConfigured("OIDC_ISSUER_URL is set: OIDC_CLIENT_ID and OIDC_CLIENT_SECRET must be set too")
    if "openid" not in OIDC_SCOPES.split():
        raise ImproperlyConfigured(f"OIDC_SCOPES={OIDC_SCOPES!r} must include openid")
# mozilla-django-oidc's own names (the endpoints come from discovery at run time, apps/accounts/sso/discovery.py).
OIDC_RP_CLIENT_ID = OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = OIDC_CLIENT_SECRET
OIDC_RP_SCOPES = OIDC_SCOPES
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
OIDC_STORE_ID_TOKEN = True  # the id_token_hint of RP-initiated logout
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc:callback"
LOGIN_REDIRECT_URL_FAILURE = "login"
AUTHENTICATION_BACKENDS.append("apps.accounts.sso.backend.OidcBackend")
OIDC_FORM_ACTION_ORIGINS = [re.sub(r"^(https?://[^/]+).*$", r"\1", OIDC_ISSUER_URL)] if OIDC_ISSUER_URL else []

#
# Headers
#

# Content-Security-Policy (django-csp): scripts only from this origin or inline with the response's
# nonce (`<script nonce="{{ CSP_NONCE }}">`); no inline event handlers, no eval. Styles allow inline
# because templates and Plotly set style attributes; Bootstrap's select arrows are data: images.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "worker-src": [SELF, "blob:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        # With single sign-on the log-out form is answered with a redirect to the identity provider's
        # end_session_endpoint (RP-initiated logout), and form-action applies to every hop of it.
        "form-action": [SELF, *OIDC_FORM_ACTION_ORIGINS],
        "frame-ancestors": [NONE],
    },
}

#
# Internationalization
#

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
# Per-language date formats the templates name (DATETIME_FORMAT, ...): console/formats/<language>/formats.py.
FORMAT_MODULE_PATH = ["console.formats"]
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

#
# Static files (vendored; never a CDN)
#

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Set STATIC_ROOT (and run collectstatic) for a deployment; the demo and tests serve from the finders.
STATIC_ROOT = env_str("STATIC_ROOT", "") or None
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Serve straight from the finders so the demo and tests need no collectstatic step.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

#
# REST API
#

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.accounts.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "apps.core.api.pagination.StandardPagination",
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["apps.core.api.parsers.BoundedJSONParser"],
    "EXCEPTION_HANDLER": "apps.core.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "apps.core.api.schema.ConsoleAutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "DEFAULT_THROTTLE_CLASSES": [
        "apps.core.api.throttling.TokenRateThrottle",
        "apps.core.api.throttling.UserRateThrottle",
        "apps.core.api.throttling.AnonRateThrottle",
    ],
    "NUM_PROXIES": NUM_PROXIES or None,
}
if DEBUG:
    REST_FRAMEWORK["DEFAULT_RENDERER_CLASSES"].append("rest_framework.renderers.BrowsableAPIRenderer")

SPECTACULAR_SETTINGS = {
    "TITLE": "GPU cluster operations console API",
    "DESCRIPTION": "Tenants, queues, GPU quotas, workloads, GPU health and chargeback. "
    "Authenticate with `Authorization: Bearer <token>` (see /accounts/tokens/) or a browser session.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "RoleEnum": "apps.accounts.roles.Role",
        "ServiceAccountRoleEnum": "apps.accounts.roles.SERVICE_ACCOUNT_ROLE_CHOICES",
        "ClusterKindEnum": "apps.fleet.models.ClusterKind",
        "FaultKindEnum": "apps.backends.simulator.faults.KINDS",
        # Choice sets whose fields share a name ("state", "kind", "action") get their own readable names.
        "WorkloadStateEnum": "apps.workloads.models.WorkloadState",
        "WorkloadKindEnum": "apps.workloads.models.WorkloadKind",
        "AdmissionStateEnum": "apps.tenancy.models.AdmissionState",
        "QuotaRequestStateEnum": "apps.tenancy.models.QuotaRequestState",
        "IncidentStateEnum": "apps.health.models.IncidentState",
        "SeverityEnum": "apps.health.models.Severity",
        "RuleKindEnum": "apps.health.models.RuleKind",
        "RuleActionEnum": "apps.health.models.RuleAction",
        "SourceKindEnum": "apps.health.models.SourceKind",
        "ChannelKindEnum": "apps.notifications.models.ChannelKind",
        "PeriodStateEnum": "apps.chargeback.models.PeriodState",
        "CreditStateEnum": "apps.chargeback.models.CreditState",
        "LineKindEnum": "apps.chargeback.models.LineKind",
        "AlertStateEnum": "apps.inference.models.AlertState",
        "OperationStatusEnum": "apps.operations.models.OperationStatus",
        "NodeStateEnum": "apps.fleet.models.NodeState",
        "ActionEnum": "apps.accounts.roles.Action",
    },
}

#
# Cache: API rate-limit counters. Every web process must share it in a deployment (redis://HOST:6379/1);
# the default keeps them per process (the demo's gunicorn workers each count their own: looser limits, no service).
#

CACHE_URL = env_str("CACHE_URL", "locmem://")
if CACHE_URL.startswith(("redis://", "rediss://")):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}}
elif CACHE_URL == "locmem://":
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
else:
    raise ImproperlyConfigured(f"CACHE_URL={CACHE_URL!r} is not supported; use redis://HOST:6379/DB or locmem://")


def _throttle_rate(name: str, default: str) -> str | None:
    """`<count>/<second|minute|hour|day>`, or `off` for no limit."""
    raw = env_str(name, default).strip().lower()
    if raw in {"off", "none", ""}:
        return None
    if not re.fullmatch(r"\d+/(s|sec|second|m|min|minute|h|hour|d|day)", raw):
        raise ImproperlyConfigured(f"{name}={raw!r} is not a rate; use e.g. 600/minute, 20/second or off")
    return raw


# API rate limits (apps.core.api.throttling). A request is counted against its token, its user and,
# unauthenticated, its address; any limit reached answers 429 with Retry-After.
API_THROTTLE_RATES = {
    "token": _throttle_rate("API_THROTTLE_TOKEN", "600/minute"),
    "user": _throttle_rate("API_THROTTLE_USER", "1200/minute"),
    "anon": _throttle_rate("API_THROTTLE_ANON", "60/minute"),
    # Wrong, revoked or expired bearer tokens per client address (token guessing).
    "bad_token": _throttle_rate("API_THROTTLE_BAD_TOKEN", "30/minute"),
}

#
# Celery
#

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    # The embedded broker: messages are files in one folder that web, worker and beat share.
    _broker_dir = VAR_DIR / "broker"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir),
        "data_folder_out": str(_broker_dir),
        "control_folder": str(VAR_DIR / "broker-control"),
    }
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True  # a worker that dies mid-task leaves the message for another; tasks are idempotent
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# django-celery-beat's database scheduler, sending only while it holds the schedule lease: two or more beat processes
# may run (docs/deploy-kubernetes.md, "Beat"), one of them sends. BEAT_LEASE_S is how long a lease lasts unrenewed:
# the active beat renews it every third of that, and a standby takes over at most this long after the active one
# stopped renewing (killed, frozen, cut off from the database).
CELERY_BEAT_SCHEDULER = "apps.operations.beat:LeasedDatabaseScheduler"
BEAT_LEASE_S = env_int("BEAT_LEASE_S", 15, minimum=2, maximum=600)
CELERY_TIMEZONE = TIME_ZONE
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Queues and routing (docs/configuration.md, "Celery queues and workers"). Periodic work is fanned out by beat
# into one task per cluster, and each kind of per-cluster work has a queue of its own, so that a deployment can
# give a kind its own workers (`-Q health`) and a long inventory sync never sits in front of a health cycle in
# one queue. A worker started without -Q consumes every queue below. The fan-outs themselves, operations, the
# outbox and everything else stay on the default queue.
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_QUEUE_NAMES = ["celery", "health", "inventory", "metering"]
CELERY_TASK_QUEUES = [Queue(name, routing_key=name) for name in CELERY_QUEUE_NAMES]
CELERY_TASK_ROUTES = {
    "apps.health.tasks.ingest_cluster_task": {"queue": "health"},
    "apps.health.tasks.check_hung_jobs_task": {"queue": "health"},
    "apps.fleet.tasks.sync_cluster_task": {"queue": "inventory"},
    "apps.chargeback.tasks.meter_cluster_task": {"queue": "metering"},
}
# Processes per worker (prefork). Two workers of two processes each carry ten 10,240-GPU clusters in the
# benchmark (bench/README.md, issue 23); more clusters want more workers, not more processes on one host.
CELERY_WORKER_CONCURRENCY = env_int("CELERY_WORKER_CONCURRENCY", 2, minimum=1)
# A fan-out sends a cluster's task only once its last one of that kind finished (apps/fleet/stamps.py). One that
# neither started nor finished within this many seconds of being sent, or finished within this many seconds of
# starting, is taken as lost (a purged queue, a killed worker) and no longer holds its cluster back.
FAN_OUT_STAMP_EXPIRY_S = env_int("FAN_OUT_STAMP_EXPIRY_S", 120, minimum=10)

#
# Console
#

# API tokens look like `gpuc_<random>`; the prefix makes leaked tokens easy to find with secret scanners.
API_TOKEN_PREFIX = "gpuc_"
API_TOKEN_LAST_USED_RESOLUTION_S = env_int("API_TOKEN_LAST_USED_RESOLUTION_S", 60, minimum=0)
# Every token expires: at most this many days after it is created (also the expiry when none is asked for).
API_TOKEN_MAX_LIFETIME_DAYS = env_int("API_TOKEN_MAX_LIFETIME_DAYS", 365, minimum=1, maximum=3650)
# Console tokens issued by POST /api/v1/token-exchange/ live at most this many minutes (docs/sso.md).
TOKEN_EXCHANGE_MAX_MINUTES = env_int("TOKEN_EXCHANGE_MAX_MINUTES", 60, minimum=1, maximum=1440)
# Seconds an outbox entry's claim lasts without renewal. The worker holding it renews it every third of this while
# the backend call runs (apps/workloads/services/outbox.py), so a long call keeps it; a worker killed while it held
# one leaves it to the next sweep (the 10 s workloads tick) at most this long after its last renewal.
OUTBOX_LEASE_S = env_int("OUTBOX_LEASE_S", 30, minimum=2, maximum=3600)
# Seconds a process reuses the fleet's free-GPU count per model when deciding admissions (0: always re-read).
ADMISSION_CAPACITY_CACHE_S = env_int("ADMISSION_CAPACITY_CACHE_S", 5, minimum=0)
# GPU models and priority tiers are re-read at most this often per process (0: on every use).
REFERENCE_CACHE_S = env_int("REFERENCE_CACHE_S", 5, minimum=0)
# The overview's fleet-wide figures every viewer shares (the utilization heatmap, every tenant's spend this
# month) are recomputed at most this often per process (0: on every page view). Telemetry and metering
# change them every 15 and 60 s; tenant rows are filtered per viewer after the cache.
OVERVIEW_CACHE_S = env_int("OVERVIEW_CACHE_S", 15, minimum=0)
# Chargeback: the currency rate cards and statements are in, and what counts as an idle GPU minute.
CHARGEBACK_CURRENCY = env_str("CHARGEBACK_CURRENCY", "USD")
CHARGEBACK_IDLE_UTILIZATION_PCT = env_int("CHARGEBACK_IDLE_UTILIZATION_PCT", 5, minimum=0, maximum=100)
# Inference service telemetry: how often each service's engine /metrics is scraped, how long one scrape
# may take before the service's telemetry counts as stale, and how long samples are kept.
INFERENCE_SCRAPE_INTERVAL_S = env_int("INFERENCE_SCRAPE_INTERVAL_S", 15, minimum=1)
INFERENCE_SCRAPE_TIMEOUT_S = env_int("INFERENCE_SCRAPE_TIMEOUT_S", 3, minimum=1, maximum=60)
INFERENCE_TELEMETRY_RETENTION_DAYS = env_int("INFERENCE_TELEMETRY_RETENTION_DAYS", 8, minimum=1)
# Workload logs streamed from the clusters (docs/logs.md). A followed log holds one web server thread (and one
# connection to the cluster per worker) while it lasts: it ends after LOGS_FOLLOW_MAX_S at the latest, a process
# serves at most LOGS_FOLLOW_MAX_STREAMS of them at once (more: 429), and following every worker of a gang at once
# is refused above LOGS_FOLLOW_MAX_WORKERS workers (as kubectl's --max-log-requests does).
LOGS_FOLLOW_MAX_S = env_int("LOGS_FOLLOW_MAX_S", 3600, minimum=1, maximum=86_400)
LOGS_FOLLOW_MAX_STREAMS = env_int("LOGS_FOLLOW_MAX_STREAMS", 4, minimum=1)
LOGS_FOLLOW_MAX_WORKERS = env_int("LOGS_FOLLOW_MAX_WORKERS", 8, minimum=1, maximum=64)
# /metrics answers requests from these networks, or with `Authorization: Bearer <METRICS_TOKEN>`.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
METRICS_ALLOWED_NETWORKS = [
    ipaddress.ip_network(net.strip(), strict=False)
    for net in env_list("METRICS_ALLOWED_NETWORKS", ["127.0.0.1/32", "::1/128"])
    if net.strip()
]
# Outbound requests to URLs from the console's configuration (webhooks, cluster API servers, slurmrestd,
# telemetry, inference metrics; apps/core/outbound.py) reach public addresses only, and these networks besides
# (loopback, private, link-local). The deployment's choice: nothing in the console widens it. `manage.py demo`
# allows loopback; the tests allow it in tests/conftest.py.
OUTBOUND_ALLOWED_NETWORKS = env_networks("OUTBOUND_ALLOWED_NETWORKS", [])
# A cluster's `secret_env` must name a variable starting with this, so no setting of the console (SECRET_KEY,
# DATABASE_URL, ...) can be sent to a cluster as its token.
SECRET_ENV_PREFIX = env_name_prefix("SECRET_ENV_PREFIX", "GPUC_SECRET_")
API_PAGE_SIZE = env_int("API_PAGE_SIZE", 50, minimum=1, maximum=1000)
API_MAX_PAGE_SIZE = env_int("API_MAX_PAGE_SIZE", 1000, minimum=1)
API_MAX_JSON_DEPTH = env_int("API_MAX_JSON_DEPTH", 32, minimum=2, maximum=200)

# GPU health (apps/health).
HEALTH_SCRAPE_INTERVAL_S = env_int("HEALTH_SCRAPE_INTERVAL_S", 15, minimum=1)
HEALTH_ROLLUP_DAYS = env_int("HEALTH_ROLLUP_DAYS", 30, minimum=1)
# The health cycle applies the automatic cordons it decides itself, right after recording the incident, instead
# of leaving them to the next free worker (the operation's message is still sent: whichever runs first claims it,
# the other skips). Scrape finished to cordon applied then costs the rules and one backend call, not a queue wait.
HEALTH_CORDON_INLINE = env_bool("HEALTH_CORDON_INLINE", True)
# An incident whose cause stayed quiet this long is closed by automation where that is safe.
HEALTH_QUIET_S = env_int("HEALTH_QUIET_S", 120, minimum=1)
# The hung-job rule's stack dump (its `dump` parameter): a command run per pod of a hung job, without a shell, its
# {namespace} {pod} {node} {job} filled in, e.g. "kubectl exec -n {namespace} {pod} -- py-spy dump --pid 1"; its
# output, trimmed, goes on the incident's timeline. Empty: simulated clusters answer themselves, others get none.
HUNG_JOB_DUMP_COMMAND = env_str("HUNG_JOB_DUMP_COMMAND", "")
HUNG_JOB_DUMP_TIMEOUT_S = env_int("HUNG_JOB_DUMP_TIMEOUT_S", 30, minimum=1, maximum=600)
# Links in notifications (e.g. https://console.example.com); relative links when empty.
CONSOLE_BASE_URL = env_str("CONSOLE_BASE_URL", "")
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend" if DEBUG else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1, maximum=65535)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpu-console@localhost")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}, "axes": {"level": "WARNING"}},
}

# Every variable this file reads, as it was when the file ended (never a cluster's secret, whatever the prefix):
# a copy, so that a later env_str() elsewhere (a test's made-up name) is not taken for a setting.
SETTINGS_ENV_NAMES = frozenset(ENV_READ)
