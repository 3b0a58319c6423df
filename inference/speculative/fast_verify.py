"""The fast path's verify step: the last token + up to `width - 1` drafted ones in one CUDA graph.

One graph per attention window (`span`: a power of two >= the last position + 1, at least
MIN_SPAN), all of one width (drafts are padded; the padding's rows are written past the accepted
ones and never read). The graph runs `VerifyModel.forward_window`, takes the argmax of every
position, and accepts on the device: n = the length of the drafted prefix that agrees with those
argmaxes; then it leaves the FastRunner's state as its own decode step would (token = argmax n,
pos += n + 1, x = that token's embedding), so the next plain step or verify follows at once, and
copies the argmaxes and n into pinned host memory. The host waits for that copy (drafting needs
the tokens). Greedy requests without a repetition penalty only.

`run_eager` does the same without a graph (the CPU tests drive it with float32 weights).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..reference import KVCache
from .verify_model import VerifyModel

MIN_SPAN = 256
WIDTH = 9  # tokens per verify step: the last one + up to 8 drafted (DraftConfig.max_draft's default)


class FastVerifier:
    def __init__(self, model: VerifyModel, cache: KVCache, token: Tensor, pos: Tensor, x: Tensor, width: int):
        """token [1] int64, pos [1] int32, x [H] float32: the runner's step state (updated in place)."""
        self.model, self.cache, self.width = model, cache, width
        self.token, self.pos, self.x = token, pos, x
        dev = token.device
        self.draft = torch.zeros(width - 1, dtype=torch.int64, device=dev)
        self.klen = torch.zeros((), dtype=torch.int64, device=dev)  # how many of `draft` are real
        self.steps = torch.arange(width, dtype=torch.int64, device=dev)
        self.out = torch.zeros(width + 1, dtype=torch.int64, device=dev)  # argmaxes, then n
        self.cuda = dev.type == "cuda"
        self.host_in = torch.zeros(width, dtype=torch.int64, pin_memory=self.cuda)  # draft, then klen
        self.host_out = torch.zeros(width + 1, dtype=torch.int64, pin_memory=self.cuda)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}

    @classmethod
    def for_runner(cls, runner, width: int = WIDTH) -> "FastVerifier":
        """A verifier over a FastRunner's weights, cache and step state."""
        model = VerifyModel(runner.cfg, runner.w, runner.max_context)
        return cls(model, runner.cache, runner.token, runner.pos, runner.x, width)

    def capture(self, first_pos: int, end_pos: int):
        """Capture the graphs a request from first_pos to end_pos may use (before its first step)."""
        pos = first_pos
        while pos < end_pos and self.fits(pos):
            span = self.span(pos)
            self.graph(span)
            pos = max(pos + 1, span - self.width + 1)

    def span(self, pos: int) -> int:
        """The attention window of a verify step whose first token sits at `pos`."""
        need = pos + self.width
        return min(max(MIN_SPAN, 1 << (need - 1).bit_length()), self.cache.max_len)

    def fits(self, pos: int) -> bool:
        return pos + self.width <= self.cache.max_len

    def _body(self, span: int):
        positions = self.pos.long() + self.steps
        ids = torch.cat([self.token, self.draft])
        greedy = self.model.forward_window(ids, positions, span, self.cache).argmax(-1)  # [width]
        agree = (self.draft == greedy[:-1]) & (self.steps[:-1] < self.klen)
        n = agree.long().cumprod(0).sum()
        nxt = greedy.index_select(0, n.view(1))
        self.token.copy_(nxt)
        self.pos.add_((n + 1).to(self.pos.dtype))
        self.x.copy_(self.model.w.embed.index_select(0, nxt)[0])
        self.out[:-1].copy_(greedy)
        self.out[-1:].copy_(n.view(1))
        self.host_out.copy_(self.out, non_blocking=self.cuda)

    def _load(self, draft: list[int]):
        k = len(draft)
        assert 1 <= k < self.width
        self.host_in[:k] = torch.tensor(draft, dtype=torch.int64)
        self.host_in[k:-1] = draft[-1]
        self.host_in[-1] = k
        self.draft.copy_(self.host_in[:-1], non_blocking=self.cuda)
        self.klen.copy_(self.host_in[-1], non_blocking=self.cuda)

    def _result(self) -> list[int]:
        out = self.host_out.tolist()
        n = out[-1]
        return out[:n + 1]

    @torch.inference_mode()
    def run_eager(self, draft: list[int], pos: int) -> list[int]:
        self._load(draft)
        self._body(self.span(pos))
        if self.cuda:
            torch.cuda.current_stream().synchronize()
        return self._result()

    @torch.inference_mode()
    def run(self, draft: list[int], pos: int) -> list[int]:
        """Verify `draft` after the runner's current token at host position `pos`: the accepted
        drafted tokens plus the model's next one."""
        graph = self.graph(self.span(pos))
        self._load(draft)
        graph.replay()
        torch.cuda.current_stream().synchronize()
        return self._result()

    def graph(self, span: int) -> torch.cuda.CUDAGraph:
        """The captured verify step for an attention window (captured on first use; the warm-up writes
        cache rows at and past pos, which every later step rewrites before reading)."""
        if span not in self.graphs:
            saved = (self.token.clone(), self.pos.clone(), self.x.clone())
            self.klen.fill_(0)
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(2):
                    self._restore(saved)
                    self._body(span)
            torch.cuda.current_stream().wait_stream(stream)
            self._restore(saved)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                self._body(span)
            self._restore(saved)
            self.graphs[span] = graph
        return self.graphs[span]

    def _restore(self, saved):
        token, pos, x = saved
        self.token.copy_(token)
        self.pos.copy_(pos)
        self.x.copy_(x)
