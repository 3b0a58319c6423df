"""The Engine: batch-1 streaming generation from a checkpoint (Hugging Face folder or GGUF file).

`Engine.from_pretrained(path, device=..., dtype=...)` loads config, tokenizer and weights and
picks a runner (the CUDA fast path on a GPU, else the reference forward). `generate(prompt,
params)` yields `TokenEvent`s as tokens arrive and ends with one `FinishEvent` carrying the stats.

The decode loop never makes the device wait for the host: each step's token lands in pinned host
memory (the fast path's graph writes it there itself) and is read `LAG` steps later, so stop
conditions (EOS ids, stop strings, max_tokens, cancellation) are seen a few steps late and the
overshoot is simply discarded. On the CPU one step is in flight at a time (`_lag`). One Engine
serves one request at a time; callers serialise.

Greedy requests (no repetition penalty) on a runner that can verify drafts speculate by prompt
lookup where params.speculate asks for it, or, left None, where speculating keeps the runner's
kernels (`speculates_by_default`): the tokens come from `inference.speculative`'s loop,
which drafts from the prompt and output and checks several tokens per forward; the stop logic
below reads them one by one either way, so the output is the same token for token.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Iterator, Protocol

import torch

from .config import ModelConfig
from .detokenizer import IncrementalDetokenizer
from .errors import EngineError, ParamsError, PromptError
from .hub import resolve_model_path
from .prompts import Prompt, build_prompt_ids
from .quant import LM_HEAD, dequantize_model, describe, quantize_fp8, quantize_model, source_dtype
from .runner import ReferenceRunner, Runner
from .sampling import SamplingParams
from .source import open_checkpoint
from .speculative import DraftConfig, PromptLookupDrafter, SpecStats, speculative_tokens
from .stops import StopStrings
from .tokenizer import Tokenizer

LAG = 8  # steps the host may run ahead of the tokens it has read back (GPU; on CPU: 1, see _lag)
TIMED_FIRST, TIMED_EVERY = 16, 16  # which tokens carry a timing event on CUDA (_DeviceTimer)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class Cancel(Protocol):
    def is_set(self) -> bool: ...


@dataclass
class TokenLogprob:
    token_id: int
    logprob: float  # natural log of the token's probability under the model (before temperature/filters)
    top: list[tuple[int, float]]  # the k most likely (token id, logprob), most likely first


@dataclass
class TokenEvent:
    token_ids: list[int]
    text: str  # text delta (may be "" while bytes of a character or a possible stop string are held back)
    t: float  # time.perf_counter() when the token reached the host
    logprobs: list[TokenLogprob] | None = None  # one per token id, when params.logprobs is set
    accepted: int = 0  # drafted tokens accepted so far in this run (speculation; 0 without)


@dataclass
class GenerationStats:
    prompt_tokens: int
    generated_tokens: int
    ttft_ms: float  # request start -> first token on the host (tokenize + prefill + sample)
    decode_tok_s: float  # tokens after the first / device time from the first token (over the timed span)
    decode_ms: float  # device time from the first token to the last one timed (_DeviceTimer)
    finish_reason: str  # "stop" | "length" | "cancelled"
    seed: int = 0
    # Speculation (zeros when the run did not speculate). decode_tok_s and decode_ms of a speculative run are
    # host-clock figures over the same span as effective_tok_s (its tokens do not come one per device step).
    speculative: bool = False
    drafted: int = 0  # draft tokens sent to verify steps
    accepted: int = 0  # draft tokens the model agreed with
    verify_steps: int = 0
    accepted_per_verify: float = 0.0  # mean accepted draft tokens per verify step (+1 = tokens per verify forward)
    effective_tok_s: float = 0.0  # tokens after the first / host time from the first token to the last one read

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class FinishEvent:
    stats: GenerationStats
    text: str = ""  # the full generated text (what the TokenEvents' deltas add up to)


class Engine:
    def __init__(self, cfg: ModelConfig, tokenizer: Tokenizer, runner: Runner, eos_ids: tuple[int, ...], info: dict):
        self.cfg, self.tokenizer, self.runner = cfg, tokenizer, runner
        self.eos_ids = eos_ids
        self.info = info
        self._timer = _DeviceTimer(runner.device)
        self.draft_config = DraftConfig()  # the prompt-lookup drafter's settings (speculative greedy runs)

    @property
    def max_context(self) -> int:
        return self.runner.max_context

    @classmethod
    def from_pretrained(cls, path: str | Path | None = None, device: str = "cpu",
                        dtype: str | torch.dtype | None = None, fast: bool | None = None,
                        max_context: int | None = None, attention: str = "auto", gemv: str = "auto",
                        tuning: str = "auto", tp: int = 1, tp_reduce: str = "auto", weights: str | None = None,
                        cache_dir: str | Path | None = None) -> "Engine":
        """Load a model: a folder, a .gguf file, "default" / None (SmolLM2-135M-Instruct),
        "synthetic:SHAPE" (random weights, written under cache_dir) or a hub id when online.

        device "cuda" uses the fast path unless fast=False; dtype defaults to float32 on CPU and
        bfloat16 on CUDA; max_context caps the KV cache (default min(model max, 32768)). The fast
        path's kernel choices: attention (auto | cuda | triton), gemv (auto | overlap | triton)
        and tuning, the kernels.tuning row (auto: this GPU's; generic: the fallback; or a row's name).
        tp > 1 splits the model over tp processes (inference.parallel: on GPUs each rank runs the
        fast path's kernels for greedy decode unless fast=False, else the reference path; `close()`
        stops them; tp_reduce: the fast ranks' all-reduce, nccl, symm, flag, fused, or auto: fused where
        the GPUs can read each other's memory, else nccl; engine info says which). weights: None (the
        checkpoint's values in dtype), "fp8" (inference.quant: e4m3 linear layers with a scale and
        offset per 32 columns and an int8 LM head, quantized at load; activations in dtype; off the
        fast path the reference forward runs the dequantized values; tp 1 only) or
        a 16/32-bit name (bf16, fp16, fp32: the same as that dtype).
        """
        fp8, dtype = _weight_format(weights, dtype)
        device = str(device)
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise EngineError("device 'cuda' requested but no CUDA GPU is available (use --device cpu)")
        if device not in ("cpu",) and not device.startswith("cuda"):
            raise EngineError(f"unknown device {device!r} (use 'cpu' or 'cuda')")
        if dtype is None:
            dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        elif isinstance(dtype, str):
            if dtype not in DTYPES:
                raise EngineError(f"unknown dtype {dtype!r} (use one of {', '.join(DTYPES)})")
            dtype = DTYPES[dtype]

        ckpt = open_checkpoint(resolve_model_path(path, cache_dir=cache_dir))
        cfg, tokenizer, eos_ids = ckpt.config, ckpt.tokenizer, ckpt.eos_ids
        cap = max_context or 32768
        ctx = min(cfg.max_position_embeddings, cap)
        load = ckpt.loader(dtype)  # picklable: each TP rank loads with it
        on_fast_path = tp == 1 and device.startswith("cuda") and fast is not False
        if fp8 and tp != 1:
            raise EngineError("FP8 weights run on one device (tp 1)")
        if fp8 and any(k % 32 for k in (cfg.hidden_size, cfg.q_size, cfg.intermediate_size)):
            raise EngineError("FP8 weights need hidden, attention and MLP sizes that are multiples of 32")
        weights_detail = str(dtype).removeprefix("torch.")
        runner: Runner
        if tp != 1:
            if fast and not device.startswith("cuda"):
                raise EngineError("the fast path needs device='cuda'")
            from .parallel.launch import LaunchSpec, launch
            runner = launch(LaunchSpec(cfg, load, tp, device, ctx,
                                       fast=device.startswith("cuda") and fast is not False,
                                       attention=attention, gemv=gemv, tuning=tuning, reduce=tp_reduce))
        else:
            if fp8:  # quantized from the checkpoint's own values (float32 where they are finer than dtype), each
                # linear weight as it is loaded: the device never holds more than one of them unquantized
                tensors = ckpt.loader(source_dtype(ckpt.card, dtype))(device=device, linear=quantize_fp8)
                tensors = quantize_model(tensors, lm_head=LM_HEAD, dtype=dtype)
                weights_detail = describe(tensors)
            else:
                tensors = load(device=device)
            if on_fast_path:
                from kernels import tuning as tuning_table  # imports Triton; only on GPU machines

                if fp8:
                    from .fast.fp8 import Fp8Runner as FastRunner
                else:
                    from .fast.runner import FastRunner
                try:
                    row = tuning_table.by_name(tuning, tensors.device)
                    runner = FastRunner(cfg, tensors, ctx, attention=attention, gemv=gemv, tuning=row)
                except ValueError as e:
                    raise EngineError(str(e)) from e
            else:
                if fast:
                    raise EngineError("the fast path needs device='cuda'")
                if fp8:  # the FP8 reference: the quantized values, dequantized, through the plain forward
                    tensors = dequantize_model(tensors, dtype)
                    weights_detail += f" (reference: dequantized to {str(dtype).removeprefix('torch.')})"
                runner = ReferenceRunner(cfg, tensors, ctx)
        info = {
            "model": ckpt.card["name"],
            "path": str(ckpt.path),
            "model_type": cfg.model_type,
            "device": str(runner.device),
            "dtype": str(dtype).removeprefix("torch."),
            "weights": "fp8" if fp8 else str(dtype).removeprefix("torch."),  # the precision the linear layers are stored in
            "weights_detail": weights_detail,
            "params": cfg.num_params(),
            "max_context": ctx,
            "runner": runner.name,
            "tp": tp,
            "tp_reduce": getattr(runner, "reduce", tp_reduce) if runner.name == "tp-cuda-graph" else None,
            "fast_path": runner.name not in ("reference", "tp-reference"),  # tp-cuda-graph: greedy decode only
            "tuning": runner.tuning.name if hasattr(runner, "tuning") else None,  # the kernels.tuning row
            "attention": getattr(runner, "attention_mode", None),
            "gemv": getattr(runner, "gemv_mode", None),
            "random_weights": ckpt.random_weights,
            "card": ckpt.card,
        }
        return cls(cfg, tokenizer, runner, eos_ids, info)

    def close(self) -> None:
        """Release what the runner holds beyond this process (tensor-parallel ranks)."""
        getattr(self.runner, "close", lambda: None)()

    def prompt_ids(self, prompt: Prompt | str) -> list[int]:
        if isinstance(prompt, str):
            prompt = Prompt.completion(prompt)
        return build_prompt_ids(prompt, self.tokenizer)

    def check_length(self, n_prompt: int, params: SamplingParams):
        if n_prompt + params.max_tokens > self.max_context:
            raise PromptError(
                f"prompt ({n_prompt} tokens) + max_tokens ({params.max_tokens}) = {n_prompt + params.max_tokens} "
                f"exceeds the context of {self.max_context} tokens; shorten the prompt or lower max_tokens")

    def generate(self, prompt: Prompt | str, params: SamplingParams | None = None,
                 cancel: Cancel | None = None) -> Iterator[TokenEvent | FinishEvent]:
        """Stream a completion. Raises EngineError subclasses before any device work for bad input."""
        params = params or SamplingParams()
        params = replace(params, speculate=self.speculates(params))  # decided here: the runner sees a bool
        t_start = time.perf_counter()
        ids = self.prompt_ids(prompt)
        self.check_length(len(ids), params)
        stop_ids = set() if params.ignore_eos else set(
            params.stop_token_ids if params.stop_token_ids is not None else self.eos_ids)
        detok = IncrementalDetokenizer(self.tokenizer)
        stops = StopStrings(params.stop)
        timer = self._timer
        timer.reset(params.max_tokens)

        first = self.runner.start(ids, params)
        lps = None  # the runner's pending logprobs, in token order (params.logprobs set)
        if params.logprobs is not None:
            if self.runner.last_logprobs is None:
                raise ParamsError(f"the {self.runner.name} runner does not compute logprobs")
            lps = deque([self.runner.last_logprobs])
        spec = self.speculates(params)
        spec_stats = SpecStats()
        if spec:
            drafter = PromptLookupDrafter(ids, self.draft_config)
            source = speculative_tokens(self.runner, _on_host(first), drafter, params.max_tokens, _read_token, spec_stats,
                                        lambda: _is_set(cancel), _lag(self.runner.device),
                                        read_last=lambda token: _read_token(token, self.runner.device))
        else:
            timer.push(first)
            source = self._plain_tokens(params.max_tokens, cancel, lps)
        generated, pieces = 0, []
        finish, stop_string_hit = None, False
        ttft_ms = t_first = t_last = None
        for token in source:
            generated += 1
            now = t_last = time.perf_counter()
            if ttft_ms is None:
                ttft_ms, t_first = (now - t_start) * 1000, now
            logprobs = None if lps is None else [_read_logprobs(token, lps.popleft())]
            if token in stop_ids:
                finish = "stop"
                yield TokenEvent([token], "", now, logprobs, accepted=spec_stats.accepted)
                break
            text, hit = stops.push(detok.push([token]))
            pieces.append(text)
            yield TokenEvent([token], text, now, logprobs, accepted=spec_stats.accepted)
            if hit:
                finish, stop_string_hit = "stop", True
            elif generated >= params.max_tokens:
                finish = "length"
            elif _is_set(cancel):
                finish = "cancelled"
            if finish is not None:
                break
        source.close()
        if not stop_string_hit:
            # Release what was held back (a partial character, a possible stop-string prefix).
            text, hit = stops.push(detok.flush())
            tail = text + ("" if hit else stops.flush())
            if tail:
                pieces.append(tail)
                yield TokenEvent([], tail, time.perf_counter(), accepted=spec_stats.accepted)
        timed, decode_ms = timer.decode()
        host_ms = (t_last - t_first) * 1000
        effective = round((generated - 1) / (host_ms / 1000), 2) if generated > 1 and host_ms > 0 else 0.0
        if spec:
            timed, decode_ms = generated - 1, host_ms
        stats = GenerationStats(
            prompt_tokens=len(ids),
            generated_tokens=generated,
            ttft_ms=round(ttft_ms, 3),
            decode_tok_s=round(timed / (decode_ms / 1000), 2) if timed and decode_ms > 0 else 0.0,
            decode_ms=round(decode_ms, 3),
            finish_reason=finish,
            seed=getattr(self.runner, "seed", 0),
            speculative=spec,
            drafted=spec_stats.drafted,
            accepted=spec_stats.accepted,
            verify_steps=spec_stats.verify_steps,
            accepted_per_verify=round(spec_stats.accepted_per_verify, 3),
            effective_tok_s=effective,
        )
        timer.drain()
        if spec and self.runner.device.type == "cuda":  # plain steps still in flight when the loop stopped
            torch.cuda.current_stream(self.runner.device).synchronize()
        yield FinishEvent(stats, "".join(pieces))

    def speculates(self, params: SamplingParams) -> bool:
        """Whether a request runs the speculative loop: greedy, no repetition penalty, asked for (or left to
        the engine: `speculates_by_default`), and a runner that can verify drafts."""
        asked = self.speculates_by_default if params.speculate is None else params.speculate
        return (asked and params.greedy and params.repetition_penalty == 1.0
                and params.logprobs is None and getattr(self.runner, "can_verify", hasattr(self.runner, "verify")))

    @property
    def speculates_by_default(self) -> bool:
        """Speculation for requests that leave it to the engine: on where the runner's speculating steps
        run exactly its usual kernels (FastRunner.speculation_keeps_kernels: output unchanged, and the
        decode loop's cost check keeps drafting off where it does not pay); off elsewhere (the CPU
        reference: its verify forward's matrix shapes differ from a step's, so a near-tie could go the
        other way)."""
        return bool(getattr(self.runner, "speculation_keeps_kernels", False))

    def _plain_tokens(self, max_tokens: int, cancel: Cancel | None, lps: deque | None = None) -> Iterator[int]:
        """One token per step, the device kept `_lag` steps ahead of what is read back (each step's
        pending logprobs appended to `lps` when given)."""
        timer, lag = self._timer, _lag(self.runner.device)
        issued = 1  # runner.start's token is in the timer's queue
        for generated in range(max_tokens):
            while issued < max_tokens and issued - generated < lag and not _is_set(cancel):
                timer.push(self.runner.step())
                if lps is not None:
                    lps.append(self.runner.last_logprobs)
                issued += 1
            yield timer.pop()


def _read_logprobs(token: int, pending: tuple) -> TokenLogprob:
    """A runner's token_logprobs output (on the host once its event has fired) -> TokenLogprob."""
    values, ready = pending
    if ready is not None:
        ready.synchronize()
    values = values.tolist()
    k = (len(values) - 1) // 2
    return TokenLogprob(token, values[0], [(int(i), lp) for lp, i in zip(values[1:1 + k], values[1 + k:])])


