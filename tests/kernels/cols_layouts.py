"""Compiles the one-column decode kernels and their k-column twins for sm_90 WITHOUT a GPU (Triton's CUDA
backend, to TTGIR) and prints, per kernel pair and config, whether every reduction of the k-column kernel uses
a layout of the one-column kernel's reductions (the layout along the reduced axis fixes the order of the
sums, hence the bits). Run in a subprocess with TRITON_INTERPRET=0 by test_cols_layouts.py."""

import os
import re
import sys

os.environ["TRITON_INTERPRET"] = "0"

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
import triton  # noqa: E402


def ttgir(fn, sig: dict, constexprs: dict, num_warps: int) -> str:
    names = fn.arg_names
    sig = {n: t for n, t in sig.items() if n in names}
    signature = {n: sig.get(n, "constexpr") for n in names}
    div16 = [n for n, t in sig.items() if t.startswith("*") or n in ("N", "K")]
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in div16}
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps}).asm["ttgir"]


def reduce_layouts(text: str) -> set[tuple[str, str, str]]:
    """(axis, operand shape, layout) of every tt.reduce."""
    defs = dict(re.findall(r"^(#\w+) = (#ttg\.\w+<.*>)$", text, re.M))
    out = set()
    for m in re.finditer(r'"tt.reduce"\(([^)]*)\) <\{axis = (\d+) : i32\}>.*?\) : \(([^)]*)\) ->', text, re.S):
        ty = m.group(3)
        lay = re.search(r"(#[\w.]+)", ty)
        lay = lay.group(1) if lay else ty
        out.add((m.group(2), ty.split(",")[0], defs.get(lay, lay)))
    return out


def main() -> int:
    import kernels.gate_up_silu as gu1
    import kernels.gate_up_silu_cols as guk
    import kernels.gemv_residual as gr1
    import kernels.gemv_residual_cols as grk
    import kernels.lm_head_argmax as lm1
    import kernels.lm_head_argmax_cols as lmk
    import kernels.rmsnorm_gemv as rg1
    import kernels.rmsnorm_gemv_cols as rgk

    f32, bf16 = "*fp32", "*bf16"
    rms = {"x_ptr": f32, "w_ptr": bf16, "norm_w_ptr": bf16, "bias_ptr": bf16, "out_ptr": f32, "N": "i32", "K": "i32",
           "eps": "fp32"}
    res = {"a_ptr": f32, "w_ptr": bf16, "x_ptr": f32, "N": "i32", "K": "i32", "pf_ptr": "*u8", "pf_bytes": "i32"}
    gu = {"x_ptr": f32, "norm_w_ptr": bf16, "w_ptr": bf16, "out_ptr": f32, "N": "i32", "K": "i32", "eps": "fp32"}
    lm = {"x_ptr": f32, "w_ptr": bf16, "norm_w_ptr": bf16, "logits_ptr": f32, "scratch_ptr": "*i64",
          "token_ptr": "*i64", "pos_ptr": "*i32", "embed_ptr": bf16, "N": "i32", "K": "i32", "eps": "fp32",
          "n_programs": "i32", "no_key": "i64", "ring_ptr": "*i64", "ring_size": "i32", "draft_ptr": "*i64",
          "klen_ptr": "*i64", "x_next_ptr": f32, "result_ptr": "*i64"}
    cases = []
    for bn, bk, nw in [(4, 512, 4), (4, 1024, 8), (32, 128, 4), (16, 256, 4)]:
        ce = {"HAS_NORM": True, "HAS_BIAS": True, "USE_PDL": True, "BLOCK_N": bn, "BLOCK_K": bk}
        cases.append((f"rmsnorm_gemv {bn}x{bk} w{nw}", rg1._rmsnorm_gemv_kernel, rgk._rmsnorm_gemv_cols_kernel,
                      rms, ce, {}, nw))
        ce = {"HAS_NORM": True, "HAS_RING": True, "USE_PDL": True, "BLOCK_N": bn, "BLOCK_K": bk, "BLOCK_H": 1024}
        cases.append((f"lm_head_argmax {bn}x{bk} w{nw}", lm1._lm_head_argmax_kernel, lmk._lm_head_argmax_cols_kernel,
                      lm, ce, {"MAXC": 16}, nw))
    for bn, bk, nw, ahead in [(4, 512, 4, False), (4, 1024, 8, True), (4, 2048, 8, False)]:
        ce = {"USE_PDL": True, "BLOCK_N": bn, "BLOCK_K": bk, "AHEAD": ahead}
        cases.append((f"gemv_residual {bn}x{bk} w{nw} ahead={ahead}", gr1._gemv_residual_kernel,
                      grk._gemv_residual_cols_kernel, res, dict(ce, EARLY=False, PF=False), {}, nw))
    for bn, bk, nw, ahead, red in [(16, 256, 8, False, 1), (16, 256, 8, True, 2), (16, 256, 8, True, 4)]:
        ce = {"USE_PDL": True, "BLOCK_N": bn, "BLOCK_K": bk, "AHEAD": ahead, "RED": red}
        cases.append((f"gate_up {bn}x{bk} w{nw} ahead={ahead} red={red}", gu1._gate_up_silu_kernel,
                      guk._gate_up_silu_cols_kernel, gu, ce, {}, nw))
    bad = 0
    for name, one, cols, sig, ce, extra, nw in cases:
        want = reduce_layouts(ttgir(one, sig, ce, nw))
        for kc in (2, 8):
            cols_ce = {k: v for k, v in ce.items() if k in cols.arg_names}
            shape = {k: v for k, v in (("KC", kc), ("CP", kc), ("G", 1)) if k in cols.arg_names}
            got = reduce_layouts(ttgir(cols, sig, dict(cols_ce, **shape, **extra), nw))
            ok = got <= want
            bad += not ok
            print(f"{'same' if ok else 'DIFFERENT'}: {name} KC={kc}")
            if not ok:
                print("  one-column:", sorted(want), "\n  k-column:", sorted(got - want))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
