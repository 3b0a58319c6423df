"""Model runners: the layer between the engine loop and the model.

A runner owns the weights, the static KV cache and the sampler on one device, and exposes two
calls that both return the sampled token as a device tensor (never a Python int, so the host need
not wait for the device):
    start(prompt_ids, params) -> token [1]   prefill the prompt, sample the first token
    step()                    -> token [1]   decode the last sampled token, sample the next
A runner that can check drafted tokens (speculative decoding, greedy requests) also has
    verify(draft)             -> list[int]   feed the last token + the k drafted ones in one forward;
                                             the accepted prefix and the model's next token (1..k+1)
`ReferenceRunner` runs the plain-PyTorch reference forward eagerly (CPU or CUDA). The GPU fast
path (`inference.fast.runner.FastRunner`) implements the same two calls over Triton kernels and
one CUDA graph per step.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .config import ModelConfig
from .kv_cache import KVCache
from .reference import ReferenceModel
from .sampling import Sampler, SamplingParams, token_logprobs
from .weights import ModelWeights


class Runner:
    cfg: ModelConfig
    max_context: int
    device: torch.device
    name: str = "runner"

    logprobs_k: int | None = None  # params.logprobs of the current request
    # (host tensor, ready event or None) of token_logprobs for the token start()/step() just sampled
    last_logprobs: tuple[Tensor, object] | None = None

    def start(self, prompt_ids: list[int], params: SamplingParams) -> Tensor:
        raise NotImplementedError

    def step(self) -> Tensor:
        raise NotImplementedError

    def _keep_logprobs(self, logits: Tensor, token: Tensor) -> None:
        """With logprobs on: compute them on the device and start their copy to the host (the engine
        reads them with the token, LAG steps later, without stalling the device)."""
        if self.logprobs_k is None:
            self.last_logprobs = None
            return
        out = token_logprobs(logits, token, self.logprobs_k)
        if out.device.type != "cuda":
            self.last_logprobs = (out, None)
            return
        host = torch.empty(out.shape, dtype=out.dtype, pin_memory=True)
        host.copy_(out, non_blocking=True)
        ready = torch.cuda.Event()
        ready.record()
        self.last_logprobs = (host, ready)


class ReferenceRunner(Runner):
    name = "reference"

    def __init__(self, cfg: ModelConfig, weights: ModelWeights, max_context: int):
        self.cfg, self.max_context, self.device = cfg, max_context, weights.device
        self.model = ReferenceModel(cfg, weights, max_context)
        self.cache = KVCache(cfg, max_context, weights.device, weights.dtype)
        self.sampler = Sampler(cfg.vocab_size, weights.device)
        self.pos = 0
        self.last: Tensor | None = None
        self.seed = 0

    @torch.inference_mode()
    def start(self, prompt_ids: list[int], params: SamplingParams) -> Tensor:
        ids = torch.tensor(prompt_ids, dtype=torch.int64, device=self.device)
        self.seed = self.sampler.configure(params, ids)
        self.logprobs_k = params.logprobs
        logits = self.model.forward(ids, 0, self.cache)
        self.pos = len(prompt_ids)
        self.last = self.sampler(logits[-1])
        self._keep_logprobs(logits[-1], self.last)
        return self.last

    @torch.inference_mode()
    def step(self) -> Tensor:
        logits = self.model.forward(self.last, self.pos, self.cache)
        self.pos += 1
        self.last = self.sampler(logits[0])
        self._keep_logprobs(logits[0], self.last)
        return self.last

    @torch.inference_mode()
    def forced_logits(self, token: int) -> Tensor:
        """Teacher forcing (quality harness, tests): decode `token` at the next position -> logits
        [V] float32; the sampler is not advanced. FastRunner has the same call."""
        logits = self.model.forward(torch.tensor([token], device=self.device), self.pos, self.cache)[0]
        self.pos += 1
        return logits

    def verify_async(self, draft: list[int]):
        """verify(draft), computed now; returns the callable that gives its result (the fast path's runs
        on the device while the caller works)."""
        out = self.verify(draft)
        return lambda: out

    @torch.inference_mode()
    def verify(self, draft: list[int]) -> list[int]:
        """Greedy check of `draft` (no repetition penalty): the cache rows written for rejected
        tokens lie past the new position, and every later forward overwrites a row before reading it."""
        ids = torch.cat([self.last, torch.tensor(draft, dtype=torch.int64, device=self.device)])
        greedy = self.model.forward(ids, self.pos, self.cache).argmax(-1).tolist()
        n = accepted_length(draft, greedy)
        self.pos += n + 1
        self.last = torch.tensor(greedy[n:n + 1], dtype=torch.int64, device=self.device)
        self.sampler.step.add_(n + 1)
        return greedy[:n + 1]


def accepted_length(draft: list[int], greedy: list[int]) -> int:
    """How many drafted tokens agree with the model's greedy choices (greedy[i] follows draft[:i])."""
    n = 0
    while n < len(draft) and draft[n] == greedy[n]:
        n += 1
    return n
