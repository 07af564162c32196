"""fastquant: uniform quantization of tensors (a sandbox stand-in package).

It has a real bug: ``quantize`` scales by 2**bits instead of 2**bits - 1, so the top of the range
maps to 256, which does not fit into 8 bits. Its tests catch it on every PyTorch release.
"""

import torch

__version__ = "0.2.1"


def quantize(values, bits: int = 8) -> list:
    t = torch.tensor(list(values))
    lo, hi = t.min().item(), t.max().item()
    scale = (2 ** bits) / (hi - lo)  # BUG: should be (2 ** bits - 1)
    return [int(round((v - lo) * scale)) for v in t.tolist()]


def dequantize(codes, lo: float, hi: float, bits: int = 8) -> list:
    return [lo + c * (hi - lo) / (2 ** bits - 1) for c in codes]
