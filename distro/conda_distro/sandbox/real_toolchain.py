"""The real world's compilers: what its compiled recipes are built with, and the variant rows that name them.

PyPI has no compiler, so the real world takes conda-forge's *shape* and the machine's compilers, as the
stand-in world does (:class:`~conda_distro.sandbox.upstream.Toolchain`): a second local upstream channel,
``DIR/toolchain/``, holds ``gcc_linux-64`` and ``gxx_linux-64`` (activation scripts setting ``CC``/``CXX``
and conda-forge's flags, wrappers calling the machine's gcc/g++ under ``/usr``), ``sysroot_linux-64`` (strong
run_export ``__glibc >=`` the machine's glibc) and, where the machine has nvcc under ``/usr``,
``cuda-nvcc_linux-64`` (its nvcc, e.g. 13.0 from ``/usr/local/cuda``). They are built from the same recipe
as the stand-in world's (a few seconds) each time a real world is made; nothing is downloaded.

The world's ``variants.yaml`` is the repository's with the rows the world can build: the compiler and
stdlib versions are the machine's (conda-forge's gcc 14/15 and CUDA 12.9 are not on PyPI), the CUDA row's
``cuda_compiler_version`` is the machine's nvcc (no CUDA row without one), and ``python`` is the host
python the bridge converts wheels for (its wheels are ``cp311`` only, so other pythons could not solve).
Every other key, the zips and the comments stay as the repository has them.
"""

from __future__ import annotations

import io
from pathlib import Path

from conda_distro.errors import BridgeError
from conda_distro.sandbox.upstream import HostPython, Toolchain, build_compiler_packages, publish_packages, reindex
from conda_distro.util.scratch import ScratchDir

TOOLCHAIN_CHANNEL = "toolchain"
#: zip_keys groups of conda-forge's pinning that this module rewrites, with each key's new value per row
_COMPILER_KEYS = ("c_compiler_version", "cxx_compiler_version", "fortran_compiler_version")
_PYTHON_KEYS = ("python", "is_python_min", "is_freethreading", "is_abi3")


def build_toolchain_channel(channel: Path, toolchain: Toolchain) -> list[Path]:
    """Build the compiler packages for ``toolchain`` into the new local channel ``channel`` (indexed)."""
    channel.mkdir(parents=True, exist_ok=True)
    with ScratchDir("conda-distro-toolchain-") as td:
        published = publish_packages(build_compiler_packages(Path(td), toolchain), channel)
    reindex(channel)
    return published


def real_variants(text: str, toolchain: Toolchain, host: HostPython, where: Path) -> str:
    """The repository's variants.yaml text (``where`` names it in errors) with the real world's compiler,
    CUDA and python rows (module docstring)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.error import YAMLError

    yaml = YAML()
    yaml.preserve_quotes = True
    try:
        doc = yaml.load(text)
    except YAMLError as exc:
        raise BridgeError(f"variants.yaml cannot be read: {exc}", path=where, hint="fix the repository's variants.yaml") from None
    if not isinstance(doc, CommentedMap):
        raise BridgeError("variants.yaml is not a mapping", path=where, hint="fix the repository's variants.yaml")
    from ruamel.yaml.comments import CommentedSeq
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    def put(key: str, values: list) -> None:
        if key in doc:
            seq = CommentedSeq([DoubleQuotedScalarString(v) if isinstance(v, str) else v for v in values])
            seq.fa.set_flow_style()
            doc[key] = seq
            doc.ca.items.pop(key, None)  # the repository's comment on the value no longer applies

    rows = ["None", toolchain.nvcc_version] if toolchain.nvcc else ["None"]
    for key in _COMPILER_KEYS:
        put(key, [toolchain.gcc_version] * len(rows))
    put("c_stdlib_version", [toolchain.glibc_version] * len(rows))
    put("cuda_compiler_version", rows)
    if toolchain.nvcc:
        put("cuda_compiler_version_min", [toolchain.nvcc_version])
    if "python" in doc:
        put("python", [f"{host.short}.*"])  # the repackaged host python has no *_cpython build string
        for key in _PYTHON_KEYS[1:]:
            put(key, [False])
    out = io.StringIO()
    yaml.dump(doc, out)
    note = ("# sandbox --real: compilers, CUDA row and python set to what this world can build with (the machine's "
            f"gcc {toolchain.gcc_version}, glibc {toolchain.glibc_version}, "
            + (f"nvcc {toolchain.nvcc_version}" if toolchain.nvcc else "no nvcc: no CUDA row")
            + f", python {host.short}); see docs/real-world.md\n")
    return note + out.getvalue()


__all__ = ["TOOLCHAIN_CHANNEL", "build_toolchain_channel", "real_variants"]
