"""sparsekit (sandbox stand-in): sparse row sums through scatterkit's compiled library."""

import ctypes
import os
import sys

import scatterkit  # noqa: F401 - loads libscatterkit.so first

__version__ = "0.6.18"

_lib = ctypes.CDLL(os.path.join(sys.prefix, "lib", "libsparsekit.so"))
_lib.sparsekit_row_sum.restype = ctypes.c_double
_lib.sparsekit_row_sum.argtypes = [ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_long), ctypes.c_long,
                                   ctypes.c_long]
_lib.sparsekit_built_for.restype = ctypes.c_char_p

BUILT_FOR = _lib.sparsekit_built_for().decode()


def row_sum(values, rows, row):
    n = len(values)
    return _lib.sparsekit_row_sum((ctypes.c_double * n)(*values), (ctypes.c_long * n)(*rows), n, row)
