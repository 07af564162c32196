"""visionkit: image transforms, versioned in lockstep with PyTorch (a sandbox stand-in package).

Like torchvision, each minor release of visionkit is built for exactly one PyTorch minor release
(0.20.x <-> 2.5.x) and refuses to import with any other.
"""

import torch

__version__ = "0.20.1"
__torch_minor__ = "2.5"

if not torch.__version__.startswith(__torch_minor__ + "."):
    raise ImportError(
        f"visionkit {__version__} is built for torch {__torch_minor__}.x, but torch {torch.__version__} is installed"
    )


class Compose:
    def __init__(self, transforms) -> None:
        self.transforms = list(transforms)

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class ToTensor:
    def __call__(self, x):
        return torch.tensor(x)


class Normalize:
    def __init__(self, mean: float, std: float) -> None:
        self.mean, self.std = mean, std

    def __call__(self, t):
        return (t - self.mean) / self.std
