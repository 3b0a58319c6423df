"""Token selection over a vocabulary split across ranks: the same tokens `Sampler` picks whole.

Each rank holds the logits of its vocabulary slice. Greedy, repetition penalty and plain
temperature sampling act on every token independently (the Gumbel noise is a hash of the
global token id, seed and step), so each rank scores its slice and one distributed argmax
(`Comm.argmax`: an all-gather of one (value, id) pair per rank) picks the token. Top-k, top-p
and min-p need the whole distribution: those requests all-gather the logits and run the
ordinary `Sampler` on every rank. Every rank ends a step with the same token and the same
state, so each feeds its own copy back; all ranks must be configured with the same seed.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..sampling import _M32, Sampler, SamplingParams, apply_repetition_penalty, gumbel_noise, hash32
from .comm import Comm


class ShardedSampler:
    def __init__(self, vocab_size: int, vocab: range, device, comm: Comm):
        self.full = Sampler(vocab_size, device)  # parameters, step, seen (whole vocabulary), filtered modes
        self.lo, self.hi = vocab.start, vocab.stop
        self.token_hash = self.full.token_hash[self.lo:self.hi]
        self.comm = comm

    @property
    def seed(self) -> int:
        return self.full.seed

    @property
    def mode(self):
        return self.full.mode

    def configure(self, params: SamplingParams, prompt_ids: Tensor) -> int:
        if params.seed is None:
            raise ValueError("every rank must sample with the same seed: resolve it before configuring")
        return self.full.configure(params, prompt_ids)

    def __call__(self, logits: Tensor) -> Tensor:
        """logits [V/tp] float32 (this rank's slice) -> token id [1] int64, the same on every rank."""
        f = self.full
        greedy, use_penalty, use_sort, use_min_p = f.mode
        if use_sort or use_min_p:
            return f(self.comm.all_gather(logits))
        if use_penalty:
            logits = apply_repetition_penalty(logits, f.seen[self.lo:self.hi], f.penalty)
        if not greedy:
            key = hash32((f.seed_key ^ hash32(f.step & _M32)) & _M32)
            logits = logits / f.temperature + gumbel_noise(self.token_hash, key)
        token = self.comm.argmax(logits, self.lo)
        if use_penalty:
            f.seen.index_fill_(0, token, True)
        f.step.add_(1)
        return token
