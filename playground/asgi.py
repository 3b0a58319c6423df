"""ASGI entry point: `daphne playground.asgi:application`.

HTTP goes to Django (static files served too unless PLAYGROUND_SERVE_STATIC=0, so the
embedded playground works offline with no front web server); WebSockets go through
ExactOriginValidator(AuthMiddlewareStack(URLRouter(...))): the Origin must be this page's
exact origin (security.py).
"""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
django_asgi_app = get_asgi_application()  # sets Django up before the imports below

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from .routing import websocket_urlpatterns  # noqa: E402
from .security import ExactOriginValidator  # noqa: E402

http_app = ASGIStaticFilesHandler(django_asgi_app) if settings.PLAYGROUND_SERVE_STATIC else django_asgi_app

application = ProtocolTypeRouter({
    "http": http_app,
    "websocket": ExactOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
})
