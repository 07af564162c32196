"""`conda-distro watch`: main's packages re-tested against today's upstream, the update that broke one named.

Upstream (conda-forge, which end users install next to our channel) changes every day; main does not need
to change to break. For each package of main (the newest version of each name) and each release × variant
its pins admit:

1. **Solve** its test environments as rattler-build will (:func:`conda_distro.engine.needs.test_needs`:
   rattler, strict priority, the release view first, then main, then upstream). The environment is the
   set of files it installs (``name-version-build``).
2. **Reuse** the last outcome when the environment is the one it was tested in (``build/watch/state.json``),
   or, where the watch has none yet, the outcome `build` recorded for the same file on that release ×
   variant when its test environment (``environment`` in ``build/results/``) is today's: the first watch
   after a promote re-tests only what upstream changed since the build. Otherwise **test** the main file
   in a sandbox (the build's own test phase, limits and confirmation runs
   included, logs under ``build/logs/watch/``).
3. **Bisect** a package that passed before and fails now: the names whose file changed are split in
   halves; the test runs with one half at today's files and the other **pinned back** to the files it
   passed with (a pin channel holding those files, placed before upstream: with strict priority a name
   there comes only from there); a failing half is split again, until one update is left: the
   **culprit**. Where both halves pass (the updates break only together) all of them are named. Pinning
   back needs the old files: they are taken from a local upstream channel, or downloaded from a remote one
   (found in its repodata, fetched into the mirror store and checked against the channel's sha256, as the
   sandboxes' mirrors are: :mod:`conda_distro.engine.mirror`). A file no upstream channel serves any more
   cannot be pinned back: that name stays at today's file.

A failing package that never passed here is reported as failing, without a culprit. A target with no
verdict (an infrastructure error of its test, or a file of main whose bytes are not the ones main's
repodata names) is reported under ``errors``; nothing of it is kept, and the next watch tries it again.
Main may be a local folder or a remote channel (``anaconda://OWNER``): :mod:`.watch_main`. Results:
`watch`'s text, JSON and markdown (``broken: [{name, artifact, pytorch, variant, culprit, changed, log,
maintainers}]``, ``errors: [{name, artifact, pytorch, variant, reason}]``), ``build/watch/report.json``
(which the status page can read) and exit 1 when something broke or a target had no verdict.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from conda_distro.errors import DistroError, ExitCode, UsageError
from conda_distro.util.fsutil import atomic_write_text, link_or_copy
from conda_distro.util.jsonio import read_json
from conda_distro.util.safetext import shown

STATE = Path("watch") / "state.json"
STATE_SCHEMA = 2  # build/watch/state.json: {"schema": 2, "entries": {"<artifact>|<pytorch>|<variant>": entry}}
#: the state schemas read: 1 has no ``envs`` (each test's environment); its entries are reused only for a
#: package with one test environment
READ_SCHEMAS = (1, 2)
REPORT = Path("watch") / "report.json"


@dataclass(frozen=True)
class WatchOptions:
    root: Path | None = None
    names: tuple[str, ...] = ()  # only these packages (default: all of main)
    sandbox: bool = True


@dataclass
class Broken:
    name: str
    artifact: str
    pytorch: str
    variant: str
    culprit: list[str]  # the upstream update(s) that broke it: "name old -> new" (empty: unknown)
    changed: dict[str, tuple[str | None, str | None]]  # every name whose file changed: (then, now)
    log: str | None = None
    reason: str | None = None
    maintainers: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "artifact": self.artifact, "pytorch": self.pytorch, "variant": self.variant,
                "culprit": list(self.culprit), "changed": {k: list(v) for k, v in self.changed.items()},
                "log": self.log, "reason": self.reason, "maintainers": list(self.maintainers)}


@dataclass
class WatchResult:
    checked: int = 0
    reused: int = 0
    tested: int = 0
    broken: list[Broken] = field(default_factory=list)
    failing: list[dict[str, str]] = field(default_factory=list)  # failing, never seen passing here
    flaky: list[dict[str, str]] = field(default_factory=list)  # passed and failed on today's environment
    errors: list[dict[str, str]] = field(default_factory=list)  # no verdict (infrastructure): tried again next time

    @property
    def ok(self) -> bool:
        """Nothing broke, and every target got a verdict (an error proves nothing: fail closed)."""
        return not self.broken and not self.errors

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.ok else ExitCode.FAILURES

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checked": self.checked, "reused": self.reused, "tested": self.tested,
                "broken": [b.to_dict() for b in self.broken], "failing": list(self.failing), "flaky": list(self.flaky),
                "errors": list(self.errors)}

    def text_lines(self) -> list[str]:
        lines = [f"{self.checked} checked ({self.reused} reused: environment unchanged, {self.tested} tested)"]
        for b in self.broken:
            who = " ".join(f"@{m}" for m in b.maintainers)
            lines.append(f"  broken  {b.name} on pytorch {b.pytorch} {b.variant}: "
                         + (f"broken by {', '.join(b.culprit)}" if b.culprit else "cause not found")
                         + (f"  ({who})" if who else ""))
        lines += [f"  failing {f['name']} on pytorch {f['pytorch']} {f['variant']} (never seen passing here)"
                  for f in self.failing]
        lines += [f"  flaky   {f['name']} on pytorch {f['pytorch']} {f['variant']}" for f in self.flaky]
        lines += [f"  error   {e['name']} on pytorch {e['pytorch']} {e['variant']}: {shown(e['reason'], 'text')}"
                  for e in self.errors]
        return lines

    def markdown(self) -> str:
        out = ["## Main against today's upstream", "",
               f"{self.checked} checked, {self.reused} reused, {self.tested} tested.", ""]
        if self.broken:
            out += ["| package | pytorch | variant | broken by | maintainers |", "|---|---|---|---|---|"]
            out += [f"| `{b.name}` | {b.pytorch} | {b.variant} | {', '.join(b.culprit) or '?'} | "
                    f"{' '.join('@' + m for m in b.maintainers)} |" for b in self.broken]
        else:
            out.append("Nothing broke.")
        if self.errors:
            out += ["", "No verdict (an error of the infrastructure; tried again next time):", ""]
            out += [f"- `{e['name']}` on {e['pytorch']} {e['variant']}: {shown(e['reason'], 'line')}" for e in self.errors]
        return "\n".join(out) + "\n"


def read_report(build_dir: Path) -> dict[str, Any] | None:
    """The last watch's report (``build/watch/report.json``) for the status page; None when there is none.
    An unreadable one is bad input (exit 2, naming the file)."""
    from conda_distro.util.jsonio import read_json

    try:
        data = read_json(build_dir / REPORT, "excuses", error=UsageError,
                         hint="run `conda-distro watch` again (it writes the file) or delete it")
    except FileNotFoundError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("broken"), list):
        raise UsageError("not a watch report: an object with a `broken` list", path=build_dir / REPORT,
                         hint="run `conda-distro watch` again (it writes the file) or delete it")
    return data


def _idents(records: Sequence[Any]) -> dict[str, str]:
    return {r.file_name.rsplit("-", 2)[0]: r.file_name.removesuffix(".conda").removesuffix(".tar.bz2")
            for r in records}


def _changed(old: Mapping[str, str], new: Mapping[str, str], own: set[str]) -> dict[str, tuple[str | None, str | None]]:
    return {n: (old.get(n), new.get(n)) for n in sorted(set(old) | set(new))
            if old.get(n) != new.get(n) and n not in own}


def _changes(then: Mapping[str, str], then_envs: Sequence[Mapping[str, str]] | None, today: Solved,
             own: str) -> dict[str, tuple[str | None, str | None]]:
    """The names whose file changed since the environments it passed in: in the table of all of them, or
    in any one test's environment (a name a later test installs at another version than the first)."""
    changed = _changed(then, today.env, {own})
    if then_envs is not None and len(then_envs) == len(today.envs):
        for a, b in zip(then_envs, today.envs, strict=True):
            for n, c in _changed(a, b, {own}).items():
                changed.setdefault(n, c)
    return dict(sorted(changed.items()))


