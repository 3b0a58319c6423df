"""CUDA C kernels compiled at run time (NVRTC) and launched through the driver API (ctypes).

For the few kernels Triton cannot express (thread-block clusters, distributed shared memory):
`nvrtc_compile(source, arch)` gives a cubin, `CudaKernel(cubin, name, ...)` loads it, and its
`launch()` uses cuLaunchKernelEx with
the cluster-dimension and programmatic-dependent-launch attributes, on the current torch stream, so
it is captured into CUDA graphs like any torch or Triton launch. NVRTC comes with the CUDA build of
torch (the nvidia-cuda-nvrtc wheel); `available()` says whether it and a GPU of compute capability
>= 9.0 are here. Nothing is imported or loaded until first use: CPU machines never touch this. The sources live in
kernels/csrc (`load_source`), with one shared header (common.cuh).
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
from functools import lru_cache
from pathlib import Path

import torch

# Driver API enums (cuda.h).
_ATTR_MAX_DYNAMIC_SHARED = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
_ATTR_CARVEOUT = 9  # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT (percent of L1 as shared memory)
_ATTR_NON_PORTABLE_CLUSTER = 14  # CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
_LAUNCH_CLUSTER_DIMENSION = 4  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
_LAUNCH_PROGRAMMATIC_SERIALIZATION = 6  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION


class _AttrValue(ctypes.Union):
    _fields_ = [("pad", ctypes.c_char * 64), ("dim", ctypes.c_uint * 3), ("flag", ctypes.c_int)]


class _LaunchAttr(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", _AttrValue)]


class _LaunchConfig(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("smem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(_LaunchAttr)), ("num_attrs", ctypes.c_uint)]


class CudaError(RuntimeError):
    pass


def _nvrtc_paths() -> list[str]:
    """Candidate NVRTC libraries: the pip wheels torch depends on, then the system's."""
    found = []
    for root in sys.path:
        found += sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib", "libnvrtc.so*")))  # cu13/, cuda_nvrtc/
    major = (torch.version.cuda or "12").split(".")[0]
    return [p for p in found if ".alt." not in p] + [f"libnvrtc.so.{major}", "libnvrtc.so"]


@lru_cache(maxsize=1)
def _nvrtc() -> ctypes.CDLL:
    for path in _nvrtc_paths():
        try:
            if os.path.isabs(path):  # load the builtins next to it first: nvrtc dlopens them by name
                for b in glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so*")):
                    if ".alt." not in b:
                        ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
    raise CudaError("NVRTC not found (install the CUDA build of torch, which brings nvidia-cuda-nvrtc)")


@lru_cache(maxsize=1)
def _driver() -> ctypes.CDLL:
    return ctypes.CDLL("libcuda.so.1")


def _check(lib_result: int, what: str) -> None:
    if lib_result != 0:
        msg = ctypes.c_char_p()
        _driver().cuGetErrorString(lib_result, ctypes.byref(msg))
        raise CudaError(f"{what} failed: {lib_result} {msg.value.decode() if msg.value else ''}")


def available(device=None) -> bool:
    """True on a CUDA GPU of compute capability >= 9.0 with NVRTC and the driver API loadable."""
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return False
    if torch.cuda.get_device_capability(device)[0] < 9:
        return False
    try:
        _nvrtc(), _driver()
    except (OSError, CudaError):
        return False
    return True


CSRC = Path(__file__).parent / "csrc"


@lru_cache(maxsize=None)
def load_source(name: str) -> str:
    """The CUDA C text of kernels/csrc/<name>, each `#include "X"` line replaced by csrc/X's text (so NVRTC
    needs no include path); the launcher prepends its variant's #defines."""
    lines = []
    for line in (CSRC / name).read_text().splitlines(keepends=True):
        if line.startswith('#include "'):
            lines.append(load_source(line.split('"')[1]))
        else:
            lines.append(line)
    return "".join(lines)


def nvrtc_compile(source: str, arch: str, options: tuple[str, ...] = ()) -> bytes:
    """CUDA C source -> cubin for `arch` (e.g. "sm_90a"); raises CudaError with the compile log."""
    nv = _nvrtc()
    prog = ctypes.c_void_p()
    r = nv.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernel.cu", 0, None, None)
    if r != 0:
        raise CudaError(f"nvrtcCreateProgram failed: {r}")
    try:
        opts = [f"--gpu-architecture={arch}", "-std=c++17", *options]
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        r = nv.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        nv.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nv.nvrtcGetProgramLog(prog, log)
        if r != 0:
            raise CudaError(f"NVRTC compile failed:\n{log.value.decode(errors='replace')}")
        nv.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        cubin = ctypes.create_string_buffer(size.value)
        if nv.nvrtcGetCUBIN(prog, cubin) != 0:
            raise CudaError("nvrtcGetCUBIN failed")
        return cubin.raw
    finally:
        nv.nvrtcDestroyProgram(ctypes.byref(prog))


