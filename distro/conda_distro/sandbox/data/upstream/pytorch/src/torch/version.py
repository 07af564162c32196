"""torch.version, as in PyTorch (stand-in)."""

from torch._build_info import CUDA as cuda, VERSION as __version__  # noqa: F401

git_version = "0000000stand-in"
debug = False