def _files_by_name(then: Mapping[str, str], then_envs: Sequence[Mapping[str, str]] | None) -> dict[str, list[str]]:
    """Every file each name had in the environments it passed in (what a name is pinned back to)."""
    out: dict[str, list[str]] = {n: [i] for n, i in then.items()}
    for e in then_envs or ():
        for n, i in e.items():
            if i not in out.setdefault(n, []):
                out[n].append(i)
    return out


class _Entry(BaseModel):
    """One watch state entry as the tool writes it; anything else in the file is not trusted."""

    model_config = ConfigDict(extra="forbid", strict=True)
    env: dict[str, str]
    status: Literal["passed", "failed"]
    log: str | None = None
    reason: str | None = None
    passed_in: dict[str, str] | None = None
    envs: list[dict[str, str]] | None = None  # each test environment, in the order of the package's tests
    passed_envs: list[dict[str, str]] | None = None  # each test environment it last passed in
    changed: dict[str, Annotated[list[str | None], Field(min_length=2, max_length=2)]] | None = None  # name: [then, now] (None: absent)
    culprit: list[str] | None = None
    from_build: bool | None = None


def read_state(build_dir: Path) -> dict[str, dict[str, Any]]:
    """The watch's state (``build/watch/state.json``), for reuse. A state the watch cannot read is a miss,
    never a crash and never a pass: a missing, unreadable or corrupt file, or one of another schema
    (including the unversioned layout of earlier watches), reads as empty; an entry not in the form the
    tool writes is left out. A miss only costs a test: the entry is taken from the build again or tested."""
    try:  # bounded like every state document: regular file (a FIFO in its place cannot hang), size, depth
        doc = read_json(build_dir / STATE, "results")
    except (OSError, DistroError):
        return {}
    if not isinstance(doc, dict) or doc.get("schema") not in READ_SCHEMAS or not isinstance(doc.get("entries"), dict):
        return {}
    state: dict[str, dict[str, Any]] = {}
    for key, raw in doc["entries"].items():
        try:
            entry = _Entry.model_validate(raw)
        except ValidationError:
            continue
        state[key] = entry.model_dump(exclude_none=True)
    return state


