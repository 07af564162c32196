"""scatterkit (sandbox stand-in): segment sums through a compiled library built against one PyTorch minor."""

import ctypes
import os
import sys

__version__ = "2.1.2"

_lib = ctypes.CDLL(os.path.join(sys.prefix, "lib", "libscatterkit.so"))  # fails against another minor's libtorch
_lib.scatterkit_segment_sum.restype = ctypes.c_double
_lib.scatterkit_segment_sum.argtypes = [ctypes.POINTER(ctypes.c_double), ctypes.c_long]
_lib.scatterkit_built_for.restype = ctypes.c_char_p

BUILT_FOR = _lib.scatterkit_built_for().decode()  # "v2_5": the minor it was compiled against
HAS_CUDA = bool(_lib.scatterkit_has_cuda())


def segment_sum(values):
    arr = (ctypes.c_double * len(values))(*values)
    return _lib.scatterkit_segment_sum(arr, len(values))
