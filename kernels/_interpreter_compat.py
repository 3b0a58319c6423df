"""Work around a Triton 3.6 interpreter bug with NumPy >= 2.4 (CPU test path only).

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
