"""Sampling parameters and on-device token selection.

`SamplingParams` is the user-facing knob set, validated where it enters (one ParamsError per bad
value). `Sampler` turns a logits vector into the next token id without leaving the device:
repetition penalty -> temperature -> top-k -> top-p -> min-p (the order transformers applies
them), then an exact sample by the Gumbel-max trick. The Gumbel noise comes from a counter-based
hash of (seed, step, token id), so the same seed gives the same tokens, on CPU and GPU alike,
and every tensor the sampler touches is preallocated: a call can be captured in a CUDA graph.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields

import torch
from torch import Tensor

from .errors import ParamsError

MAX_STOP_STRINGS = 16
MAX_LOGPROBS = 20  # top alternatives a request may ask for per token


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int = 256
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None  # None = a fresh random seed per request
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] | None = None  # None = the model's EOS ids
    ignore_eos: bool = False
    # prompt-lookup speculation for greedy requests (sampled ones never speculate). None: the engine decides
    # (on where speculating changes none of the runner's kernels, so the output is the same token for token;
    # README, Speculative decoding); True / False: on / off.
    speculate: bool | None = None
    logprobs: int | None = None  # None = off; k = each token's log-probability and the top k alternatives

    def __post_init__(self):
        def setf(name, value):
            object.__setattr__(self, name, value)

        if isinstance(self.stop, str):
            setf("stop", (self.stop,))
        setf("stop", tuple(self.stop))
        if self.stop_token_ids is not None:
            setf("stop_token_ids", tuple(self.stop_token_ids))
        _check(_is_int(self.max_tokens) and self.max_tokens >= 1, f"max_tokens must be an integer >= 1, got {self.max_tokens!r}")
        _check(_is_num(self.temperature) and self.temperature >= 0, f"temperature must be a number >= 0, got {self.temperature!r}")
        _check(_is_num(self.top_p) and 0 < self.top_p <= 1, f"top_p must be in (0, 1], got {self.top_p!r}")
        _check(_is_int(self.top_k) and self.top_k >= 0, f"top_k must be an integer >= 0 (0 = off), got {self.top_k!r}")
        _check(_is_num(self.min_p) and 0 <= self.min_p <= 1, f"min_p must be in [0, 1], got {self.min_p!r}")
        _check(_is_num(self.repetition_penalty) and self.repetition_penalty > 0,
               f"repetition_penalty must be a number > 0, got {self.repetition_penalty!r}")
        _check(self.seed is None or (_is_int(self.seed) and 0 <= self.seed < 2**63),
               f"seed must be an integer in [0, 2^63), got {self.seed!r}")
        _check(all(isinstance(s, str) and s for s in self.stop), "stop strings must be non-empty strings")
        _check(len(self.stop) <= MAX_STOP_STRINGS, f"at most {MAX_STOP_STRINGS} stop strings, got {len(self.stop)}")
        _check(self.speculate is None or isinstance(self.speculate, bool),
               f"speculate must be true or false (or None: the engine decides), got {self.speculate!r}")
        _check(self.logprobs is None or (_is_int(self.logprobs) and 0 <= self.logprobs <= MAX_LOGPROBS),
               f"logprobs must be an integer in [0, {MAX_LOGPROBS}] (or None), got {self.logprobs!r}")
        _check(self.stop_token_ids is None or all(_is_int(t) and t >= 0 for t in self.stop_token_ids),
               "stop_token_ids must be non-negative integers")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @classmethod
    def from_dict(cls, data: dict) -> "SamplingParams":
        """Build from JSON-ish input (web, CLI); unknown keys and wrong types are ParamsErrors."""
        if not isinstance(data, dict):
            raise ParamsError("params must be an object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ParamsError(f"unknown sampling parameter(s): {', '.join(unknown)}")
        return cls(**{k: v for k, v in data.items() if v is not None or k in ("seed", "stop_token_ids")})


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _check(ok: bool, message: str):
    if not ok:
        raise ParamsError(message)


# ---- counter-based random numbers (same bits on every device) ---------------------------------

_M32 = 0xFFFFFFFF


def _mul32(x: Tensor, c: int) -> Tensor:
    """(x * c) mod 2^32 for x in [0, 2^32), without int64 overflow (16-bit halves)."""
    lo, hi = x & 0xFFFF, x >> 16
    return (lo * c + (((hi * c) & 0xFFFF) << 16)) & _M32


def hash32(x: Tensor) -> Tensor:
    """A 32-bit integer mixer (lowbias32) on int64 tensors holding values in [0, 2^32)."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def gumbel_noise(token_hash: Tensor, key: Tensor) -> Tensor:
    """Standard Gumbel noise [V] from precomputed per-token hashes and a per-step key."""
    bits = hash32(token_hash ^ key)
    u = ((bits >> 8).float() + 0.5) * (1.0 / (1 << 24))  # uniform in (0, 1), 24 bits
    return -torch.log(-torch.log(u))


