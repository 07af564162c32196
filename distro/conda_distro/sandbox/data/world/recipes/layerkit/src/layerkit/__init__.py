"""layerkit: reusable torch.nn building blocks (a sandbox stand-in package, middle of the chain)."""

import torch
from tensorutils import center

__version__ = "1.1.0"


class CenteredLinear(torch.nn.Module):
    """A Linear layer whose output is centered (uses tensorutils.center)."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(features, features)

    def forward(self, x):
        return center(self.linear(x))


def mlp(features: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(features, features), torch.nn.ReLU())
