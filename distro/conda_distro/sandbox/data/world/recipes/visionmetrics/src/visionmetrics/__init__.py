"""visionmetrics: image metrics (a sandbox stand-in package, one side of the diamond)."""

import torch
from metrickit import accuracy

__version__ = "0.2.0"


def box_iou(a, b) -> float:
    """Intersection over union of two (x1, y1, x2, y2) boxes."""
    ix = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    area = lambda r: (r[2] - r[0]) * (r[3] - r[1])  # noqa: E731
    return inter / (area(a) + area(b) - inter)


def pixel_accuracy(pred: "torch.Tensor", target: "torch.Tensor") -> float:
    flat = lambda t: torch.tensor([x for row in t.tolist() for x in row])  # noqa: E731
    return accuracy(flat(pred), flat(target))