def _on_host(token: torch.Tensor) -> torch.Tensor:
    """runner.start's token as a pinned host slot its copy fills (-1 until then), for _read_token: reading a device
    token (.item()) would wait for every step launched after it too (the speculative loop launches its plain steps
    before it reads the first token: with 8 in flight the first token reached the caller ~7 steps late)."""
    if token.device.type != "cuda":
        return token
    host = torch.full((1,), -1, dtype=torch.int64, pin_memory=True)
    host.copy_(token.view(-1)[:1], non_blocking=True)
    return host


def _read_token(token: torch.Tensor, last_on: torch.device | None = None) -> int:
    """A plain step's token on the host: a device tensor is copied (a wait); a host one may be a ring
    slot the device has yet to write (-1), polled like _DeviceTimer.pop does. `last_on`: the token is the last
    work launched on that device's current stream (the speculative loop's last plain step before a verify step):
    wait for the stream instead, which wakes within microseconds (torch releases the GIL; CUDA spins while the process
    has fewer GPU contexts than the host has cores) where the poll's sleep(0) sleeps ~50-90 us (Linux's timer slack)
    with the device idle (one H200, edit workload: 2.39x-2.45x -> 2.48x-2.51x, lab/HISTORY.md)."""
    if token.device.type != "cpu":
        return int(token.item())
    if last_on is not None and last_on.type == "cuda":
        torch.cuda.current_stream(last_on).synchronize()
    view = token.numpy()
    while view[0] < 0:
        time.sleep(0)
    return int(view[0])


