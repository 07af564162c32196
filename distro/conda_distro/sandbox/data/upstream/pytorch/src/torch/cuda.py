"""torch.cuda (stand-in): available only in the cuda build."""

from torch._build_info import CUDA as _CUDA


def is_available() -> bool:
    return _CUDA is not None


def device_count() -> int:
    return 1 if is_available() else 0


def get_device_name(index: int = 0) -> str:
    if not is_available():
        raise RuntimeError("Found no NVIDIA driver on your system (stand-in cpu build)")
    return "Stand-in GPU"
