"""Django settings for bloomops. Everything a deployment changes comes from the environment."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

from csp.constants import NONE, SELF

from bloomops.pgserver import (
    database_url,
    db_role,
    django_database,
    runtime_database_url,
    var_secret,
)

BASE_DIR = Path(__file__).resolve().parent.parent


def _flag(name: str, default: str = "0") -> bool:
    return os.environ.get(name, default).strip().lower() in {"1", "true", "yes", "on"}


DEBUG = _flag("BLOOMOPS_DEBUG")


def _int(name: str, default: int) -> int:
    return int(os.environ.get(name, str(default)))


def _list(name: str, default: str = "") -> list[str]:
    """A comma-separated setting: its items, stripped, the empty ones left out."""
    return [v.strip() for v in os.environ.get(name, default).split(",") if v.strip()]


# BLOOMOPS_SECRET_KEY, else a random key made once for this checkout (var/secret_key).
SECRET_KEY = os.environ.get("BLOOMOPS_SECRET_KEY") or var_secret("secret_key")
# Earlier keys still accepted after a rotation (API tokens, signed values; not sessions).
SECRET_KEY_FALLBACKS = _list("BLOOMOPS_SECRET_KEY_FALLBACKS")
# Each ticked item of a bulk form is a field: Django's 1,000 answered "select all" over a
# long list with a bare 400. Past this the form is refused by its own words (web/bulk.py).
DATA_UPLOAD_MAX_NUMBER_FIELDS = 10000
# The keys of the action records' keyed seals (RULES.md#evidence), never in the database: the
# first seals, every one verifies (an old key kept after a new one). Else one made once for
# this checkout (var/seal_key).
BLOOMOPS_SEAL_KEYS = _list("BLOOMOPS_SEAL_KEYS") or [var_secret("seal_key")]
ALLOWED_HOSTS = _list("BLOOMOPS_ALLOWED_HOSTS", "127.0.0.1,localhost")
if DEBUG:
    ALLOWED_HOSTS += ["testserver", "*"]

INSTALLED_APPS = [
    # first: its changepassword and createsuperuser record what Django's own would not
    "bloomops.accounts",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "axes",
    "csp",
    "django_htmx",
    "django_tables2",
    "bloomops.tapdb",
    "bloomops.execution",
    "bloomops.web",
    "bloomops.api",
    "bloomops.worker",
    "bloomops.demo",
    "bloomops.bench",
    "ninja",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # after WhiteNoise, so static files keep their cache: every other answer is no-store
    "bloomops.web.middleware.NoStoreMiddleware",
    # refuses NUL in path/query (everywhere); under /api/ also oversize bodies, errors as JSON
    # (docs/API.md)
    "bloomops.api.guard.ApiGuardMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "bloomops.web.middleware.SignInAgainMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "bloomops.accounts.sessions.IdleSessionMiddleware",
    "bloomops.accounts.sessions.OwnPasswordFirstMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "bloomops.web.middleware.MethodNotAllowedPage",
    # Last, as django-axes asks: it turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "bloomops.urls"
WSGI_APPLICATION = "bloomops.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "bloomops.accounts.context_processors.roles",
                "bloomops.web.drafts.drafts",
            ],
        },
    },
]

# Two PostgreSQL roles (docs/DEPLOY.md): the owner runs bootstrap and migrations, the runtime
# role (data privileges only, audit_log append-only) everything else; pgserver.db_role decides.
_OWNER_URL = database_url()
DATABASE_ROLES = {
    "owner": django_database(_OWNER_URL),
    "runtime": django_database(runtime_database_url(_OWNER_URL)),
}
BLOOMOPS_DB_ROLE = db_role()
DATABASES = {"default": dict(DATABASE_ROLES[BLOOMOPS_DB_ROLE])}
DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ.get("BLOOMOPS_CONN_MAX_AGE", "60"))
DATABASES["default"]["TEST"] = {"NAME": os.environ.get("BLOOMOPS_TEST_DB", "test_bloomops")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# TapDB identity: every connection declares who is writing (see bloomops.tapdb.apps).
TAPDB_DOMAIN_CODE = os.environ.get("BLOOMOPS_DOMAIN_CODE", "Z")
TAPDB_OWNER_REPO_NAME = os.environ.get("BLOOMOPS_OWNER_REPO_NAME", "bloomops")
# The lab's tenant: every object bloomops writes or reads carries it.
# The demo's when unset: a lab's own is chosen once (check --deploy warns of the demo's).
DEMO_TENANT_ID = "7b1c5e3a-0d2f-4c1e-9a8b-b100000000ee"
TAPDB_TENANT_ID = os.environ.get("BLOOMOPS_TENANT_ID", DEMO_TENANT_ID)
# Capabilities of every human (HUMAN_SESSION) worker, comma-separated. Unset: every step of
# the demo's queues.
DEMO_HUMAN_CAPABILITIES = ("wetlab.extraction,wetlab.qc,wetlab.libprep,wetlab.pooling,"
                           "wetlab.sequencing,compute.dispatch,compute.qc")
BLOOMOPS_HUMAN_CAPABILITIES = _list("BLOOMOPS_HUMAN_CAPABILITIES", DEMO_HUMAN_CAPABILITIES)
# Per-person / per-role overrides of human workers' profiles, JSON: {"*" | "role:<role>" |
# "user:<username>": {"capabilities": [...], "site_scope": [...], "platform_scope": [...],
# "assay_scope": [...], "max_concurrent_leases": n, "heartbeat_ttl_seconds": n}}.
BLOOMOPS_HUMAN_PROFILES = json.loads(os.environ.get("BLOOMOPS_HUMAN_PROFILES") or "{}")
# Hold codes an operator may choose when placing a hold, comma-separated (docs/RULES.md#holds).
# Holds placed earlier with other codes keep them and can still be released.
DEFAULT_HOLD_CODES = ("OPERATOR_HOLD,QC_FAIL,CONTAMINATION,INTEGRITY,QA_REVIEW,SAMPLE_QUALITY,"
                      "LABEL_ISSUE,INSTRUMENT_ISSUE,REAGENT_ISSUE,AWAITING_INFORMATION")
BLOOMOPS_HOLD_CODES = [c.upper() for c in _list("BLOOMOPS_HOLD_CODES", DEFAULT_HOLD_CODES)]
# Plan the claim path's statements once per session (PREPARE/EXECUTE). Turn off behind a
# transaction-pooling proxy that does not keep session state.
BLOOMOPS_PREPARED_STATEMENTS = _flag("BLOOMOPS_PREPARED_STATEMENTS", "1")
# How long an action waits for a row another action holds before giving up.
BLOOMOPS_LOCK_TIMEOUT_MS = int(os.environ.get("BLOOMOPS_LOCK_TIMEOUT_MS", "5000"))
# Workers one account may have registered and not retired (a service account's instrument
# adapters and processes): every read of workers, the statistics and /metrics grow with them.
BLOOMOPS_MAX_WORKERS_PER_ACCOUNT = max(1, _int("BLOOMOPS_MAX_WORKERS_PER_ACCOUNT", 100))
# Destination recorded on every outbox_event row the executor writes.
BLOOMOPS_OUTBOX_DESTINATION = os.environ.get("BLOOMOPS_OUTBOX_DESTINATION", "bloomops.execution")
# Outbox dispatcher sink: "log" or an http(s):// webhook URL (see dispatch_outbox).
BLOOMOPS_OUTBOX_SINK = os.environ.get("BLOOMOPS_OUTBOX_SINK", "log")
# The statistics recorder (run_recorder, RULES.md#statistics): seconds between its passes
# (readers compute live once its snapshot is older than twice this), days of history kept.
BLOOMOPS_RECORDER_INTERVAL = max(1, _int("BLOOMOPS_RECORDER_INTERVAL", 10))
BLOOMOPS_HISTORY_DAYS = max(1, _int("BLOOMOPS_HISTORY_DAYS", 14))
# How often an open dashboard asks again for its table and for its charts (seconds).
BLOOMOPS_DASHBOARD_REFRESH_SECONDS = max(1, _int("BLOOMOPS_DASHBOARD_REFRESH_SECONDS", 5))
# How often an open My work asks whether each of its claims still holds (a hold placed by QA,
# an admin's force expiry): a card that kept counting down with working buttons lied.
BLOOMOPS_MY_WORK_REFRESH_SECONDS = max(1, _int("BLOOMOPS_MY_WORK_REFRESH_SECONDS", 20))
BLOOMOPS_HISTORY_REFRESH_SECONDS = max(1, _int("BLOOMOPS_HISTORY_REFRESH_SECONDS", 60))
# When set, /metrics requires "Authorization: Bearer <this>" (or the API token of a person
# with a bloomops role).
BLOOMOPS_METRICS_TOKEN = os.environ.get("BLOOMOPS_METRICS_TOKEN", "")

# API tokens expire this many days after creation unless created with --days.
BLOOMOPS_API_TOKEN_DAYS = _int("BLOOMOPS_API_TOKEN_DAYS", 90)

# Two-person approvals (docs/RULES.md#approvals): which of the engine's approval rules apply
# (comma-separated names; "none" for none), the hold codes that make a hold an integrity hold,
# and how long a request waits for its decision. Checked at start (execution/apps.py).
BLOOMOPS_APPROVAL_RULES = [r for r in _list(
    "BLOOMOPS_APPROVAL_RULES", "release_integrity_hold,requeue_dead_letter,cancel_integrity_held")
    if r != "none"]
BLOOMOPS_INTEGRITY_HOLD_CODES = [c.upper() for c in _list("BLOOMOPS_INTEGRITY_HOLD_CODES",
                                                          "QC_FAIL,CONTAMINATION,INTEGRITY")]
BLOOMOPS_APPROVAL_TTL_SECONDS = _int("BLOOMOPS_APPROVAL_TTL_SECONDS", 86400)

# A password is also a person's electronic signature (docs/RULES.md#approvals): no common,
# all-digit or name-like ones.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": f"django.contrib.auth.password_validation.{name}"}
    for name in ("UserAttributeSimilarityValidator", "MinimumLengthValidator",
                 "CommonPasswordValidator", "NumericPasswordValidator")
] + [{"NAME": "bloomops.accounts.passwords.LabPasswordValidator"}]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"
# The well-known demo password; any account still using it is refused when DEBUG is off, at
# sign-in and on the API (bloomops.accounts.passwords).
DEMO_PASSWORD = "bloomops"
AUTHENTICATION_BACKENDS = [
    # django-axes first: it refuses a locked-out username + address before any password check.
    "axes.backends.AxesStandaloneBackend",
    "bloomops.accounts.backends.SignInBackend",
]
# Sign-in throttling (django-axes): after this many failures for one username from one address,
# that pair is locked out for the cool-off time. `manage.py axes_reset` lifts every lockout.
AXES_FAILURE_LIMIT = _int("BLOOMOPS_SIGNIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=_int("BLOOMOPS_SIGNIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_ENABLE_ADMIN = False
AXES_VERBOSE = False
AXES_CLIENT_IP_CALLABLE = "bloomops.accounts.backends.client_address"
# Behind a TLS-terminating proxy (docs/DEPLOY.md): it tells us the scheme in X-Forwarded-Proto
# and the client's address as the last X-Forwarded-For entry.
BEHIND_TLS_PROXY = _flag("BLOOMOPS_BEHIND_TLS_PROXY")
if BEHIND_TLS_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# A session ends after this long without activity (shared bench terminals); the dashboard's
# auto-refresh is not activity (bloomops.accounts.sessions).
SESSION_IDLE_SECONDS = 60 * _int("BLOOMOPS_SESSION_IDLE_MINUTES", 30)
SESSION_COOKIE_AGE = SESSION_IDLE_SECONDS
SESSION_EXPIRE_AT_BROWSER_CLOSE = True
# Stored under a keyed digest of the cookie: reading the table does not sign anyone in.
SESSION_ENGINE = "bloomops.accounts.session_store"

# Production is DEBUG off: HTTPS only, cookies never sent in clear, HSTS (docs/DEPLOY.md).
SECURE_SSL_REDIRECT = not DEBUG and _flag("BLOOMOPS_SSL_REDIRECT", "1")
if BEHIND_TLS_PROXY and not SECURE_SSL_REDIRECT:
    SILENCED_SYSTEM_CHECKS = ["security.W008"]  # the proxy redirects plain HTTP itself
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = not DEBUG
SECURE_HSTS_SECONDS = 0 if DEBUG else _int("BLOOMOPS_HSTS_SECONDS", 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _flag("BLOOMOPS_HSTS_INCLUDE_SUBDOMAINS", "1")
SECURE_HSTS_PRELOAD = _flag("BLOOMOPS_HSTS_PRELOAD", "1")
SECURE_CONTENT_TYPE_NOSNIFF = True
# One policy in every mode, so the browser tests meet the production policy: scripts and styles
# only from our own static files (no inline code, no eval; htmx is configured for that in
# base.html).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

LANGUAGE_CODE = "en-us"
# The lab's zone: the wall clock of times the server writes into sentences (a banner's
# "until 14:05 CET"); the browser rewrites those it marks in the reader's own. Stored
# instants, exports and audit stamps stay UTC. Django refuses an unknown zone at start.
TIME_ZONE = os.environ.get("BLOOMOPS_TIME_ZONE", "").strip() or "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "var" / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
WHITENOISE_USE_FINDERS = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

DJANGO_TABLES2_TEMPLATE = "django_tables2/bootstrap5.html"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "bloomops": {
            "handlers": ["console"],
            "level": os.environ.get("BLOOMOPS_LOG_LEVEL", "INFO"),
        },
        # A server error's traceback goes to the server's log in every mode, not to e-mail.
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
    },
}