def _write_state(build_dir: Path, state: Mapping[str, Any]) -> None:
    atomic_write_text(build_dir / STATE, json.dumps({"schema": STATE_SCHEMA, "entries": state}, indent=2, sort_keys=True)
                      + "\n")


@dataclass(frozen=True)
class Solved:
    """Today's test environments of one file on one target: ``env`` every file they install by name (one
    table for all of them: what the changes are listed and bisected from), ``envs`` each test
    environment on its own, in the order of the package's tests (what reuse compares)."""

    env: dict[str, str]
    envs: list[dict[str, str]]

    def same_as(self, entry: Mapping[str, Any]) -> bool:
        """Whether ``entry`` (a state entry) was tested in these environments: every test's the same. An
        entry of the first schema (no ``envs``) only for a package with one test environment."""
        if entry.get("env") != self.env:
            return False
        return entry["envs"] == self.envs if "envs" in entry else len(self.envs) <= 1

    def entry(self, **fields: Any) -> dict[str, Any]:
        return {"env": dict(self.env), "envs": [dict(e) for e in self.envs], **fields}


def _built_outcome(builds: Any, f: Any, pytorch: str, variant: str, today: Solved) -> dict[str, Any] | None:
    """The outcome `build` recorded for main's file ``f`` (same bytes: same sha256) on this release ×
    variant, when every test environment rattler-build installed then is today's (the file itself left
    out; ``environments`` of the results; a result older than that field has only its first test's
    ``environment``, taken for a package with one test environment only): a watch entry (``passed_in``
    for a pass), so the first watch after a promote tests nothing the build already tested in the same
    environments. None: no such outcome (not recorded, other environments, an error, a baseline run, a
    result file that cannot be read)."""
    from conda_distro.errors import DistroError

    try:
        res = builds.get(f.artifact)
    except (DistroError, OSError):
        return None
    if res is None or res.sha256 != f.sha256:
        return None
    theirs = [{n: i for n, i in e.items() if n != f.name} for e in today.envs]

    def same(t: Any) -> bool:
        if t.environments is not None:
            return bool(t.environments == theirs)
        return len(theirs) == 1 and t.environment == theirs[0]

    rec = next((t for t in reversed(res.runs(pytorch, variant)) if not t.baseline
                and t.status in ("passed", "failed") and same(t)), None)
    if rec is None:
        return None
    entry = today.entry(status=rec.status, log=rec.log, reason=rec.reason, from_build=True)
    if rec.status == "passed":
        entry["passed_in"], entry["passed_envs"] = dict(today.env), [dict(e) for e in today.envs]
    return entry


def _watched(matrix: Any, f: Any) -> list[Any]:
    """The release × variant targets ``f`` is watched on: those promote requires of it; for a file with no
    pytorch dependency (einops), every target upstream can serve, as `build` tests it on every target (only
    the cuda ones for a file needing ``__cuda``)."""
    from conda_distro.vocab import Target, Variant

    pairs = matrix.required(f)
    if pairs is not None:
        return list(pairs)
    cuda_only = any(d.split()[0] == "__cuda" for d in f.depends)
    every = [Target(r, Variant(v)) for r in matrix.releases for v in matrix.variants if Variant(v).cuda or not cuda_only]
    if matrix.available is None:
        return every
    needs = matrix.lockstep_of(f)
    return [t for t in every if matrix.available.why_not(t, needs) is None]


