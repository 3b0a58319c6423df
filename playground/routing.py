"""WebSocket URL routes (wrapped by asgi.py in origin + auth/session middleware)."""
from django.urls import path

from .consumers import GenerateConsumer

websocket_urlpatterns = [
    path("ws/generate/", GenerateConsumer.as_asgi()),
]
