"""quantserve: serves fastquant-quantized models (a sandbox stand-in package).

Its own tests pass; it depends on fastquant, whose tests fail, so a distribution build marks it
blocked rather than testing it.
"""

import fastquant
import torch

__version__ = "0.1.5"


def decode(codes, lo: float, hi: float) -> list:
    return torch.tensor(fastquant.dequantize(codes, lo, hi)).tolist()
