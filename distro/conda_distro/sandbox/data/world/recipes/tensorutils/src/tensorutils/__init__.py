"""tensorutils: small helpers for torch tensors (a sandbox stand-in package, chain root)."""

import torch

__version__ = "0.3.2"


def total(values) -> float:
    """Sum of a list of numbers, computed with torch."""
    return torch.tensor(list(values)).sum().item()


def center(t: "torch.Tensor") -> "torch.Tensor":
    """``t`` minus its mean."""
    return t - t.mean().item()


def describe(t: "torch.Tensor") -> dict:
    return {"shape": t.shape, "sum": t.sum().item(), "mean": t.mean().item()}