def filter_logits(logits: Tensor, temperature, top_k, top_p, min_p, use_sort: bool, use_min_p: bool) -> Tensor:
    """Temperature, then top-k / top-p (one sort), then min-p; removed tokens become -inf.

    temperature/top_k/top_p/min_p are 0-d or [1] tensors (so the graph never bakes them in).
    """
    V = logits.shape[-1]
    logits = logits / temperature
    if use_sort:
        sorted_logits, order = torch.sort(logits, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        mass_before = torch.cumsum(probs, dim=-1) - probs
        rank = torch.arange(V, device=logits.device)
        k = torch.where(top_k > 0, top_k, V)
        keep = ((rank < k) & (mass_before < top_p)) | (rank == 0)  # the top token always stays
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits.masked_fill(~keep, float("-inf")))
    if use_min_p:
        probs = torch.softmax(logits, dim=-1)
        logits = logits.masked_fill(probs < min_p * probs.max(), float("-inf"))
    return logits


def token_logprobs(logits: Tensor, token: Tensor, k: int) -> Tensor:
    """[1 + 2k] float32 on the logits' device: log p(token), the k largest log-probabilities
    (descending) and their ids (exact as float32 below 2^24). The model's own distribution, before
    temperature and filters (what OpenAI-style servers report). Capturable: no host sync."""
    logp = torch.log_softmax(logits.reshape(-1).float(), dim=-1)
    chosen = logp.gather(0, token.reshape(-1)[:1])
    if k == 0:
        return chosen
    top = torch.topk(logp, k)
    return torch.cat([chosen, top.values, top.indices.float()])


def apply_repetition_penalty(logits: Tensor, seen: Tensor, penalty) -> Tensor:
    """transformers' semantics: seen tokens' positive logits divided, negative multiplied."""
    penalised = torch.where(logits > 0, logits / penalty, logits * penalty)
    return torch.where(seen, penalised, logits)


class Sampler:
    """Next-token selection with all state in preallocated device tensors.

    `configure` (outside any graph) loads one request's parameters; `__call__(logits)` is
    capturable and advances the step counter. `mode` tells a graph-capturing runner which
    variant of the computation the current parameters need.
    """

    def __init__(self, vocab_size: int, device):
        f32 = dict(device=device, dtype=torch.float32)
        self.temperature = torch.ones((), **f32)
        self.top_p = torch.ones((), **f32)
        self.min_p = torch.zeros((), **f32)
        self.penalty = torch.ones((), **f32)
        self.top_k = torch.zeros((), device=device, dtype=torch.int64)
        self.seed_key = torch.zeros((), device=device, dtype=torch.int64)
        self.step = torch.zeros((), device=device, dtype=torch.int64)
        self.seen = torch.zeros(vocab_size, device=device, dtype=torch.bool)
        self.token_hash = hash32(torch.arange(vocab_size, device=device, dtype=torch.int64))
        self.mode = (True, False, False, False)
        self.seed = 0

    def configure(self, params: SamplingParams, prompt_ids: Tensor) -> int:
        """Load a request's parameters; returns the seed actually used."""
        self.seed = params.seed if params.seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
        self.temperature.fill_(params.temperature if params.temperature > 0 else 1.0)
        self.top_p.fill_(params.top_p)
        self.min_p.fill_(params.min_p)
        self.penalty.fill_(params.repetition_penalty)
        self.top_k.fill_(params.top_k)
        # Fold the 63-bit seed into a 32-bit key (two hash rounds keep nearby seeds unrelated).
        lo, hi = self.seed & _M32, (self.seed >> 32) & _M32
        key = hash32(torch.tensor(hi, dtype=torch.int64)) ^ lo
        self.seed_key.fill_(int(hash32(key)))
        self.step.zero_()
        self.seen.zero_()
        use_penalty = params.repetition_penalty != 1.0
        if use_penalty:
            self.seen[prompt_ids] = True
        self.mode = (params.greedy, use_penalty, params.top_k > 0 or params.top_p < 1.0, params.min_p > 0)
        return self.seed

    def scores(self, logits: Tensor) -> tuple[Tensor, bool]:
        """For a sampled mode: (scores, divide) where the token is argmax(scores [/ temperature if
        divide] + Gumbel noise); the penalty and filters applied, the division left out when no
        filter needs it. The part of a sampled step before the noise (kernels.gumbel_argmax does
        the rest on the GPU, bit for bit as __call__)."""
        _, use_penalty, use_sort, use_min_p = self.mode
        if use_penalty:
            logits = apply_repetition_penalty(logits, self.seen, self.penalty)
        if not (use_sort or use_min_p):
            return logits, True
        return filter_logits(logits, self.temperature, self.top_k, self.top_p, self.min_p, use_sort, use_min_p), False

    def __call__(self, logits: Tensor) -> Tensor:
        """logits [V] float32 -> token id [1] int64 (on the same device)."""
        greedy, use_penalty = self.mode[:2]
        if greedy:
            if use_penalty:
                logits = apply_repetition_penalty(logits, self.seen, self.penalty)
            token = torch.argmax(logits, dim=-1, keepdim=True)
        else:
            scores, divide = self.scores(logits)
            if divide:
                scores = scores / self.temperature
            key = hash32((self.seed_key ^ hash32(self.step & _M32)) & _M32)
            token = torch.argmax(scores + gumbel_noise(self.token_hash, key), dim=-1, keepdim=True)
        if use_penalty:
            self.seen.index_fill_(0, token, True)
        self.step.add_(1)
        return token