def _ensure_context(device: torch.device) -> None:
    torch.cuda.init()
    torch.cuda.set_device(device)
    ctx = ctypes.c_void_p()
    _check(_driver().cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if not ctx.value:  # torch made no context current on this thread yet: use the primary one
        dev = ctypes.c_int()
        _check(_driver().cuDeviceGet(ctypes.byref(dev), device.index or 0), "cuDeviceGet")
        _check(_driver().cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        _check(_driver().cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


class CudaKernel:
    """A loaded kernel function. launch() arguments: ctypes values in the kernel's parameter order."""

    def __init__(self, cubin: bytes, name: str, device: torch.device, smem: int, cluster: int,
                 carveout: int | None = None):
        _ensure_context(device)
        drv = _driver()
        self._cubin = cubin  # the module keeps pointers into it while loading
        self.module, self.fn = ctypes.c_void_p(), ctypes.c_void_p()
        _check(drv.cuModuleLoadData(ctypes.byref(self.module), cubin), "cuModuleLoadData")
        _check(drv.cuModuleGetFunction(ctypes.byref(self.fn), self.module, name.encode()), "cuModuleGetFunction")
        if smem > 32 * 1024:  # past 48 KB with the kernel's static shared memory needs the opt-in too
            _check(drv.cuFuncSetAttribute(self.fn, _ATTR_MAX_DYNAMIC_SHARED, smem), "cuFuncSetAttribute(smem)")
        if carveout is not None:
            _check(drv.cuFuncSetAttribute(self.fn, _ATTR_CARVEOUT, carveout), "cuFuncSetAttribute(carveout)")
        if cluster > 8:
            _check(drv.cuFuncSetAttribute(self.fn, _ATTR_NON_PORTABLE_CLUSTER, 1), "cuFuncSetAttribute(cluster)")
        self.smem, self.cluster = smem, cluster

    def max_active_clusters(self, block: int) -> int:
        """How many clusters of this kernel (at `block` threads) the GPU can hold at once: a grid that
        needs all of its CTAs resident (they wait for each other) must not have more."""
        attrs = (_LaunchAttr * 1)()
        attrs[0].id = _LAUNCH_CLUSTER_DIMENSION
        attrs[0].value.dim[0], attrs[0].value.dim[1], attrs[0].value.dim[2] = self.cluster, 1, 1
        cfg = _LaunchConfig()
        cfg.grid[0], cfg.grid[1], cfg.grid[2] = self.cluster, 1, 1
        cfg.block[0], cfg.block[1], cfg.block[2] = block, 1, 1
        cfg.smem, cfg.attrs, cfg.num_attrs = self.smem, attrs, 1
        n = ctypes.c_int()
        _check(_driver().cuOccupancyMaxActiveClusters(ctypes.byref(n), self.fn, ctypes.byref(cfg)),
               "cuOccupancyMaxActiveClusters")
        return n.value

    def launch(self, grid: tuple[int, int, int], block: int, args: list, *, pdl: bool = False, stream=None) -> None:
        attrs = (_LaunchAttr * 2)()
        n = 0
        if self.cluster > 1:
            attrs[n].id = _LAUNCH_CLUSTER_DIMENSION
            attrs[n].value.dim[0], attrs[n].value.dim[1], attrs[n].value.dim[2] = self.cluster, 1, 1
            n += 1
        if pdl:
            attrs[n].id = _LAUNCH_PROGRAMMATIC_SERIALIZATION
            attrs[n].value.flag = 1
            n += 1
        cfg = _LaunchConfig()
        cfg.grid[0], cfg.grid[1], cfg.grid[2] = grid
        cfg.block[0], cfg.block[1], cfg.block[2] = block, 1, 1
        cfg.smem = self.smem
        cfg.stream = (stream or torch.cuda.current_stream()).cuda_stream
        cfg.attrs = attrs
        cfg.num_attrs = n
        params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])  # args stay alive here
        _check(_driver().cuLaunchKernelEx(ctypes.byref(cfg), self.fn, params, None), "cuLaunchKernelEx")