def bisect(changed: Sequence[str], fails_with: Callable[[frozenset[str]], bool]) -> list[str]:
    """The updates that break: ``fails_with(S)`` runs the test with the names in S at today's files and the
    other changed names pinned back. Halves until one is left; both halves passing: all of ``changed``."""
    names = list(changed)
    while len(names) > 1:
        half = len(names) // 2
        a, b = names[:half], names[half:]
        if fails_with(frozenset(a)):
            names = a
        elif fails_with(frozenset(b)):
            names = b
        else:
            return names  # they break only together
    return names


def watch(options: WatchOptions) -> WatchResult:
    """Re-test main against today's upstream (module docstring)."""
    from rattler import Gateway

    from conda_distro.channels.depends import lockstep_of_files
    from conda_distro.distribution import load_distribution
    from conda_distro.engine.backends import VariantSpec
    from conda_distro.engine.confirm import confirm_failure, needs_confirmation
    from conda_distro.engine.mirror import Mirroring
    from conda_distro.engine.needs import test_needs
    from conda_distro.engine.phases import PhaseContext, TargetIn, claim_folder, clear_stale_folders
    from conda_distro.engine.releases import availability_if_readable, build_release_views
    from conda_distro.engine.run import Paths, isolation
    from conda_distro.engine.sources import RecipeInputs
    from conda_distro.gate.promote import TestMatrix
    from conda_distro.gate.revdeps import newest_in_main
    from conda_distro.recipe.render import RenderSettings
    from conda_distro.reports.watch_main import MainFileError, open_main
    from conda_distro.state.results import ResultsStore
    from conda_distro.vocab import Target, Variant

    dist = load_distribution(options.root, strict=False)
    build_dir = dist.distro.build_dir
    main = open_main(dist)  # a local folder, or a remote channel read through the mirror store
    in_main = main.files
    files = [f for f in newest_in_main(in_main) if not options.names or f.name in options.names]
    available = availability_if_readable(dist.distro)
    views = build_release_views(dist.distro, build_dir / "watch" / "views", available)
    # the targets promote requires: a target with no build of a lockstep package (torchvision) the file
    # needs, itself or through main's other packages, cannot be installed by anyone, so it is not watched
    matrix = TestMatrix.from_config(dist.config, available,
                                    lockstep_of_files(in_main.values(), dist.config.pytorch.lockstep))
    iso = isolation(dist, Paths(build_dir / "watch", build_dir / "watch", build_dir / "logs" / "watch",
                                build_dir / "watch" / "views"), options.sandbox)
    if main.remote is not None and iso.bwrap is not None:  # the sandboxes read main through a mirror view too
        remotes = (*(iso.mirror.remotes if iso.mirror else ()), main.remote)
        iso = replace(iso, mirror=Mirroring(iso.mirror.store if iso.mirror else main.store, remotes))
    upstream = list(dist.distro.upstream_urls)
    local_upstream = [Path(u[len("file://"):]) for u in upstream if u.startswith("file://")]
    older = _OlderFiles(local_upstream, remote_files(dist.distro))
    state = read_state(build_dir)
    builds = ResultsStore(build_dir / "results")
    maintainers = {out: list(r.maintainers) for r in dist.recipes.values() for out in (r.name, *r.output_names)}
    result = WatchResult()
    confirm_runs = dist.config.policy.confirm_runs
    clear_stale_folders(build_dir / "work")  # left by a watch or a build killed with -9 (in-use ones are locked)
    work, lock = claim_folder(build_dir / "work", "watch-")
    if main.remote is not None:
        main.folder = work / "main"  # the files re-tested, linked from the mirror store (go with the folder)
    counter = iter(range(1, 1_000_000))
    gateway = Gateway()  # one for every solve of this watch: each channel's repodata is read once
    try:
        for f in files:
            for r, v in _watched(matrix, f):
                view = views.get(Target(r, v))
                if view is None or view.url is None:
                    continue
                result.checked += 1
                try:
                    path = main.path_of(f)  # a remote one: fetched, its bytes checked against main's repodata
                except MainFileError as exc:  # no verdict: nothing kept, the next watch tries again
                    result.errors.append({"name": f.name, "pytorch": r, "variant": v, "artifact": f.artifact,
                                          "reason": str(exc)})
                    continue
                channels = [view.url, main.url, *upstream]
                needs = test_needs(path, channels, cuda=Variant(v).cuda, gateway=gateway)
                today = Solved(_idents(needs.records), needs.envs)
                env = today.env
                key = f"{f.artifact}|{r}|{v}"
                old = state.get(key)
                built = _built_outcome(builds, f, r, v, today) if old is None else None
                if old is not None and today.same_as(old) and old.get("status") in ("passed", "failed"):
                    result.reused += 1
                    entry = old
                elif built is not None:  # the build's own test of this file, in today's environment
                    result.reused += 1
                    entry = state[key] = built
                else:
                    job = _Job(PhaseContext(name=f.name, recipe=path, root=dist.root, inputs=RecipeInputs(),
                                            variant_config=RenderSettings(), engine="rattler-build",
                                            channels=(main.url, *upstream), staging=main.folder,
                                            logs=build_dir / "logs" / "watch" / f.name, declared=frozenset({f.name}),
                                            limits=dist.config.limits, isolation=iso, work=work),
                               VariantSpec(f.name, f.version, f.build, f.build_number, f.artifact.split("/")[0]),
                               path,
                               TargetIn(pytorch=r, variant=v, url=view.url, sha256=view.sha256, cuda=view.cuda_override),
                               counter)
                    got = job.run()
                    result.tested += 1
                    if got.error:  # no verdict: nothing kept, the next watch runs it again
                        result.errors.append({"name": f.name, "pytorch": r, "variant": v, "artifact": f.artifact,
                                              "reason": got.message or "error"})
                        continue
                    status = "passed" if got.ok else "failed"
                    if needs_confirmation(got):  # a failure is confirmed before it counts (policy.confirm_runs)
                        status = confirm_failure(got, job.again, confirm_runs).status
                    if status == "flaky":
                        result.flaky.append({"name": f.name, "pytorch": r, "variant": v, "artifact": f.artifact})
                        continue
                    entry = today.entry(status=status, log=got.log, reason=got.message)
                    passed_in = env if got.ok else (old or {}).get("passed_in")
                    passed_envs = today.envs if got.ok else (old or {}).get("passed_envs")
                    if passed_in:
                        entry["passed_in"] = passed_in  # the environment it last passed in (what bisection pins back to)
                    if passed_envs:
                        entry["passed_envs"] = passed_envs
                    if not got.ok and passed_in:
                        changed = _changes(passed_in, passed_envs, today, f.name)
                        pins = _Pins(job, _files_by_name(passed_in, passed_envs), changed, older, work)
                        culprit = bisect(sorted(changed), pins.fails_with) if changed else []
                        entry["changed"] = {n: list(c) for n, c in changed.items()}
                        entry["culprit"] = [f"{n} {changed[n][0]} -> {changed[n][1]}" for n in culprit]
                    state[key] = entry
                if entry["status"] != "failed":
                    continue
                if "changed" in entry:  # passed here before, fails now: broken by upstream
                    result.broken.append(Broken(f.name, f.artifact, r, v, list(entry.get("culprit", [])),
                                                {n: (c[0], c[1]) for n, c in entry["changed"].items()}, entry.get("log"),
                                                entry.get("reason"), maintainers.get(f.name, [])))
                else:
                    result.failing.append({"name": f.name, "pytorch": r, "variant": v, "artifact": f.artifact})
    finally:
        _release(work, lock)
    _write_state(build_dir, state)
    atomic_write_text(build_dir / REPORT, json.dumps(result.to_dict(), indent=2) + "\n")
    return result


