"""Every tuned number of the decode fast path, in one table of per-GPU rows.

A `Tuning` row holds the launch configs, ring budgets, prefetch sizes and kernel choices that were
measured on one GPU; each field says in one line why it has its value and where kernels/PERF.md
shows the measurement. `for_device(device)` picks the row of a GPU listed in `ROWS` (by name), or
builds the `generic` fallback from the device's own properties (SM count, shared memory, L2):
Triton kernels only with the rule-based launch configs, no thread-block clusters, no streamed
CUDA GEMVs. Conditions on the model's shape are data in the row (`stream_max_hidden`,
`gate_up_skew_min_share`, `gemv_overrides` keyed by matrix shape), read by the step plan (inference.fast.plan).

Not here: the kernels' own layout constants (tile sizes a kernel's code is written for) and the
rules in kernels._util that compute a Triton launch config from a matrix shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import lru_cache

import torch

MB = 1 << 20


def knob(default, why: str, perf: str):
    """A tuned field: its value in the H200 row, one line on why, and where kernels/PERF.md measures it."""
    return field(default=default, metadata={"why": why, "perf": perf})


@dataclass(frozen=True)
class DeviceInfo:
    """The properties the generic fallback is derived from."""
    name: str
    capability: tuple[int, int]
    sms: int
    smem_per_block: int  # opt-in dynamic shared memory per block, bytes
    l2_bytes: int

    @classmethod
    def of(cls, device) -> "DeviceInfo":
        p = torch.cuda.get_device_properties(torch.device(device))
        return cls(p.name, (p.major, p.minor), p.multi_processor_count,
                   getattr(p, "shared_memory_per_block_optin", 48 << 10), getattr(p, "L2_cache_size", 0))


@dataclass(frozen=True)
class Tuning:
    """One GPU's tuned numbers (the defaults are the H200's, measured at batch 1, bf16)."""
    name: str = "h200"
    why: str = "measured on one H200 inside the whole decode step; an H100 shares it until re-measured"

    # -- kernel choices ("auto" in FastRunner.use_attention / use_gemv) ------------------------------
    cuda_attention: bool = knob(True, "the CUDA cluster attention is faster than Triton's below "
                                "cuda_attention_context", "PERF.md: CUDA cluster attention")
    cuda_attention_context: int = knob(1024, "positions below this use the cluster kernel (one cluster of "
                                       "16 x 64-row splits per kv head); Triton wins beyond",
                                       "PERF.md: CUDA cluster attention")
    cluster: int = knob(16, "CTAs per cluster: 16 x 64-row splits merge a 1024-row context in one cluster",
                        "PERF.md: CUDA cluster attention")
    fp8_cuda_gemv: bool = knob(True, "FP8 weights: the CUDA C GEMVs (kernels.fp8_cuda_gemv) instead of the Triton "
                               "FP8 kernels", "PERF.md: FP8 CUDA GEMVs")
    fp8_attention_early: bool = knob(True, "in the FP8 step the CUDA attention releases o_proj (PDL) at its start "
                                     "(as beside the streamed bf16 GEMVs), so o_proj's CTAs load weights beside it "
                                     "(H200 step: 1.5B 948.1 -> 938.1 us, 3B 1563.6 -> 1533.5; Llama-3.2-1B, "
                                     "head_dim 64, runs the Triton attention: 688.0 / 687.7)",
                                     "PERF.md: FP8 CUDA GEMVs")
    fp8_o_proj_early: bool = knob(True, "the FP8 o_proj releases gate/up (PDL) right after its wait, so gate/up's "
                                  "CTAs load weights beside it (with o_proj streamed, H200 step: 1.5B 886.2 -> 881.8 "
                                  "us, Llama-3.2-1B 634.5 -> 621.1, 3B 1479.8 -> 1464.0; streamed alone 891.6 / 630.4 "
                                  "/ 1507.9; released early from the CUDA-core o_proj: 886.1 -> 881.3 / 634.4 -> "
                                  "633.9 / 1480.7 -> 1511.3)", "PERF.md: FP8 CUDA GEMVs")
    fp8_qkv_early: bool = knob(True, "the CUDA FP8 QKV releases the attention (PDL) right after its wait, so the "
                               "attention's CTAs start beside it (H200 step: 1.5B 904.0 -> 881.3 us, Llama-3.2-1B "
                               "643.7 -> 637.3, 3B 1496.2 -> 1484.3)", "PERF.md: FP8 CUDA GEMVs")
    fp8_stream: tuple[str, ...] = knob(("o", "gate_up", "down"), "the FP8 GEMVs of these weights (qkv, o, "
                                       "gate_up, down) stream through a shared-memory ring (kernels.fp8_stream_gemv) "
                                       "instead of kernels.fp8_cuda_gemv (H200 step, gate/up: 1.5B 1050 -> 997 us, "
                                       "Llama-3.2-1B 759 -> 706, 3B 1795 -> 1595; and down: 967 / 698 / 1652; and "
                                       "o_proj, released early: see fp8_o_proj_early)",
                                       "PERF.md: FP8 streamed GEMVs")
    fp8_stream_max_k: int = knob(8960, "weights stream only up to this K: the 3B's down_proj (K = 11008, six "
                                 "slots a row) is slower streamed", "PERF.md: FP8 streamed GEMVs")
    stream_gemv: bool = knob(True, "o_proj (and QKV, gate/up up to stream_max_hidden) stream their weights "
                             "through shared memory beside the CUDA attention", "PERF.md: Streamed (\"overlap\") GEMVs")

    # -- streamed GEMVs (kernels.stream_gemv) -------------------------------------------------------
    o_budget: int = knob(80 << 10, "o_proj's whole 16-row slice (hidden 1536/2048) in a ring small enough to "
                         "share an SM with the cluster attention", "PERF.md: Streamed (\"overlap\") GEMVs")
    qkv_budget: int = knob(64 << 10, "the 1.5B's whole QKV slice per CTA", "PERF.md: Streamed (\"overlap\") GEMVs")
    gate_up_budget: int = knob(164 << 10, "three 16-row gate/up slots beside o_proj's CTAs",
                               "PERF.md: Streamed (\"overlap\") GEMVs")
    stream_down: bool = knob(True, "a speculating run's plain steps stream down_proj too (its activation fed "
                             "through the ring), so its verify steps stream k tokens (1.5B verify 8: 3286 -> 2618 "
                             "us, H100); not beside the CUDA attention (default step 1252 -> 1292 us)",
                             "PERF.md: Streamed down_proj")
    stream_head: bool = knob(True, "a speculating run's plain steps stream the greedy LM head's logits "
                             "(kernels.stream_lm_head), so its verify steps stream k tokens' (1.5B verify 8: 2619 -> "
                             "2409 us, H100)", "PERF.md: Streamed down_proj")
    qkv_mma: bool = knob(False, "a speculating run's streamed QKV on tensor cores too (rmsnorm_gemv_mma, the LM "
                         "head's loop): off, its plain steps lose what its verify steps gain (1.5B, H200: plain step "
                         "1117 -> 1140 us, verify 8 1981 -> 1927)", "PERF.md: Streamed down_proj")
    head_mma: bool = knob(True, "that streamed LM head runs on tensor cores (kernels.stream_gemv's "
                          "rmsnorm_gemv_mma; 1.5B verify 8: 2453 -> 2260 us, H100)", "PERF.md: Streamed down_proj")
    down_budget: int = knob(220 << 10, "the streamed down_proj's ring (1.5B, H100: plain step 1394 us, verify 8 "
                            "2103; 200 KB 1420 / 2099, 160 KB 1441 / 2273, 130 KB 1454 / 2262)",
                            "PERF.md: Streamed down_proj")
    fused_down_budget: int = knob(200 << 10, "tensor parallel's fused reduction (inference.parallel.reduce, "
                                  "\"fused\"): down_proj streams through the widest ring (4 H100s, 1.5B: 1194 tok/s "
                                  "vs 1144 at 64 KB, 1079 at 32 KB)", "PERF.md: Tensor parallel, fused reduction")
    stream_max_hidden: int = knob(1536, "QKV and gate/up stream only up to this hidden size (slower for 2048)",
                                  "PERF.md: Streamed (\"overlap\") GEMVs")
    stream_carveout: int = knob(100, "all-shared carveout where QKV and gate/up stream, so gate/up's ring fits "
                                "beside o_proj's CTAs", "PERF.md: Streamed (\"overlap\") GEMVs")
    gate_up_skew: tuple[int, int] = knob((32, 16), "the last 32 gate/up CTAs start when o_proj's end: they take "
                                         "16 fewer units each (1.5B step 1042 -> 1017 us)", "PERF.md: skewed split")
    gate_up_skew_min_share: int = knob(4, "skew only where every CTA keeps >= this many times the deficit "
                                       "(intermediate >= share x deficit x SMs)", "PERF.md: skewed split")

    # -- L2 prefetches ------------------------------------------------------------------------------
    gate_up_l2_prefetch: int = knob(6 * MB, "where gate/up is Triton, the streamed o_proj prefetches its first "
                                    "6 MB into L2 while attention runs (2-10 MB measured)", "PERF.md: L2 prefetches")
    down_l2_prefetch: int = knob(2 * MB, "Triton down_proj prefetches the next layer's first 2 MB of QKV "
                                 "(LM head after the last layer) into L2 (1-6 MB measured)", "PERF.md: L2 prefetches")
    fp8_down_l2_prefetch: int = knob(2 * MB, "the FP8 step's down_proj prefetches as many bytes of the next QKV "
                                     "(twice the rows of bf16's)", "PERF.md: L2 prefetches")

    # -- Triton GEMV launch configs -----------------------------------------------------------------
    gemv_overrides: tuple = knob((((1536, 1536), (4, 2048, 8, 1)), ((1536, 8960), (4, 2048, 8, 1))),
                                 "(N, K) -> (BLOCK_N, BLOCK_K, warps, stages) where the in-step sweep beat "
                                 "kernels._util's rule (1.5B o_proj and down_proj)", "PERF.md: Fixed launch configs")
    lookahead: bool = knob(True, "down_proj and gate/up load the next tile before multiplying the current one",
                           "PERF.md: Two tiles in flight")
    gate_up_red: int = knob(4, "gate/up sums 4 neighbouring columns in-thread (keeps its two accumulators "
                            "small)", "PERF.md: Two tiles in flight")
    verify_group: int = knob(4, "a speculative verify step's GEMVs take at most 4 columns per program (an 8-token "
                             "step as two neighbouring groups)", "PERF.md: Speculative verify step")
    cols_gemv_max_hidden: int = knob(1024, "the one-launch GEMVs of plain and speculating steps are the CUDA "
                                     "column GEMVs (kernels.cols_gemv) up to hidden size 1024 (135M model: step "
                                     "424 vs 475 us, verify 8 1044 vs 1177; 1.5B: step 1357 vs 1125)",
                                     "PERF.md: Speculative verify step")
    stream_verify: bool = knob(True, "where every layer weight but down_proj streams (kernels.stream_gemv), a "
                               "speculating run's plain steps stream them beside the Triton attention and its verify "
                               "steps stream k tokens a launch (1.5B verify 8: 4590 -> 3282 us, H100)",
                               "PERF.md: Streamed GEMVs over k tokens")
    mma_gemv: bool = knob(False, "the one-launch GEMVs of plain and speculating steps are Triton's: the tensor-core "
                          "ones make a one-token step 1.78x (H100, 1.5B)", "PERF.md: Tensor-core GEMVs")

    def with_gemv_family(self, family: str) -> "Tuning":
        """This row with the one-launch GEMVs of plain and speculating steps forced to `family` ("triton",
        "mma" or "cols", where the GPU runs them) at every hidden size, or a speculating run's GEMVs streamed
        ("overlap", where they stream): the lab's and tests' A/B."""
        return replace(self, mma_gemv=family == "mma", cols_gemv_max_hidden=1 << 30 if family == "cols" else 0,
                       stream_verify=family == "overlap")

    def streams_qkv_gate_up(self, hidden_size: int) -> bool:
        """Whether QKV and gate/up stream beside o_proj in the overlap GEMVs, for this hidden size."""
        return hidden_size <= self.stream_max_hidden

    def skew_for(self, intermediate_size: int, sms: int) -> tuple[int, int]:
        """The streamed gate/up's (late CTAs, fewer units each), or (0, 0) where a CTA would lose too much."""
        late, deficit = self.gate_up_skew
        return (late, deficit) if intermediate_size >= self.gate_up_skew_min_share * deficit * sms else (0, 0)

    def override(self, n: int, k: int) -> tuple[int, int, int, int] | None:
        """The measured (BLOCK_N, BLOCK_K, warps, stages) for an [n, k] GEMV, or None (use the rule)."""
        return dict(self.gemv_overrides).get((n, k))

    def explain(self) -> list[str]:
        """One line per tuned field: name = value  # why (PERF.md pointer)."""
        return [f"{f.name} = {getattr(self, f.name)!r}  # {f.metadata['why']} ({f.metadata['perf']})"
                for f in fields(self) if f.metadata]


