"""Spec for kernels/csrc: the CUDA C sources load from their files with the shared header pasted in, hold the
kernels the launchers name, and (where nvcc is installed) compile for sm_90a as the launchers assemble them."""

import ctypes
import shutil
import subprocess

import pytest

from kernels import _cuda_rtc, cluster_attention, cols_gemv, stream_gemv


def test_each_source_loads_with_the_shared_header_pasted_in_once():
    header = _cuda_rtc.load_source("common.cuh")
    for name in ("stream_gemv.cu", "cluster_attention.cu"):
        src = _cuda_rtc.load_source(name)
        assert '#include "' not in src
        assert src.count(header) == 1
        assert src.count("void ldsm4(") == 1  # a helper both kernels use, defined once


def test_the_fp8_kernels_share_their_staging_and_unpacking_once():
    shared = _cuda_rtc.load_source("fp8_common.cuh")
    for name in ("fp8_gemv.cu", "fp8_stream_gemv.cu"):
        src = _cuda_rtc.load_source(name)
        assert src.count(shared) == 1 and src.count("float stage_act(") == 1 and src.count("float h2f(") == 1


def test_the_column_gemvs_share_their_parameters_and_the_lm_head_end_once():
    shared = _cuda_rtc.load_source("cols_common.cuh")
    for name in ("cols_gemv.cu", "cols_gemv_mma.cu"):
        src = _cuda_rtc.load_source(name)
        assert src.count(shared) == 1 and src.count("struct Params {") == 1
        assert src.count("void cols_head_finish(") == 1 and src.count("cols_head_finish(prm, tid);") == 1


def test_the_sources_hold_the_kernels_the_launchers_launch():
    assert 'extern "C" __global__ void __launch_bounds__(NCONSUMER + 32, 1) KERNEL_NAME(const Params prm)' \
        in stream_gemv._SOURCE
    assert 'extern "C" __global__ void __launch_bounds__(NT, 2) attn_cluster(' in cluster_attention._SOURCE
    p = stream_gemv.plan(("residual", 1536, 1536), 132, 80 << 10)
    src, name = stream_gemv.source(("residual", -1, -1, 1536), False, p["stages"], p["sums"], p["kc"], True)
    assert name == "stream_gemv_residual" and src.startswith("#define ")
    assert "#define KERNEL_NAME stream_gemv_residual\n" in src and src.endswith(stream_gemv._SOURCE)


def _variants():
    p = stream_gemv.plan(("gate_up", 8960, 1536), 132, 164 << 10, skew=(32, 16))
    sg, _ = stream_gemv.source(("gate_up", 0, -1, 1536), False, p["stages"], p["sums"], p["kc"], False)
    defines = {"G": 6, "HQ": 12, "HKV": 2, "CLUSTER": 16, "MIN_CHUNK": 64, "CACHE_HALF": 0, "HAS_NORM": 0,
               "NORM_KIND": 0, "EARLY": 1}
    ca = "".join(f"#define {k} {v}\n" for k, v in defines.items()) + cluster_attention._SOURCE
    mma = cols_gemv.mma_config_for("residual", 576, 1536)  # the 135M down_proj: K split over a cluster
    cm, _ = cols_gemv.source("residual", 1536, 8, mma, 0)
    head, _ = cols_gemv.source("lm_head", 576, 8, cols_gemv.mma_config_for("lm_head", 49152, 576), 0, 0)
    return {"stream_gate_up_silu": sg, "attn_cluster": ca, "cols_gemv_residual": cm, "cols_lm_head_argmax": head}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed (the GPU tests compile with NVRTC)")
@pytest.mark.parametrize("kernel", ["stream_gate_up_silu", "attn_cluster", "cols_gemv_residual",
                                    "cols_lm_head_argmax"])
def test_a_runner_variant_compiles_for_sm90a(kernel, tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(_variants()[kernel])
    r = subprocess.run(["nvcc", "-ptx", "-arch=sm_90a", "-std=c++17", "--use_fast_math", "-o", str(tmp_path / "k.ptx"),
                        str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    ptx = (tmp_path / "k.ptx").read_text()
    assert f".entry {kernel}(" in ptx
    mirror = {"stream_gate_up_silu": stream_gemv._Params, "cols_gemv_residual": cols_gemv._Params,
              "cols_lm_head_argmax": cols_gemv._Params}.get(kernel)
    if mirror is not None:  # the launcher's ctypes mirror of Params has the kernel's size
        assert f".b8 {kernel}_param_0[{ctypes.sizeof(mirror)}]" in ptx
