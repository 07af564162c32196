"""Retirement: take a package out of the main channel and record why (spec §2 `retire`).

Local main: the files move to ``<main>/../retired/<subdir>/`` after a repodata without them is in
place, then the channel is re-indexed. anaconda.org: each file gets the ``broken`` label and loses the
main label. The ledger records the retirement (when, why, who) *before* the channel is touched, so a
crash leaves an intent that a rerun of the same command completes; a failure that the command sees
restores the ledger. Retired artifacts are never promoted again (promote holds them as ``retired``).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conda_distro.channels import Channel, ChannelFile, Progress, crash_point, no_progress, open_channel
from conda_distro.distribution import open_distro
from conda_distro.errors import DistroError, ExitCode, UsageError
from conda_distro.ledger import Ledger, PackageState, Retirement, current_user, utcnow
from conda_distro.promote import DEFAULT_LOCK_TIMEOUT, ledger_entry, parse_dep


@dataclass(frozen=True)
class RetireOptions:
    name: str
    reason: str
    root: Path | None = None
    by: str | None = None
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    progress: Progress = no_progress


@dataclass
class RetireResult:
    name: str
    reason: str
    by: str
    retired: list[ChannelFile] = field(default_factory=list)
    moved_to: list[str] = field(default_factory=list)
    already_retired: list[str] = field(default_factory=list)
    dependents: list[str] = field(default_factory=list)  # files left in main that depend on the package
    ledger: str | None = None

    exit_code = ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "retired": [{"artifact": f.artifact, "sha256": f.sha256} for f in self.retired],
            "name": self.name, "reason": self.reason, "by": self.by,
            "moved_to": list(self.moved_to), "already_retired": list(self.already_retired),
            "dependents": list(self.dependents), "ledger": self.ledger,
        }

    def text_lines(self) -> list[str]:
        lines = [f"retired {f.artifact}" for f in self.retired]
        lines += [f"  -> {m}" for m in self.moved_to]
        if not self.retired and self.already_retired:
            lines.append(f"{self.name} was already retired ({len(self.already_retired)} file(s)); nothing to do")
        lines += [f"warning: {d} is still in main and depends on {self.name}" for d in self.dependents]
        if self.ledger:
            lines.append(f"recorded {self.ledger}")
        return lines


def _check_options(options: RetireOptions) -> None:
    if not options.reason.strip():
        raise UsageError("the reason must not be empty", field="--reason",
                         hint="say why, e.g. --reason 'unmaintained: fails against pytorch 2.6'")
    if not options.name.strip():
        raise UsageError("the package name must not be empty", field="NAME")


def _unknown_package(name: str, main: Channel, in_main: dict[str, ChannelFile]) -> UsageError:
    names = sorted({f.name for f in in_main.values()})
    close = difflib.get_close_matches(name, names, n=1)
    return UsageError(f"no package named '{name}' in the main channel {main.describe()}", field="NAME",
                      hint=f"did you mean '{close[0]}'?" if close else "see channel_state/ for what is in main")


def _dependents(name: str, remaining: dict[str, ChannelFile]) -> list[str]:
    return sorted(f.artifact for f in remaining.values()
                  if f.name != name and any((d := parse_dep(t)) and d.name == name for t in f.depends))


def _restore(ledger: Ledger, name: str, before: PackageState | None) -> None:
    if before is None:
        ledger.path_for(name).unlink(missing_ok=True)
    else:
        ledger.save(before)


def retire(options: RetireOptions) -> RetireResult:
    _check_options(options)
    distro = open_distro(options.root)
    main, ledger = open_channel(distro, distro.config.channels.main), Ledger(distro.state_dir)
    name = options.name.strip()
    with main.lock(options.lock_timeout):
        main.recover(main, set(), options.progress)
        in_main = main.list_files()
        files = sorted((f for f in in_main.values() if f.name == name), key=lambda f: f.artifact)
        before = ledger.load(name)
        result = RetireResult(name, options.reason.strip(), options.by or current_user(distro.root))
        result.already_retired = sorted(a.artifact for a in (before.artifacts if before else ()) if a.retired)
        if not files:
            if result.already_retired:
                return result
            raise _unknown_package(name, main, in_main)
        known = {a.artifact: a for a in (before.artifacts if before else ())}
        entries = [known.get(f.artifact) or ledger_entry(f, None, channel=main.ref, promoted_at=None, commit=None)
                   for f in files]
        written = ledger.retire(name, entries, Retirement(at=utcnow(), reason=result.reason, by=result.by))
        crash_point("retire-after-ledger")
        try:
            result.moved_to = main.withdraw(files, options.progress)
        except DistroError:
            _restore(ledger, name, before)
            raise
    result.retired = files
    result.dependents = _dependents(name, {a: f for a, f in in_main.items() if f.name != name})
    result.ledger = written.relative_to(distro.root).as_posix() if written else None
    return result