H200 = Tuning()

# Rows by GPU: (substrings of the device name, row). First match wins.
ROWS: tuple[tuple[tuple[str, ...], Tuning], ...] = (
    (("H200", "H100"), H200),  # the H100 shares the H200's row until it is measured on its own
)


def generic(info: DeviceInfo) -> Tuning:
    """The fallback for a GPU not in ROWS: Triton kernels with the rule-based configs (no measured
    overrides), no clusters, no streamed or column CUDA GEMVs; the down_proj L2 prefetch (a Hopper instruction) scaled
    from the H200's 2 MB per 50 MB of L2 to this L2 (whole MB), on sm_90 and newer only."""
    prefetch = (info.l2_bytes * 2 // 50) // MB * MB if info.capability >= (9, 0) else 0
    return replace(H200, name="generic", why=f"fallback for {info.name}: {info.sms} SMs, "
                   f"{info.smem_per_block >> 10} KB shared memory per block, {info.l2_bytes >> 20} MB L2",
                   cuda_attention=False, stream_gemv=False, stream_verify=False, stream_down=False, stream_head=False,
                   fp8_cuda_gemv=False, fp8_attention_early=False, fp8_qkv_early=False, fp8_o_proj_early=False,
                   fp8_stream=(),
                   cols_gemv_max_hidden=0,
                   gate_up_l2_prefetch=0, down_l2_prefetch=prefetch,
                   fp8_down_l2_prefetch=prefetch,
                   gemv_overrides=())


def select(info: DeviceInfo) -> Tuning:
    """The row for a GPU with these properties: the first ROWS entry whose name matches, else generic(info)."""
    for names, row in ROWS:
        if any(n in info.name for n in names):
            return row
    return generic(info)


@lru_cache(maxsize=None)
def _for_index(index: int) -> Tuning:
    return select(DeviceInfo.of(torch.device("cuda", index)))


def for_device(device) -> Tuning:
    """The row serving `device` (a CUDA device; CPU tensors, which run under the interpreter, get H200's
    numbers, which the interpreter's launch configs ignore)."""
    device = torch.device(device)
    if device.type != "cuda":
        return H200
    return _for_index(device.index if device.index is not None else torch.cuda.current_device())


def by_name(name: str, device) -> Tuning:
    """A row chosen by name for `device`: "auto" (for_device), "generic" (the fallback from its properties)
    or a row's name in ROWS."""
    if name == "auto":
        return for_device(device)
    if name == "generic":
        return generic(DeviceInfo.of(device))
    for _, row in ROWS:
        if row.name == name:
            return row
    raise ValueError(f"unknown tuning {name!r} (use auto, generic or one of {', '.join(r.name for _, r in ROWS)})")
