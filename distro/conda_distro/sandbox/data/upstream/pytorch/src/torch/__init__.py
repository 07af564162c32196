"""STAND-IN for PyTorch (conda-distro sandbox world only). This is NOT PyTorch.

A pure-python module with just enough API for the sandbox's distribution recipes to test against:

* ``torch.__version__``, ``torch.version.cuda`` (None in the cpu build), ``torch.cuda.is_available()``
  (True only in the cuda build), ``torch.__stand_in__ = True``;
* ``torch.tensor(list)`` with ``.sum()``, ``.mean()``, ``.item()``, ``.tolist()``, ``.shape``,
  elementwise ``+ - *`` and ``torch.zeros/ones/arange/stack/manual_seed/no_grad``;
* ``torch.nn.Module`` (``forward``/``__call__``/``parameters``), ``nn.Linear``, ``nn.ReLU``,
  ``nn.Sequential``;
* ``torch.legacy_autograd_hook(fn)``: exists in 2.4 and 2.5, REMOVED in 2.6.0 (so that a
  distribution package can fail on the newest release only).
"""

from torch._build_info import VERSION as __version__
from torch._tensor import Tensor, arange, manual_seed, no_grad, ones, stack, tensor, zeros
from torch import cuda, nn, version

__stand_in__ = True

_RELEASE = tuple(int(p) for p in __version__.split(".")[:2])

float32 = "float32"
int64 = "int64"

if _RELEASE < (2, 6):

    def legacy_autograd_hook(fn):
        """Register ``fn`` as a (stand-in) legacy autograd hook and return a handle.

        Deprecated in 2.5 and removed in 2.6.0, like many real PyTorch APIs before it.
        """
        import warnings

        if _RELEASE >= (2, 5):
            warnings.warn("legacy_autograd_hook is deprecated and will be removed in 2.6",
                          DeprecationWarning, stacklevel=2)
        return {"hook": fn, "active": True}


__all__ = [
    "Tensor", "tensor", "zeros", "ones", "arange", "stack", "manual_seed", "no_grad",
    "cuda", "nn", "version", "float32", "int64", "__version__",
]
