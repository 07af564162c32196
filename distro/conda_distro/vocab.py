"""The distribution's words, on the ground floor (every layer may use them): a PyTorch :class:`Release`,
a :class:`Variant`, a test :class:`Target` (release × variant), a sweep's :class:`SweepStatus`, and the
package name an artifact's file name carries (:func:`artifact_name`).

Each value is what it reads as: a release and the enums are ``str`` subclasses and a target is a tuple,
so JSON documents, dict keys and text written before these types existed read and print the same
(``str(Variant.CUDA) == "cuda"``, ``Target("2.5.0", "cpu") == ("2.5.0", "cpu")``). A closed vocabulary
is an :class:`enum.StrEnum`; an open value with a grammar (a release) is parsed once, when it is made.
"""

from __future__ import annotations

import enum
import re
from typing import Any

#: a PyTorch release: MAJOR.MINOR.PATCH, each a number of at most 6 digits without leading zeros (a
#: 5,000-digit component is no version any tool can compare)
RELEASE_RE = re.compile(r"^(0|[1-9]\d{0,5})\.(0|[1-9]\d{0,5})\.(0|[1-9]\d{0,5})$")

CUDA_VERSION = "12.4"  # the __cuda version announced in the cuda variant (CONDA_OVERRIDE_CUDA)


class Release(str):
    """A supported PyTorch release (``2.5.1``), parsed once: ordered as versions (``2.10.0`` after
    ``2.9.0``), with its :attr:`minor` (``"2.5"``); ``str()`` and JSON give its text. Equal to (and hashed
    as) its text, so a plain string finds it in a dict."""

    parts: tuple[int, int, int]

    def __new__(cls, text: str) -> Release:
        if isinstance(text, Release):
            return text
        m = RELEASE_RE.match(text)
        if m is None:
            raise ValueError(f"'{text}' is not a release version MAJOR.MINOR.PATCH like 2.5.1")
        self = super().__new__(cls, text)
        self.parts = (int(m[1]), int(m[2]), int(m[3]))
        return self

    @property
    def major_minor(self) -> tuple[int, int]:
        return self.parts[0], self.parts[1]

    @property
    def minor(self) -> str:
        """``"2.5"`` for 2.5.1: what a pin at minor granularity names."""
        return f"{self.parts[0]}.{self.parts[1]}"

    @property
    def next_minor(self) -> str:
        """``"2.6"`` for 2.5.1: the exclusive upper bound at minor granularity."""
        return f"{self.parts[0]}.{self.parts[1] + 1}"

    def _key(self, other: object) -> tuple[int, int, int] | None:
        if isinstance(other, Release):
            return other.parts
        if isinstance(other, str) and RELEASE_RE.match(other):
            return Release(other).parts
        return None

    def __lt__(self, other: object) -> bool:
        k = self._key(other)
        return self.parts < k if k is not None else str.__lt__(self, other)  # type: ignore[operator]

    def __le__(self, other: object) -> bool:
        k = self._key(other)
        return self.parts <= k if k is not None else str.__le__(self, other)  # type: ignore[operator]

    def __gt__(self, other: object) -> bool:
        k = self._key(other)
        return self.parts > k if k is not None else str.__gt__(self, other)  # type: ignore[operator]

    def __ge__(self, other: object) -> bool:
        k = self._key(other)
        return self.parts >= k if k is not None else str.__ge__(self, other)  # type: ignore[operator]

    __hash__ = str.__hash__

    def __repr__(self) -> str:
        return f"Release({str.__repr__(self)})"

    def __reduce__(self) -> tuple[Any, ...]:  # pickles (the build workers) as its text
        return (Release, (str(self),))


class Variant(enum.StrEnum):
    """A build variant of PyTorch that packages are tested against."""

    CPU = "cpu"
    CUDA = "cuda"

    @property
    def cuda(self) -> bool:
        return self is Variant.CUDA

    @property
    def cuda_override(self) -> str:
        """CONDA_OVERRIDE_CUDA for a solve or an install of this variant (empty: no ``__cuda``)."""
        return CUDA_VERSION if self.cuda else ""

    def virtual_packages(self) -> list:
        """This machine's virtual packages for a solve of this variant, with ``__cuda`` exactly for cuda
        (announced as :data:`CUDA_VERSION`, whether or not a GPU is present)."""
        return virtual_packages(self.cuda)


def virtual_packages(cuda: bool) -> list:
    """This machine's virtual packages for a solve, with ``__cuda`` exactly when ``cuda``."""
    from rattler import BuildString, GenericVirtualPackage, PackageName, Version, VirtualPackage

    out = [v.into_generic() for v in VirtualPackage.detect()]
    out = [g for g in out if g.name.normalized != "__cuda"]
    if cuda:
        out.append(GenericVirtualPackage(PackageName("__cuda"), Version(CUDA_VERSION), BuildString("0")))
    return out


class Target(tuple[str, Variant]):
    """One (release, variant) combination a package is tested against. A tuple ``(release, variant)``: keys
    and documents written before this type find it, and it unpacks as one. Made from text, its variant
    is parsed (a :class:`Variant`, or ``ValueError``) and so is its release when it reads as one (a
    :class:`Release`). ``str()``: ``2.5.0/cuda``."""

    __slots__ = ()

    def __new__(cls, release: str, variant: str) -> Target:
        rel = release if isinstance(release, Release) or not RELEASE_RE.match(release) else Release(release)
        return super().__new__(cls, (rel, Variant(variant)))

    def __getnewargs__(self) -> tuple[str, str]:
        return self[0], self[1]

    @property
    def release(self) -> str:
        return self[0]

    @property
    def variant(self) -> Variant:
        return self[1]

    def __repr__(self) -> str:
        return f"Target({str(self[0])!r}, {str(self[1])!r})"

    def __str__(self) -> str:
        return f"{self.release}/{self.variant}"

    def spelled(self) -> str:
        """``pytorch 2.5.0 cuda``: how reports name it."""
        return f"pytorch {self.release} {self.variant}"


class SweepStatus(enum.StrEnum):
    """Where a package ended in a release's sweep (in the report's order)."""

    UNCHANGED = "unchanged"
    BUMPED = "bumped"
    NEEDS_NEW_VERSION = "needs-new-version"
    FAILED = "failed"
    AWAITING_PARENTS = "awaiting-parents"
    AWAITING_UPSTREAM = "awaiting-upstream"
    NOT_SOLVABLE = "not-solvable"
    UNREADABLE = "unreadable"

    @property
    def is_failure(self) -> bool:
        """Makes the sweep report's ``ok`` false."""
        return self in (SweepStatus.FAILED, SweepStatus.NOT_SOLVABLE, SweepStatus.UNREADABLE)

    @property
    def is_blocking(self) -> bool:
        """Its dependents wait (``awaiting-upstream``: no test of the release could run, upstream lacks a
        build it needs); everything but ``unchanged`` and ``bumped``."""
        return self not in (SweepStatus.UNCHANGED, SweepStatus.BUMPED)


def artifact_name(artifact: str) -> str:
    """``"noarch/foo-bar-1.0-h0_0.conda"`` (or the file name alone) -> ``"foo-bar"``: the package name a
    conda file name carries before its version and build (what `conda-distro build` takes)."""
    return artifact.rsplit("/", 1)[-1].rsplit("-", 2)[0]

