"""Django settings for the playground: embedded defaults, overridable by environment.

Embedded default (no env): SQLite file, in-memory channel layer, one process
(`python manage.py playground`). Production: set REDIS_URL (channels_redis layer shared
by many Daphne processes and `manage.py playground_worker` processes) and the secrets.

Environment variables (all optional):
  PLAYGROUND_SECRET_KEY     secret key (else one is created once in the cache dir)
  PLAYGROUND_DEBUG          "1" for Django debug pages
  PLAYGROUND_ALLOWED_HOSTS  comma list (default 127.0.0.1,localhost,[::1])
  PLAYGROUND_CSRF_TRUSTED_ORIGINS  comma list, e.g. https://play.example.com (behind a TLS proxy)
  PLAYGROUND_DB             SQLite path (default ./db.sqlite3)
  PLAYGROUND_CACHE_DIR      where synthetic checkpoints and the secret key live
  PLAYGROUND_MODEL          the worker's model: .gguf file, folder, hub id or synthetic:SHAPE (default SmolLM2)
  PLAYGROUND_MAX_TOKENS     upper bound for max_tokens (default 8192)
  PLAYGROUND_SERVE_STATIC   "0" to leave /static/ to a front web server
  PLAYGROUND_TLS            "1" behind a TLS proxy: Secure cookies, HSTS, CSP
  PLAYGROUND_METRICS_TOKEN  bearer token that opens /metrics on a public bind (else staff only)
  REDIS_URL                 e.g. redis://127.0.0.1:6379/0 -> channels_redis layer
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

from playground.layer import LayerConfig
from playground.limits import ClientLimits, Reliability

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in ("1", "true", "yes", "on")


def _cache_dir() -> Path:
    if os.environ.get("PLAYGROUND_CACHE_DIR"):
        return Path(os.environ["PLAYGROUND_CACHE_DIR"])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "fastest-playground"


def _secret_key(cache_dir: Path) -> str:
    """Env key, else one random key kept in the cache dir so sessions survive restarts."""
    if os.environ.get("PLAYGROUND_SECRET_KEY"):
        return os.environ["PLAYGROUND_SECRET_KEY"]
    path = cache_dir / "secret_key"
    try:
        return path.read_text().strip()
    except OSError:
        key = secrets.token_urlsafe(50)
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # private from the first byte
            with os.fdopen(fd, "w") as f:
                f.write(key)
        except OSError:
            pass  # read-only home: a per-process key still works for one process
        return key


PLAYGROUND_CACHE_DIR = _cache_dir()
SECRET_KEY = _secret_key(PLAYGROUND_CACHE_DIR)
DEBUG = _env_bool("PLAYGROUND_DEBUG", False)
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("PLAYGROUND_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",")
    if h.strip()
]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("PLAYGROUND_CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

INSTALLED_APPS = [
    "daphne",  # before staticfiles: `runserver` becomes the ASGI server
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "playground.apps.PlaygroundConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "playground.security.ContentSecurityPolicyMiddleware",
    "playground.security.AdminLoginThrottleMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "playground.urls"
ASGI_APPLICATION = "playground.asgi.application"

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
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("PLAYGROUND_DB", str(BASE_DIR / "db.sqlite3")),
        "OPTIONS": {
            # The worker heartbeat and the web views write concurrently: WAL + IMMEDIATE
            # transactions + a generous timeout avoid "database is locked".
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL;",
        },
    }
}

REDIS_URL = os.environ.get("REDIS_URL", "")
PLAYGROUND_LAYER = LayerConfig()
CHANNEL_LAYERS = PLAYGROUND_LAYER.channel_layers(REDIS_URL)

# Behind a TLS-terminating proxy (PLAYGROUND_TLS=1): Secure cookies, HSTS, the proxy's
# X-Forwarded-Proto trusted, and a Content Security Policy without inline script.
PLAYGROUND_TLS = _env_bool("PLAYGROUND_TLS", False)
if PLAYGROUND_TLS:
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = 365 * 24 * 3600
    SECURE_CONTENT_TYPE_NOSNIFF = True
PLAYGROUND_CSP = "" if not PLAYGROUND_TLS else (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'")
PLAYGROUND_LOGIN_FAILURES = 10  # failed admin logins per IP ...
PLAYGROUND_LOGIN_WINDOW_S = 300  # ... within this window, then 429

SESSION_ENGINE = "django.contrib.sessions.backends.db"
SESSION_COOKIE_AGE = 60 * 60 * 24 * 30
LOGIN_URL = "admin:login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "build" / "static"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Playground knobs (read by services.py, worker.py and the management commands).
PLAYGROUND_MODEL = os.environ.get("PLAYGROUND_MODEL", "")
PLAYGROUND_MAX_TOKENS = int(os.environ.get("PLAYGROUND_MAX_TOKENS", "8192"))
PLAYGROUND_MAX_INPUT_CHARS = 200_000
PLAYGROUND_FRAME_INTERVAL_S = 0.020
PLAYGROUND_RELIABILITY = Reliability()
PLAYGROUND_HEARTBEAT_S = PLAYGROUND_RELIABILITY.heartbeat_s
PLAYGROUND_CLIENT_LIMITS = ClientLimits()
# WebSocket frames: up to this many bytes are read (larger: an error frame); Daphne is told to
# take twice this, so a frame between the two is answered, beyond it closed with 1009.
PLAYGROUND_MAX_FRAME_BYTES = 4 * 1024 * 1024
PLAYGROUND_DAPHNE_MAX_MESSAGE_BYTES = 2 * PLAYGROUND_MAX_FRAME_BYTES
PLAYGROUND_QUEUE_CHANNEL = "inference"
PLAYGROUND_SERVE_STATIC = _env_bool("PLAYGROUND_SERVE_STATIC", True)
# The address `manage.py playground` listens on (it sets this); "" = unknown (plain daphne), which
# counts as public: the API then needs a key and /metrics staff or the metrics token.
PLAYGROUND_BIND_HOST = ""
PLAYGROUND_METRICS_TOKEN = os.environ.get("PLAYGROUND_METRICS_TOKEN", "")  # bearer token for /metrics

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"playground": {"handlers": ["console"], "level": "INFO"}},
}
