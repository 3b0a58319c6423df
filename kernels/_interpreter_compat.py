"""Work around two Triton 3.6 interpreter bugs (CPU test path only): NumPy >= 2.4 scalars, bf16 tl.dot.

The interpreter keeps scalars as 1-element arrays and converts them with `int(arr)`, which
NumPy 2.4+ rejects ("only 0-dimensional arrays can be converted to Python scalars"), so any
`range(...)` with a runtime bound fails under TRITON_INTERPRET=1. We re-patch the tensor's
`__index__` to take the single element. Only imported when the interpreter is on; does nothing
for compiled kernels.
"""

import triton.runtime.interpreter as _interp

_original = _interp._patch_lang_tensor


def _patch_lang_tensor(tensor, scope):
    _original(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))


if not getattr(_interp._patch_lang_tensor, "_kernels_compat", False):
    _patch_lang_tensor._kernels_compat = True
    _interp._patch_lang_tensor = _patch_lang_tensor


# The interpreter keeps bfloat16 as raw uint16 bits and its tl.dot multiplies those integers; convert them to
# float32 first (exact), as the GPU's bf16 MMA does (kernels.gemv_mma_cols' tensor-core GEMVs).
_original_dot = _interp.InterpreterBuilder.create_dot


def _create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
    import numpy as np
    import triton.language as tl

    def f32(h):
        if h.dtype.scalar == tl.bfloat16:
            data = _interp._convert_float(h.data, tl.bfloat16, tl.float32, None).view(np.float32)
            return _interp.TensorHandle(data, tl.float32)
        return h

    return _original_dot(self, f32(a), f32(b), d, input_precision, max_num_imprecise_acc)


if not getattr(_interp.InterpreterBuilder.create_dot, "_kernels_compat", False):
    _create_dot._kernels_compat = True
    _interp.InterpreterBuilder.create_dot = _create_dot
