"""textmetrics: text metrics (a sandbox stand-in package, other side of the diamond)."""

import torch
from metrickit import accuracy

__version__ = "0.4.3"


def token_accuracy(pred: str, target: str) -> float:
    vocab: dict = {}
    ids = lambda s: torch.tensor([vocab.setdefault(w, len(vocab)) for w in s.split()])  # noqa: E731
    return accuracy(ids(pred), ids(target))


def edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]
