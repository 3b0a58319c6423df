"""`python manage.py playground`: the whole playground in one process, embedded defaults.

Applies migrations, loads the model, starts Daphne and runs one in-process GPU worker as an
asyncio task in Daphne's own event loop. With the default in-memory channel layer that is
required: InMemoryChannelLayer is one object per process whose asyncio queues belong to the
loop that uses them, so consumer and worker must share both the layer instance and the loop
(Daphne's `ready_callable` runs after Daphne has made its loop current, before it starts).
The code path is the production one; only the layer and the process layout differ.
With REDIS_URL set, --no-worker gives a plain web process (workers: `playground_worker`).
"""
from __future__ import annotations

import asyncio
import logging

import daphne.server  # noqa: F401  (installs Twisted's asyncio reactor before anything imports Twisted)
from channels.layers import get_channel_layer
from channels.routing import get_default_application
from daphne.endpoints import build_endpoint_description_strings
from daphne.server import Server
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from inference.errors import EngineError

from ...layer import check_redis_timeouts
from ...models import Run
from ...modelsource import default_device, load_engine
from ...worker import Worker

log = logging.getLogger("playground")


class Command(BaseCommand):
    help = "Run the playground: migrations, Daphne and an in-process GPU worker (one command)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--model", default=None,
                            help="a .gguf file, a Hugging Face folder, a hub id or synthetic:SHAPE "
                                 "(default: PLAYGROUND_MODEL, else SmolLM2-135M-Instruct)")
        parser.add_argument("--device", default=None, help="cpu | cuda | cuda:N (default: cuda when available)")
        parser.add_argument("--dtype", default=None, help="float32 | bfloat16 | float16 (default per device)")
        parser.add_argument("--weights", default=None, choices=["fp8", "bf16", "fp16", "fp32"],
                            help="fp8: e4m3 linear layers and an int8 LM head, quantized at load (default: the "
                                 "checkpoint's, in --dtype)")
        parser.add_argument("--no-worker", action="store_true",
                            help="web only (needs REDIS_URL and separate `playground_worker` processes)")

    def handle(self, *args, host, port, model, device, dtype, weights, no_worker, **options):
        call_command("migrate", interactive=False, verbosity=0)
        check_redis_timeouts(get_channel_layer())
        if not settings.REDIS_URL:  # the in-memory queue died with the last process: nothing can serve these
            stale = Run.objects.filter(status__in=(Run.QUEUED, Run.RUNNING)).update(
                status=Run.ERROR, error="the server restarted before this run finished", finished_at=timezone.now())
            if stale:
                self.stdout.write(f"Failed {stale} run(s) left unfinished by the previous server process")
        worker = None
        if not no_worker:
            device = device or default_device()
            self.stdout.write(f"Loading model on {device} ...")
            try:
                engine = load_engine(model, device, dtype, weights)
            except EngineError as e:
                raise CommandError(str(e)) from None
            info = engine.info
            self.stdout.write(f"Model {info.get('model')} ({info.get('params', 0) / 1e6:.1f}M params, "
                              f"{info.get('dtype')}, weights {info.get('weights')}, {'fast path' if info.get('fast_path') else 'reference'}"
                              f"{', RANDOM WEIGHTS' if info.get('random_weights') else ''})")
            worker = Worker(engine, get_channel_layer())
        elif not settings.REDIS_URL:
            self.stderr.write("warning: --no-worker with the in-memory layer: nothing will serve runs")
        if host in ("0.0.0.0", "::"):
            self.stderr.write("note: listening on all interfaces; set PLAYGROUND_ALLOWED_HOSTS to the names "
                              "browsers use (requests and WebSocket origins are checked against it)")
        elif host not in settings.ALLOWED_HOSTS:
            settings.ALLOWED_HOSTS.append(host.strip("[]"))
        settings.PLAYGROUND_BIND_HOST = host  # loopback: the API may serve requests without a key

        def ready():
            if worker is not None:
                task = asyncio.get_event_loop().create_task(worker.run())
                task.add_done_callback(_report_crash)
            self.stdout.write(f"Playground at http://{host}:{port}/  (Ctrl-C to quit)")
            self.stdout.flush()

        server = Server(
            application=get_default_application(),
            endpoints=build_endpoint_description_strings(host=host, port=port),
            ready_callable=ready,
            verbosity=1,
            websocket_max_message_size=settings.PLAYGROUND_DAPHNE_MAX_MESSAGE_BYTES,
        )
        if worker is not None:
            from twisted.internet import reactor

            from twisted.internet.defer import Deferred

            def shutdown():  # fail the running job and tell its client before the loop stops
                worker.request_stop()
                task = asyncio.get_event_loop().create_task(asyncio.wait_for(worker.stopped(), 10))
                task.add_done_callback(lambda _: worker.stop())
                return Deferred.fromFuture(task)

            reactor.addSystemEventTrigger("before", "shutdown", shutdown)
        server.run()


def _report_crash(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the in-process worker stopped", exc_info=task.exception())
