"""Compiles the tensor-core GEMVs (kernels/gemv_mma_cols.py, lm_head_mma_cols.py) for sm_90 WITHOUT a GPU
(Triton's CUDA backend down to a cubin, with their default launch configs) and prints, per kernel, whether it
compiled and whether its dots became tensor-core MMAs (bf16 weights) or stayed fp32 FMA dots (fp32 weights).
Run in a subprocess with TRITON_INTERPRET=0 by test_mma_compile.py."""

import os
import re
import sys

os.environ["TRITON_INTERPRET"] = "0"

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
import triton  # noqa: E402


def compiled(fn, sig: dict, constexprs: dict, num_warps: int, num_stages: int):
    names = fn.arg_names
    sig = {n: t for n, t in sig.items() if n in names}
    signature = {n: sig.get(n, "constexpr") for n in names}
    div16 = [n for n, t in sig.items() if t.startswith("*") or n in ("N", "K", "KS")]  # as Triton specializes them
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in div16}
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps,
                                                                        "num_stages": num_stages})


def main() -> int:
    import kernels.gemv_mma_cols as g
    import kernels.lm_head_mma_cols as lm

    f32, bf16 = "*fp32", "*bf16"
    common = {"n_cols": "i32", "N": "i32", "K": "i32", "KS": "i32", "eps": "fp32", "part_ptr": f32,
              "ticket_ptr": "*i32"}
    rms = {"x_ptr": f32, "norm_w_ptr": bf16, "bias_ptr": bf16, "out_ptr": f32, **common}
    res = {"a_ptr": f32, "x_ptr": f32, **common}
    gu = {"x_ptr": f32, "norm_w_ptr": bf16, "out_ptr": f32, **common}
    head = {"x_ptr": f32, "norm_w_ptr": bf16, "logits_ptr": f32, "scratch_ptr": "*i64", "draft_ptr": "*i64",
            "klen_ptr": "*i64", "token_ptr": "*i64", "pos_ptr": "*i32", "embed_ptr": bf16, "x_next_ptr": f32,
            "result_ptr": "*i64", "ring_ptr": "*i64", "ring_size": "i32", "n_programs": "i32", "no_key": "i64",
            **common}
    shapes = {"qkv": (2048, 1536), "o_proj": (1536, 1536), "gate_up": (8960, 1536), "down": (1536, 8960),
              "lm_head": (151936, 1536)}
    base = {"USE_PDL": True, "NCOL": g.NC}
    cases = []
    for wt in (bf16, "*fp32"):
        split = wt == bf16
        cases += [
            ("rmsnorm_gemv qkv", g._rmsnorm_gemv_mma_kernel, dict(rms, w_ptr=wt),
             dict(base, HAS_NORM=True, HAS_BIAS=True, SPLIT=split), "qkv"),
            ("gemv_residual o_proj", g._gemv_residual_mma_kernel, dict(res, w_ptr=wt), dict(base, SPLIT=split), "o_proj"),
            ("gemv_residual down", g._gemv_residual_mma_kernel, dict(res, w_ptr=wt), dict(base, SPLIT=split), "down"),
            ("gate_up", g._gate_up_silu_mma_kernel, dict(gu, w_ptr=wt), dict(base, SPLIT=split), "gate_up"),
            ("lm_head_argmax", lm._lm_head_argmax_mma_kernel, dict(head, w_ptr=wt),
             dict(base, HAS_NORM=True, HAS_DRAFT=True, HAS_RESULT=True, HAS_RING=True, SPLIT=split, BLOCK_H=1024),
             "lm_head"),
        ]
        if split:
            cases.append(("lm_head_argmax plain step", lm._lm_head_argmax_mma_kernel, dict(head, w_ptr=wt),
                          dict(base, HAS_NORM=True, HAS_DRAFT=False, HAS_RESULT=False, HAS_RING=True, SPLIT=True,
                               BLOCK_H=1024), "lm_head"))
    for name, fn, sig, ce, shape in list(cases[:4]):  # the GEMVs with split-K too (bf16)
        cases.append((name + " split-K 4", fn, sig, dict(ce, SPLIT_K=4), shape))
    bad = 0
    for name, fn, sig, ce, shape in cases:
        rows, k = shapes[shape]
        cfg = dict(g.mma_config(rows, k))
        if fn is lm._lm_head_argmax_mma_kernel:
            cfg.pop("SPLIT_K")
        cfg.update({key: v for key, v in ce.items() if key == "SPLIT_K"})
        nw, ns = cfg.pop("num_warps"), cfg.pop("num_stages")
        try:
            kernel = compiled(fn, sig, dict(ce, **cfg), nw, ns)
        except Exception as e:  # noqa: BLE001  (printed for the test)
            print(f"FAILED: {name} ({sig['w_ptr']}): {type(e).__name__}: {str(e)[:400]}")
            bad += 1
            continue
        mma = bool(re.search(r"#ttg\.nvidia_mma<", kernel.asm["ttgir"]))
        ok = mma == (sig["w_ptr"] == bf16)
        bad += not ok
        print(f"{'ok' if ok else 'WRONG'}: {name} ({sig['w_ptr']}, {cfg}, w{nw} s{ns}): mma={mma}, "
              f"shared {kernel.metadata.shared} B")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
