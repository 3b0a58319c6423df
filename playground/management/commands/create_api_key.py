"""`python manage.py create_api_key NAME [--rpm N] [--max-queued N]`: a bearer key for /v1/.

Prints the secret once (only its hash is stored). Once any active key exists, every API
request needs one; before that, a server bound to loopback serves requests without a key.
"""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from ...models import ApiKey


class Command(BaseCommand):
    help = "Create an API key for the OpenAI-compatible API and print it (shown only once)."

    def add_arguments(self, parser):
        parser.add_argument("name", help="a unique name; the key's runs show it as their source")
        parser.add_argument("--rpm", type=int, default=60, help="requests per minute (0 = no limit; default 60)")
        parser.add_argument("--max-queued", type=int, default=4,
                            help="runs queued at once (0 = no limit; default 4)")

    def handle(self, *args, name, rpm, max_queued, **options):
        if rpm < 0 or max_queued < 0:
            raise CommandError("--rpm and --max-queued must be >= 0")
        if ApiKey.objects.filter(name=name).exists():
            raise CommandError(f"an API key named {name!r} already exists (names are unique)")
        _, secret = ApiKey.create_key(name, requests_per_minute=rpm, max_queued_runs=max_queued)
        self.stdout.write(secret)