def _release(work: Path, lock: int) -> None:
    """Remove the watch's private folder and let go of its lock."""
    import os

    from conda_distro.engine.phases import remove_tree

    remove_tree(work)
    os.close(lock)


@dataclass
class _Job:
    """One main file's test on one target, run as often as the bisection needs."""

    ctx: Any  # PhaseContext
    spec: Any  # VariantSpec
    path: Path
    target: Any  # TargetIn
    counter: Any  # an iterator of sandbox numbers

    def run(self, pin: Path | None = None) -> Any:
        from conda_distro.engine.phases import run_test_phase

        ctx = self.ctx if pin is None else replace(self.ctx, dep_view=pin.as_uri())
        return run_test_phase(ctx, self.spec, self.path, self.target, next(self.counter))

    def again(self, _i: int) -> Any:
        """One more run of the same test (a confirmation run)."""
        return self.run()


@dataclass
class _Pins:
    """Runs ``job`` with some changed names pinned back to the files they had when it passed."""

    job: _Job
    then: Mapping[str, Sequence[str]]  # name -> the files it had where the test passed
    changed: Mapping[str, tuple[str | None, str | None]]
    older: _OlderFiles  # where the older files are found
    work: Path

    def fails_with(self, now: frozenset[str]) -> bool:
        from conda_distro.engine.phases import remove_tree
        from conda_distro.util.rattler_env import index_channel

        back = [i for n in self.changed if n not in now for i in self.then.get(n, ())]
        pin = _pin_view(self.work / f"pin-{next(self.job.counter)}", back, self.older, index_channel)
        try:
            out = self.job.run(pin)
        finally:
            if pin is not None:
                remove_tree(pin)
        return not out.ok and not out.error


