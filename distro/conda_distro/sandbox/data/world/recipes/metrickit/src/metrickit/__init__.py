"""metrickit: metrics computed on torch tensors (a sandbox stand-in package, bottom of the diamond)."""

import torch

__version__ = "0.5.1"


def accuracy(pred: "torch.Tensor", target: "torch.Tensor") -> float:
    hits = [int(a == b) for a, b in zip(pred.tolist(), target.tolist())]
    return torch.tensor(hits).mean().item()


def mean_abs_error(pred: "torch.Tensor", target: "torch.Tensor") -> float:
    return (pred - target).abs().mean().item()
