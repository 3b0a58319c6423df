"""HTTP routes: editor, share links, history partial, staff dashboard, admin, the OpenAI-compatible API, Prometheus metrics."""
from django.contrib import admin
from django.urls import include, path

from . import metrics, views
from .api.urls import urlpatterns as api_urls

playground_patterns = [
    path("", views.editor, name="editor"),
    path("save/", views.save, name="save"),
    path("history/", views.history, name="history"),
    path("p/<str:slug>/", views.share, name="share"),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("dashboard/live/", views.dashboard_live, name="dashboard_live"),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("v1/", include((api_urls, "api"))),
    path("metrics", metrics.metrics, name="metrics"),
    path("", include((playground_patterns, "playground"))),
]