def remote_files(distro: Any) -> RemoteFiles | None:
    """The remote upstream channels of ``distro`` older files can be downloaded from (None: all local)."""
    from conda_distro.engine.mirror import MirrorStore, remote_upstreams

    remotes = remote_upstreams(distro)
    return RemoteFiles(remotes, tuple(distro.subdirs), MirrorStore()) if remotes else None


@dataclass
class RemoteFiles:
    """Files of remote upstream channels by ``name-version-build``: looked up in each channel's repodata
    (read once per watch), downloaded into the mirror store and checked against the channel's sha256."""

    remotes: Sequence[Any]  # engine.mirror.RemoteChannel
    subdirs: Sequence[str]
    store: Any  # engine.mirror.MirrorStore
    _repodata: dict[str, dict[str, Any]] = field(default_factory=dict)

    def find(self, ident: str) -> tuple[Path, str] | None:
        """The stored file of ``ident`` and its subdir (None when no remote channel serves it, or it cannot
        be fetched)."""
        from conda_distro.engine.mirror import MirrorError
        from conda_distro.engine.needs import NeededRecord

        for ch in self.remotes:
            for subdir in self.subdirs:
                doc = self._read(ch.base, subdir)
                for key, ext in (("packages.conda", ".conda"), ("packages", ".tar.bz2")):
                    entry = (doc.get(key) or {}).get(ident + ext)
                    if isinstance(entry, dict):
                        rec = NeededRecord(url=f"{ch.base}{subdir}/{ident}{ext}", file_name=ident + ext, subdir=subdir,
                                           channel=ch.base, sha256=entry.get("sha256"), md5=entry.get("md5"))
                        try:
                            return Path(self.store.fetch(rec)), subdir
                        except MirrorError:
                            return None
        return None

    def _read(self, base: str, subdir: str) -> dict[str, Any]:
        url = f"{base}{subdir}/repodata.json"
        if url not in self._repodata:
            from conda_distro.reports.watch_main import read_repodata

            try:  # bounded as main's repodata is; a channel that cannot be read knows nothing here
                doc = read_repodata(url, base)
            except DistroError:
                doc = None
            self._repodata[url] = doc or {}
        return self._repodata[url]


@dataclass
class _OlderFiles:
    """Where bisection finds the files it pins back to: local upstream channels first, then remote ones."""

    local: Sequence[Path]
    remote: RemoteFiles | None

    def find(self, ident: str) -> tuple[Path, str] | None:
        """``ident``'s file and its subdir (None: no upstream channel serves it)."""
        for ch in self.local:
            hit = next((p for p in ch.glob(f"*/{ident}.conda")), None) or next(ch.glob(f"*/{ident}.tar.bz2"), None)
            if hit is not None:
                return hit, hit.parent.name
        return self.remote.find(ident) if self.remote is not None else None


def _pin_view(folder: Path, idents: Sequence[str], older: _OlderFiles,
              index: Callable[..., Any]) -> Path | None:
    """A channel holding exactly the files ``idents`` (``name-version-build``), from upstream's channels."""
    if not idents:
        return None
    subdirs = set()
    for ident in idents:
        found = older.find(ident)
        if found is not None:
            hit, subdir = found
            (folder / subdir).mkdir(parents=True, exist_ok=True)
            link_or_copy(hit, folder / subdir / hit.name)
            subdirs.add(subdir)
    (folder / "noarch").mkdir(parents=True, exist_ok=True)
    index(folder, subdirs=sorted(subdirs - {"noarch"}))
    return folder
