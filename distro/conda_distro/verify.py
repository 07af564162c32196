"""`verify-channel`: install from main + upstream exactly as an end user would, per release × variant,
run each package's import test and a pytorch variant check, and compare the channel with channel_state/
(drift).

The variant check decides cpu vs cuda from the solved pytorch record, what the user gets
(:class:`~conda_distro.channels.pytorch_record.TorchBuild`: a ``__cuda`` dependency or a ``cuda…`` build string
makes a cuda build). Where pytorch is a Python package (its record depends on ``python``, or the
environment has ``site-packages/torch``) ``import torch`` must agree (``torch.version.cuda``); for any
other ``pytorch.name`` package (a ``libtorch``-like one) the record check is the whole check. Each check in
the result names its ``evidence``: ``record``, ``import-probe`` (torch's own view) or ``import`` (a
package's import test).

What a user runs: ``conda install -c <main> -c conda-forge --strict-channel-priority "pytorch ==R" pkg…``.
Here: a solve over [main, *upstream] with conda's semantics (:class:`~conda_distro.enduser.conda_solve.CondaSolver`:
a name main has is never taken from upstream; ``pip`` added to ``python`` records unless
``add_pip_as_python_dependency`` is off), the virtual packages of a machine with (cuda) or without (cpu) a
GPU, then ``rattler.install`` into a fresh prefix, from a package cache of this run's own (a file deleted
from main cannot be served from a warm cache).

Before solving, every file of main is checked against main's own index (``Channel.audit``: the sha256 of
the bytes, files the index names but lacks, package files it does not name) and the index against the
ledger (``channel_state/``); each mismatch is drift (exit 1) naming the file. An ``anaconda://`` main is
read through ``$ANACONDA_API_URL`` / ``anaconda.api_url`` (the server promote writes to): its files are
downloaded into a local mirror, checked, and installed from there.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conda_distro.channels import open_channel
from conda_distro.channels.base import FileProblem
from conda_distro.channels.depends import lockstep_of_files
from conda_distro.channels.pytorch_record import TorchBuild
from conda_distro.distribution import Distribution, load_distribution
from conda_distro.enduser.conda_solve import CondaSettings, CondaSolver, admitting
from conda_distro.engine.gpu import probe_gpu, variant_label
from conda_distro.engine.releases import select_releases, upstream_availability
from conda_distro.errors import ChannelError, UsageError
from conda_distro.recipe.model import Recipe
from conda_distro.state.ledger import Drift, Ledger, compare_with_channel
from conda_distro.util.fsutil import check_writable
from conda_distro.util.progress import NULL_SINK, ProgressSink, TaskFinish, TaskProgress, TaskStart, TaskStep
from conda_distro.util.scratch import new_scratch
from conda_distro.vocab import Target

SMOKE_TIMEOUT = 300
# Real torch and the sandbox stand-ins share this API: torch.version.cuda is None in cpu builds.
VARIANT_PROBE = "import torch, sys; c = torch.version.cuda; print('cuda' if c else 'cpu', c)"
# On a machine with a working GPU (nvidia-smi), the cuda variant must really reach it: CUDA is available
# and a tiny op runs on the device. The sandbox's stand-in torch runs no CUDA code: it says so, and the
# check does not count as GPU evidence (`ran: false` in its output).
CUDA_PROBE = """import torch
if getattr(torch, "__stand_in__", False):
    print("stand-in torch: no CUDA op to run (ran: false)")
    raise SystemExit(0)
