"""hookprofiler: profiles autograd via torch.legacy_autograd_hook (a sandbox stand-in package).

It still calls ``torch.legacy_autograd_hook``, which PyTorch deprecated in 2.5 and removed in
2.6.0: the package imports fine everywhere, but ``attach`` fails on 2.6 (its script test shows it).
"""

import torch

__version__ = "0.7.0"


def attach(fn):
    """Register ``fn`` as a profiling hook; returns the hook handle."""
    return torch.legacy_autograd_hook(fn)
