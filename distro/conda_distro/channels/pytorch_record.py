"""What a solved pytorch record is, read from the record itself: what an end user gets.

conda-forge marks its PyTorch builds twice: the build string starts with ``cuda`` or ``cpu``
(``cuda129_generic_py312_h…_200``, ``cpu_generic_py312_h…_0``) and a cuda build depends on the ``__cuda``
virtual package (so that only a machine with a GPU driver gets it). A record is a **cuda** build when it
depends on ``__cuda`` or its build string starts with ``cuda``; otherwise it is a **cpu** build. Whether the
package is a Python package (its record depends on ``python``) decides whether importing ``torch`` can
say more (``verify-channel``'s import probe); a ``libtorch``-like package is judged by its record alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


def _dep_names(depends: Iterable[str]) -> set[str]:
    return {d.split()[0] for d in depends if d.strip()}


@dataclass(frozen=True)
class TorchBuild:
    """The variant of one pytorch record and the evidence it was decided on."""

    build: str
    variant: str  # "cpu" | "cuda"
    needs_cuda: bool  # depends on the __cuda virtual package
    cuda_build_string: bool  # the build string starts with "cuda"
    python: bool  # depends on python: a Python package (import torch works in its environment)

    @classmethod
    def of(cls, build: str, depends: Iterable[str]) -> TorchBuild:
        names = _dep_names(depends)
        needs_cuda, by_string = "__cuda" in names, build.startswith("cuda")
        return cls(build, "cuda" if needs_cuda or by_string else "cpu", needs_cuda, by_string, "python" in names)

    @property
    def evidence(self) -> str:
        """``cuda (depends on __cuda; build string 'cuda126_h…_200' starts with 'cuda')``"""
        if self.variant == "cuda":
            why = [*(["depends on __cuda"] if self.needs_cuda else []),
                   *([f"build string '{self.build}' starts with 'cuda'"] if self.cuda_build_string else [])]
        else:
            why = [f"no __cuda dependency and build string '{self.build}' does not start with 'cuda'"]
        return f"{self.variant} ({'; '.join(why)})"


__all__ = ["TorchBuild"]