WEIGHT_FORMATS = {"fp8": None, "bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
                  **{name: dt for name, dt in DTYPES.items()}}


def _weight_format(weights: str | None, dtype: str | torch.dtype | None) -> tuple[bool, str | torch.dtype | None]:
    """(fp8?, dtype) for Engine.from_pretrained's weights and dtype arguments."""
    if weights is None:
        return False, dtype
    if weights not in WEIGHT_FORMATS:
        raise EngineError(f"unknown weights {weights!r} (use fp8, bf16, fp16 or fp32)")
    as_dtype = WEIGHT_FORMATS[weights]
    if as_dtype is None:
        return True, dtype
    if dtype is not None and DTYPES.get(dtype, dtype) != as_dtype:
        raise EngineError(f"weights {weights!r} contradicts dtype {dtype!r}")
    return False, as_dtype


def _lag(device: torch.device) -> int:
    """Steps in flight before a token is read back. On a GPU the host runs LAG steps ahead so
    the device never waits; on the CPU the host *is* the device, so a step queued ahead only
    delays the token being read (TTFT) and is wasted after EOS: one at a time."""
    return LAG if torch.device(device).type == "cuda" else 1


def _is_set(cancel: Cancel | None) -> bool:
    return cancel is not None and cancel.is_set()


class _DeviceTimer:
    """Reads sampled tokens back without stalling the device, and times them on the device.

    CUDA: a token the runner's graph writes to pinned host memory (a CPU tensor, -1 until written: the
    FastRunner's ring) is polled; any other device token is copied into pinned memory with an event
    behind it. Decode time is the device time between the first token read and the last token read that
    has a timing event: those follow the first TIMED_FIRST tokens, every TIMED_EVERY-th and the last
    one asked for (an event after every step cost the 1.5B ~2 us per token: kernels/PERF.md). CPU: values
    are ready at once; host clock.
    """

    def __init__(self, device: torch.device):
        self.cuda = torch.device(device).type == "cuda"
        self.host = torch.zeros(0, dtype=torch.int64)
        self.queue: deque = deque()

    def reset(self, max_tokens: int):
        if self.host.numel() < max_tokens:
            self.host = torch.zeros(max(max_tokens, 1024), dtype=torch.int64, pin_memory=self.cuda)
        self.queue.clear()
        self.max_tokens = max_tokens
        self.n_pushed = 0
        self.first = self.last = None  # (token index, timing event or host time)

    def push(self, token: torch.Tensor):
        i = self.n_pushed
        self.n_pushed += 1
        if not self.cuda:
            self.host[i] = token[0]
            self.queue.append((i, self.host[i:i + 1], time.perf_counter(), None))
            return
        timed = i < TIMED_FIRST or i % TIMED_EVERY == 0 or i == self.max_tokens - 1
        ev = None
        if token.device.type == "cuda":
            self.host[i:i + 1].copy_(token, non_blocking=True)
            token = self.host[i:i + 1]
            ev = torch.cuda.Event(enable_timing=timed)
        elif timed:
            ev = torch.cuda.Event(enable_timing=True)
        if ev is not None:
            ev.record()
        self.queue.append((i, token, ev if timed else None, ev))

    def pop(self) -> int:
        i, value, mark, ready = self.queue.popleft()
        if ready is not None:
            ready.synchronize()
        else:  # a ring slot: -1 until the device writes the token (sleep(0) lets other threads run)
            view = value.numpy()
            while view[0] < 0:
                time.sleep(0)
        if mark is not None:
            if self.first is None:
                self.first = (i, mark)
            self.last = (i, mark)
        return int(value[0])

    def decode(self) -> tuple[int, float]:
        """(tokens after the first, ms) over the timed span of the tokens read."""
        if self.first is None or self.last[0] == self.first[0]:
            return 0, 0.0
        (i0, m0), (i1, m1) = self.first, self.last
        if self.cuda:
            m1.synchronize()
            return i1 - i0, m0.elapsed_time(m1)
        return i1 - i0, (m1 - m0) * 1000

    def drain(self):
        """Let overshoot steps finish so the next request starts on an idle device."""
        if self.cuda and self.queue:
            torch.cuda.current_stream().synchronize()
        self.queue.clear()
