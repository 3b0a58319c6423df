"""App config for the playground app (models, admin, templates under templates/playground/)."""
from django.apps import AppConfig


class PlaygroundConfig(AppConfig):
    name = "playground"
    verbose_name = "Coding playground"
    default_auto_field = "django.db.models.BigAutoField"
