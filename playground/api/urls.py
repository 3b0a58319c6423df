"""Routes of the OpenAI-compatible API, mounted at /v1/."""
from django.urls import path

from . import views

urlpatterns = [
    path("models", views.models, name="models"),
    path("completions", views.completions, name="completions"),
    path("chat/completions", views.chat_completions, name="chat_completions"),
]