assert torch.cuda.is_available(), "torch.cuda.is_available() is False on a machine with a GPU"
x = torch.arange(8, dtype=torch.float32, device="cuda")
y = float((x * 2).sum().item())
assert y == 56.0, y
print("cuda op ran on", torch.cuda.get_device_name(0), "(ran: true)")
"""


@dataclass(frozen=True)
class VerifyOptions:
    pytorch: tuple[str, ...] = ()
    keep: Path | None = None  # keep the environments under this folder (default: temporary)
    root: Path | None = None  # the distribution's folder (None: found from the current one); for verify()
    #: where verify reports its progress (task ``verify``: a step per release × variant); the CLI's sink
    progress: ProgressSink = NULL_SINK
    conda: CondaSettings = CondaSettings()  # the user's conda settings that change a solve


@dataclass(frozen=True)
class InstallCheck:
    """One check of an installed environment: what was checked of which package, how, and what it printed."""

    package: str
    check: str  # "variant" | "import torch" | "cuda op on the GPU" | "import MODULE"
    evidence: str  # record | import-probe | gpu-probe | import
    ok: bool
    output: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"package": self.package, "check": self.check, "evidence": self.evidence, "ok": self.ok,
                "output": self.output}


#: a difference between main and what it should hold: the channel against its own index, or the ledger
#: against the channel (both say artifact, kind, detail)
DriftItem = FileProblem | Drift


def _drift_dict(d: DriftItem) -> dict[str, str]:
    return {"artifact": d.artifact, "kind": d.kind, "detail": d.detail}


@dataclass
class TargetVerification:
    pytorch: str
    variant: str
    ok: bool
    installed: list[str] = field(default_factory=list)
    requested: list[str] = field(default_factory=list)
    checks: list[InstallCheck] = field(default_factory=list)
    error: str | None = None
    gpu: bool | None = None  # cuda: whether this machine had a working GPU (False: "cuda (no GPU)")
    #: why nothing was installed: upstream has no pytorch build of this release × variant (nobody can
    #: install one); packages left out because upstream lacks a lockstep build they need: name -> why
    skipped: str | None = None
    left_out: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"pytorch": self.pytorch, "variant": self.variant, "ok": self.ok, "installed": self.installed,
                "requested": self.requested, "checks": [c.to_dict() for c in self.checks], "error": self.error,
                **({"gpu": self.gpu} if self.gpu is not None else {}),
                **({"skipped": self.skipped} if self.skipped else {}),
                **({"left_out": self.left_out} if self.left_out else {})}


TAIL_LINES = 8  # of a failing check's output, in text mode (JSON has it all)


@dataclass
class VerifyResult:
    results: list[TargetVerification]
    drift: list[DriftItem]
    notices: list[str] = field(default_factory=list)  # stderr: the recipes left out (unreadable), and why
    unreadable: int = 0  # how many recipes could not be read (they make the exit code 1)
    conda: CondaSettings = CondaSettings()

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results) and not self.drift

    @property
    def exit_code(self) -> int:
        return 0 if self.ok and not self.unreadable else 1

    def to_dict(self) -> dict:
        return {"ok": self.ok, "conda": {"channel_priority": "strict",
                                         "add_pip_as_python_dependency": self.conda.add_pip_as_python_dependency},
                "results": [r.to_dict() for r in self.results], "drift": [_drift_dict(d) for d in self.drift]}

    def text_lines(self) -> list[str]:
        """Per release × variant: the verdict (or why it was skipped), the packages left out and why, and for
        each failing check its name and the last lines of its output (the traceback's end: the exception); then
        the drift, then the verdict."""
        lines = []
        for r in self.results:
            if r.skipped:
                lines.append(f"pytorch {r.pytorch} {variant_label(r.variant, r.gpu)}: skipped — {r.skipped}")
                continue
            lines.append(f"pytorch {r.pytorch} {variant_label(r.variant, r.gpu)}: {'ok' if r.ok else 'FAILED'} — "
                         f"{len(r.installed)} packages installed, {sum(c.ok for c in r.checks)}/{len(r.checks)} "
                         "checks passed")
            for name, why in sorted(r.left_out.items()):
                lines.append(f"    {name}: not installed — {why}")
            failing = [c for c in r.checks if not c.ok]
            if r.error and not failing:
                lines.append(f"    {r.error}")
            for c in failing:
                lines.append(f"    {c.package}: {c.check} failed")
                output = [ln for ln in c.output.splitlines() if ln.strip()]
                shown = output[-TAIL_LINES:]
                if len(output) > len(shown):
                    lines.append(f"      [... {len(output) - len(shown)} earlier line(s); all of it in --format json]")
                lines += [f"      | {ln}" for ln in shown]
        lines += [f"drift: {d.kind}: {d.artifact} ({d.detail})" for d in self.drift]
        lines.append("ok" if self.ok else "FAILED")
        return lines


def _import_names(recipe: Recipe | None) -> list[str]:
    if recipe is None:
        return []
    out: list[str] = []
    for t in recipe.tests:
        py = t.get("python") if isinstance(t, dict) else None
        if isinstance(py, dict):
            imports = py.get("imports") or []
            out += [str(i) for i in (imports if isinstance(imports, list) else [imports])]
    return out


def _python(prefix: Path, code: str) -> tuple[bool, str]:
    exe = prefix / "bin" / "python"
    if not exe.exists():
        return False, "no python in the environment"
    env = {"PATH": f"{prefix / 'bin'}:/usr/bin:/bin", "HOME": str(prefix), "LANG": "C.UTF-8", "PYTHONNOUSERSITE": "1"}
    try:
        proc = subprocess.run([str(exe), "-c", code], capture_output=True, text=True, env=env, timeout=SMOKE_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {SMOKE_TIMEOUT} s"
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()[-2000:]


def cuda_probe(prefix: Path, package: str = "pytorch") -> InstallCheck:
    """The GPU check of a cuda environment (run only where nvidia-smi works): ``torch.cuda.is_available()``
    and a tiny op on the device."""
    ok, output = _python(prefix, CUDA_PROBE)
    return InstallCheck(package, "cuda op on the GPU", "gpu-probe", ok, output)


def _verify_target(solver: CondaSolver, dist: Distribution, target: Target, names: list[str], workdir: Path,
                   cache: Path, gpu: bool = False) -> TargetVerification:
    from rattler import install
    from rattler.exceptions import SolverError

    pytorch = dist.config.pytorch.name
    cuda = target.variant.cuda
    specs = [f"{pytorch} =={target.release}", *names]
    res = TargetVerification(target.release, target.variant, False, requested=specs, gpu=gpu if cuda else None)
    try:
        records = solver.solve(specs, cuda)
    except SolverError as exc:
        res.error = f"cannot be installed together: {exc}"
        return res
    res.installed = sorted(f"{r.name.normalized} {r.version} {r.build}" for r in records)
    torch = next((r for r in records if r.name.normalized == pytorch), None)
    if torch is None:
        res.error = f"the {target.variant} variant installed no {pytorch}"
        return res
    kind = TorchBuild.of(str(torch.build), list(torch.depends))
    res.checks.append(InstallCheck(pytorch, "variant", "record", kind.variant == target.variant,
                            f"{pytorch} {torch.version} {torch.build}: {kind.evidence}"))
    if kind.variant != target.variant:
        res.error = f"the {target.variant} variant installed {pytorch} build {torch.build}, a {kind.evidence} build"
        return res
    prefix = workdir / f"env-{target.release}-{target.variant}"
    try:
        asyncio.run(install(records, target_prefix=str(prefix), cache_dir=cache, show_progress=False))
    except Exception as exc:  # rattler raises several install errors
        res.error = f"install failed: {exc}"
        return res
    if kind.python or any(prefix.glob("lib/python*/site-packages/torch")):
        ok, output = _python(prefix, VARIANT_PROBE)
        seen = output.split()[0] if ok and output else "?"
        res.checks.append(InstallCheck(pytorch, "import torch", "import-probe", ok and seen == target.variant, output))
        if cuda and gpu:
            res.checks.append(cuda_probe(prefix, pytorch))
    by_pkg = {r.name: r for r in dist.recipes.values()}
    for name in names:
        for module in _import_names(by_pkg.get(name)):
            ok, output = _python(prefix, f"import {module}")
            res.checks.append(InstallCheck(name, f"import {module}", "import", ok, output))
    failed = [c for c in res.checks if not c.ok]
    res.ok = not failed
    if failed:
        res.error = "; ".join(f"{c.package}: {c.check} failed" for c in failed)
    return res


def _check_keep(keep: Path | None) -> None:
    if keep is None:
        return
    if keep.exists() and not keep.is_dir():
        raise UsageError(f"--keep {keep} exists and is not a folder", field="--keep",
                         hint="pass a folder (it is created if missing) to keep the test environments in")
    check_writable(keep, folder=True, error=UsageError, field="--keep",
                   hint="pass a folder (it is created if missing) to keep the test environments in")
    if ":" in str(keep.absolute()):
        raise UsageError(f"--keep {keep}: the path contains ':', which environments cannot live under",
                         field="--keep", hint="choose a folder whose absolute path has no ':' in it")


def verify(options: VerifyOptions) -> VerifyResult:
    """`conda-distro verify-channel`: the distribution at ``options.root``; its unreadable recipes are
    reported as notices (an unreadable recipe only loses its import probe)."""
    dist = load_distribution(options.root, strict=False)
    report = verify_channel(dist, options)
    report.notices, report.unreadable = dist.notices(), len(dist.errors)
    return report


def verify_channel(dist: Distribution, options: VerifyOptions = VerifyOptions()) -> VerifyResult:
    dist = dist.readable()  # what main holds is verified; an unreadable recipe only loses its import probe
    _check_keep(options.keep)
    releases = select_releases(dist, options.pytorch)
    main = open_channel(dist.distro, dist.config.channels.main)
    listed = main.list_files()
    files = list(listed.values())
    if not files:
        raise ChannelError(f"the main channel {main.describe()} holds no packages", field="channels.main",
                           hint="promote something first: conda-distro build --all && conda-distro promote")
    ledger_drift = compare_with_channel(Ledger(dist.distro.state_dir).load_all(), listed)
    pytorch = dist.config.pytorch.name
    results = []
    scratch = new_scratch("conda-distro-verify-")
    try:
        audit = main.audit(scratch / "channel")
        drift: list[DriftItem] = sorted([*audit.problems, *ledger_drift], key=lambda d: (d.artifact, d.kind))
        solver = CondaSolver([audit.url, *dist.distro.upstream_urls], dist.distro.subdirs, options.conda)
        workdir = options.keep or scratch / "envs"
        workdir.mkdir(parents=True, exist_ok=True)
        cache = scratch / "pkgs"  # this run's own package cache
        gpu = "cuda" in dist.config.pytorch.variants and probe_gpu().available
        available = upstream_availability(dist.distro)
        lockstep_of = lockstep_of_files(files, dist.config.pytorch.lockstep)
        needs: dict[str, frozenset[str]] = {}
        for f in files:
            needs[f.name] = needs.get(f.name, frozenset()) | lockstep_of(f)
        targets = [Target(r, v) for r in releases for v in dist.config.pytorch.variants]
        sink = options.progress
        sink.on_start(TaskStart("verify", len(targets), f"verifying {len(targets)} release × variant(s)"))
        for i, target in enumerate(targets, 1):
            sink.on_step(TaskStep("verify", str(target), f"verifying pytorch {target.release} {target.variant}"))
            if target in available.missing:
                results.append(TargetVerification(target.release, target.variant, True, skipped=available.missing[target]))
            else:
                names = admitting(files, pytorch, target.release)
                left_out = {n: why for n in names if (why := available.why_not(target, needs.get(n, ())))}
                res = _verify_target(solver, dist, target, [n for n in names if n not in left_out], workdir, cache, gpu)
                res.left_out = left_out
                results.append(res)
            sink.on_progress(TaskProgress("verify", i, len(targets), step=str(target)))
        sink.on_finish(TaskFinish("verify", "verified"))
        solver.close()
    finally:
        _remove_tree(scratch)
    return VerifyResult(results, drift, conda=options.conda)


def _remove_tree(path: Path, attempts: int = 10) -> None:
    """Remove ``path``. After a failed install rattler may still be finishing an extraction into the
    package cache for a moment, so a folder can refill while it is removed: retry briefly, then give up
    quietly (it is a temporary folder)."""
    for i in range(attempts):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            return
        time.sleep(0.1 * (i + 1))


__all__ = ["VerifyOptions", "VerifyResult", "verify_channel"]
