"""Is there a working NVIDIA GPU on this machine? ``nvidia-smi -L`` answers with at least one ``GPU``.

A cuda test run where it does not is an install + import test under the ``__cuda`` override (no CUDA
code runs): its results say so (``gpu: false`` on the test record and in the ledger, "cuda (no GPU)" in
`build`'s table and on the status page), so nobody mistakes one for a test on a GPU.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

PROBE_TIMEOUT = 30
NO_GPU = "no GPU"  # what "cuda (no GPU)" says


@dataclass(frozen=True)
class GpuProbe:
    available: bool
    detail: str  # the first GPU nvidia-smi lists, or why there is none

    def to_dict(self) -> dict:
        return {"available": self.available, "detail": self.detail}


def probe_gpu(timeout: float = PROBE_TIMEOUT) -> GpuProbe:
    """``nvidia-smi -L`` (on ``PATH``) exits 0 and lists a GPU: available. Absent, failing, timing out or
    listing none: not available, with the reason."""
    exe = shutil.which("nvidia-smi", path=os.environ.get("PATH") or os.defpath)
    if exe is None:
        return GpuProbe(False, "nvidia-smi not found")
    try:
        proc = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=timeout, check=False,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return GpuProbe(False, f"nvidia-smi failed: {exc}")
    gpus = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip().startswith("GPU")]
    if proc.returncode != 0 or not gpus:
        last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
        return GpuProbe(False, f"nvidia-smi exited {proc.returncode}: {last[0][:200]}")
    return GpuProbe(True, gpus[0][:200])


def gpu_devices() -> tuple[Path, ...]:
    """The NVIDIA device nodes a sandboxed test needs to reach the GPU (``/dev/nvidia*``)."""
    return tuple(sorted(p for p in Path("/dev").glob("nvidia*") if p.exists()))


def variant_label(variant: str, gpu: bool | None) -> str:
    """``cuda (no GPU)`` for a cuda test run without a working GPU; the variant otherwise (a run on a
    GPU, a cpu test, or an older record that does not say)."""
    return f"{variant} ({NO_GPU})" if variant == "cuda" and gpu is False else variant
