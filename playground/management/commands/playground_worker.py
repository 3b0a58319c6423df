"""`python manage.py playground_worker`: one GPU worker process for the Redis setup.

Production layout: REDIS_URL set; N `daphne playground.asgi:application` processes and one
of these per GPU (`--device cuda:0`, `cuda:1`, ... or CUDA_VISIBLE_DEVICES). All share the
"inference" queue on Redis; each job is received by exactly one worker. SIGTERM or Ctrl-C fails
the running job with a message to its client and exits cleanly; layer errors are retried.
`--tp N` makes one worker span cuda:0..N-1 (a process per GPU, started by the worker;
inference.parallel).
"""
from __future__ import annotations

import asyncio
import signal

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.core.management.base import BaseCommand, CommandError

from inference.errors import EngineError

from ...layer import check_redis_timeouts
from ...modelsource import default_device, load_engine
from ...worker import Worker


class Command(BaseCommand):
    help = "Run one GPU worker on the shared (Redis) channel layer."

    def add_arguments(self, parser):
        parser.add_argument("--model", default=None, help="a .gguf file, a Hugging Face folder, a hub id or synthetic:SHAPE "
                                                         "(default: PLAYGROUND_MODEL, else SmolLM2-135M-Instruct)")
        parser.add_argument("--device", default=None, help="cpu | cuda | cuda:N")
        parser.add_argument("--dtype", default=None)
        parser.add_argument("--weights", default=None, choices=["fp8", "bf16", "fp16", "fp32"],
                            help="fp8: e4m3 linear layers and an int8 LM head, quantized at load (default: the "
                                 "checkpoint's, in --dtype)")
        parser.add_argument("--worker-id", default=None)
        parser.add_argument("--tp", type=int, default=1, help="split the model over N GPUs (cuda:0..N-1; "
                            "tensor-parallel reference path)")

    def handle(self, *args, model, device, dtype, weights, worker_id, tp=1, **options):
        layer = get_channel_layer()
        if isinstance(layer, InMemoryChannelLayer):
            raise CommandError("playground_worker needs REDIS_URL: the in-memory channel layer lives inside one "
                               "process. For one process use `python manage.py playground`.")
        check_redis_timeouts(layer)
        device = device or default_device()
        try:
            engine = load_engine(model, device, dtype, weights, tp=tp)
        except EngineError as e:
            raise CommandError(str(e)) from None
        worker = Worker(engine, layer, worker_id=worker_id)
        self.stdout.write(f"Worker {worker.worker_id}: {engine.info.get('model')} on {device}, "
                          f"weights {engine.info.get('weights')}")
        self.stdout.flush()
        try:
            asyncio.run(serve(worker))
        finally:
            engine.close()  # stops tensor-parallel ranks (nothing to do on one device)


async def serve(worker: Worker) -> None:
    """Run the worker; SIGTERM (systemd, Kubernetes) and SIGINT stop it cleanly: the running job
    is failed with a message its client sees, the worker leaves the dashboard."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.request_stop)
    try:
        await worker.run()
    finally:
        worker.stop()
