"""A shard's bundle: what one shard job hands on, and the checks every reader makes before using one.

Layout of a bundle folder (the shard job uploads it as the artifact ``shard-<id>``)::

    shard.json                   the manifest: run, shard id, packages, HEAD, files with sha256, report
    channel/<subdir>/<file>      the staging artifacts it built (or re-tested from main)
    results/<subdir>__<file>.json  their results files (as in ``build/results/``)
    logs/...                     its logs (paths relative to the repository root)

A bundle comes from a job that ran recipe code, so a reader trusts nothing in it until
:func:`read_bundles` has checked, for every bundle the run's :class:`~.plan.ShardPlan` expects: it is
there once; it names this run and this checkout's HEAD; it holds exactly its shard's packages; it holds
regular files only (no links), only in the folders above; every artifact's sha256 is the manifest's
and its results file's; every artifact is an output of one of its own packages; every build and
test record of its report is about its own packages and appears as it is in the results files (a
test blocked by a failed dependency, of an artifact that was not built, has none: it only fails); and
every recipe input hash it records (artifact and test provenance) is this checkout's recipe's. Any
miss is a :class:`~conda_distro.errors.ShardError` (exit 2): nothing is merged.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from conda_distro.engine.plan import parse_unit
from conda_distro.errors import ShardError
from conda_distro.fanout.plan import Shard, ShardPlan, unit_package
from conda_distro.state.provenance import CheckoutRecipes
from conda_distro.state.results import ArtifactResults, BuildRecord, ResultsStore, TestRecord, read_results
from conda_distro.util.fsutil import atomic_write_text, copy_atomic, hash_file

MANIFEST = "shard.json"
BUNDLE_VERSION = 1
_PARTS = (MANIFEST, "channel", "results", "logs")
_HINT = "run the workflow again; a bundle is only what this run's shard jobs uploaded"


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    bundle_version: int = Field(default=BUNDLE_VERSION, ge=1, le=BUNDLE_VERSION)
    run: str = Field(min_length=1, max_length=200)
    shard: str = Field(pattern=r"^s[0-9]+-[0-9]+$")
    head: str | None = None
    packages: list[str]
    files: dict[str, str] = Field(default_factory=dict)  # artifact (subdir/file) -> sha256
    builds: list[BuildRecord] = Field(default_factory=list)
    tests: list[TestRecord] = Field(default_factory=list)


@dataclass
class Bundle:
    folder: Path
    manifest: Manifest
    results: dict[str, ArtifactResults] = field(default_factory=dict)


@dataclass(frozen=True)
class Checkout:
    """What a reader compares bundles with: the run's id, this checkout's HEAD, root and recipes."""

    run: str
    head: str | None
    root: Path
    outputs: dict[str, frozenset[str]]  # package (recipe folder name) -> the package names it produces
    build_dir: Path  # logs are taken only into it

    def recipes(self) -> CheckoutRecipes:
        return CheckoutRecipes(self.root)


@dataclass(frozen=True)
class Owns:
    """What a shard's units speak for: every build and test of a whole package (``NAME``); of a package
    split into builds (``NAME@I:K=V,…``), only its units' builds (the build record's variant has those
    values) and the tests of the artifacts they build (unit 0: also of its other artifacts, files re-tested
    from main)."""

    whole: frozenset[str]
    parts: dict[str, tuple[tuple[int, tuple[tuple[str, str], ...]], ...]]  # package -> (index, K=V pairs) per unit
    output_of: dict[str, str]  # produced name -> its package

    def package(self, name: str) -> str:
        return self.output_of.get(name, name)

    def names(self) -> set[str]:
        return {*self.whole, *self.parts}

    def unit_of(self, b: BuildRecord) -> tuple[str, str] | None:
        """(package, unit K=V) of an owned build record of a split package."""
        name = self.package(b.name)
        for _, kv in self.parts.get(name, ()):
            if all(str(b.variant.get(k) or "") == v for k, v in kv):  # (``K=``: the key is absent)
                return name, ",".join(f"{k}={v}" for k, v in kv)
        return None

    def build(self, b: BuildRecord) -> bool:
        return self.package(b.name) in self.whole or self.unit_of(b) is not None

    def test(self, t: TestRecord, builds: list[BuildRecord]) -> bool:
        """Is ``t`` this shard's (``builds``: the build records it was written or read with)?"""
        name = self.package(t.name)
        if name in self.whole:
            return True
        same = [b for b in builds if self.package(b.name) == name and b.artifact == t.artifact]
        if any(self.build(b) for b in same):
            return True
        return not same and any(i == 0 for i, _ in self.parts.get(name, ()))


def owned_by(shard: Shard, checkout: Checkout) -> Owns:
    """What ``shard``'s units speak for (:class:`Owns`)."""
    parts: dict[str, list[tuple[int, tuple[tuple[str, str], ...]]]] = {}
    for u in shard.packages:
        name, index, keys = parse_unit(u)
        if index is not None:
            parts.setdefault(name, []).append((index, tuple(sorted(keys.items()))))
    names = {unit_package(u) for u in shard.packages}
    output_of = {o: n for n in names for o in checkout.outputs.get(n, ())}
    return Owns(frozenset(u for u in shard.packages if parse_unit(u)[1] is None),
                {n: tuple(v) for n, v in parts.items()}, output_of)


def _rel_log(log: str | None, root: Path) -> str | None:
    if not log:
        return log
    p = Path(log)
    try:
        return p.resolve().relative_to(root.resolve()).as_posix() if p.is_absolute() else p.as_posix()
    except ValueError:
        return None  # outside the repository: not handed on


def _abs_log(log: str | None, root: Path) -> str | None:
    if not log or Path(log).is_absolute() or ".." in Path(log).parts:
        return None if log and (Path(log).is_absolute() or ".." in Path(log).parts) else log
    return str(root / log)


def write_bundle(out: Path, shard: Shard, checkout: Checkout, staging: Path, store: ResultsStore,
                 builds: list[BuildRecord], tests: list[TestRecord]) -> Manifest:
    """Write ``shard``'s bundle into ``out`` (emptied first): the artifacts of its build records that are
    in ``staging``, their results files and the logs its records name, log paths made relative to the root."""
    if out.exists():
        shutil.rmtree(out)
    (out / "channel").mkdir(parents=True)
    (out / "results").mkdir()
    root = checkout.root
    files: dict[str, str] = {}
    arts = sorted({b.artifact for b in builds if b.artifact and (staging / b.artifact).is_file()}
                  | {t.artifact for t in tests if (staging / t.artifact).is_file()})
    for art in arts:
        dst = out / "channel" / art
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(staging / art, dst)
        h = hashlib.sha256()
        hash_file(dst, h)
        files[art] = h.hexdigest()
        res = store.get(art)
        if res is not None:
            res = res.model_copy(deep=True)
            for t in res.tests:
                t.log = _rel_log(t.log, root)
            atomic_write_text(out / "results" / store.path_of(art).name, res.model_dump_json(indent=2) + "\n")
    logs = {b.log for b in builds} | {t.log for t in tests}
    for log in sorted(filter(None, logs)):
        rel = _rel_log(log, root)
        if rel and Path(log).is_file():
            dst = out / "logs" / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log, dst)
    manifest = Manifest(run=checkout.run, shard=shard.id, head=checkout.head, packages=list(shard.packages),
                        files=files,
                        builds=[b.model_copy(update={"log": _rel_log(b.log, root)}) for b in builds],
                        tests=[t.model_copy(update={"log": _rel_log(t.log, root)}) for t in tests])
    atomic_write_text(out / MANIFEST, manifest.model_dump_json(indent=2) + "\n")
    return manifest


def _find(folder: Path) -> dict[str, list[Path]]:
    """Bundle folders under ``folder`` (itself, or its children: one per downloaded artifact) by shard id."""
    found: dict[str, list[Path]] = {}
    candidates = [folder] if (folder / MANIFEST).is_file() else sorted(p for p in folder.iterdir() if p.is_dir()) \
        if folder.is_dir() else []
    for c in candidates:
        if not (c / MANIFEST).is_file():
            continue
        try:
            m = Manifest.model_validate_json((c / MANIFEST).read_bytes(), strict=True)
        except (ValidationError, ValueError, OSError) as exc:
            raise ShardError(f"unreadable shard manifest: {str(exc).splitlines()[0]}", path=c / MANIFEST,
                             hint=_HINT) from None
        found.setdefault(m.shard, []).append(c)
    return found


def _sha(path: Path) -> str:
    h = hashlib.sha256()
    hash_file(path, h, error=ShardError, hint=_HINT)
    return h.hexdigest()


def _check_tree(folder: Path) -> None:
    for top in folder.iterdir():
        if top.name not in _PARTS:
            raise ShardError(f"unexpected entry '{top.name}' in a shard bundle", path=folder, hint=_HINT)
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in (*dirnames, *filenames):
            p = Path(dirpath) / name
            if p.is_symlink() or not (p.is_dir() or p.is_file()):
                raise ShardError("a shard bundle holds something other than regular files and folders",
                                 path=p, hint=_HINT)


def _check_bundle(folder: Path, shard: Shard, checkout: Checkout, recipes: CheckoutRecipes) -> Bundle:
    _check_tree(folder)
    m = Manifest.model_validate_json((folder / MANIFEST).read_bytes(), strict=True)
    where = folder / MANIFEST

    def fail(message: str, field: str | None = None) -> ShardError:
        return ShardError(f"shard {shard.id}: {message}", path=where, field=field, hint=_HINT)

    if m.run != checkout.run:
        raise fail(f"made by run '{m.run[:80]}', not by this run ('{checkout.run}')", "run")
    if m.head != checkout.head:
        raise fail(f"built from commit {str(m.head)[:12]}, this checkout is {str(checkout.head)[:12]}", "head")
    if list(m.packages) != list(shard.packages):
        raise fail(f"holds {', '.join(m.packages) or 'nothing'}; this run's plan gives it {', '.join(shard.packages)}",
                   "packages")
    owns = owned_by(shard, checkout)
    own = owns.names()
    outputs = set().union(*(checkout.outputs.get(p, frozenset()) for p in own)) | own
    on_disk = {p.relative_to(folder / "channel").as_posix() for p in (folder / "channel").rglob("*") if p.is_file()} \
        if (folder / "channel").is_dir() else set()
    if on_disk != set(m.files):
        raise fail(f"its files and its manifest differ: {', '.join(sorted(on_disk ^ set(m.files))[:5])}", "files")
    bundle = Bundle(folder, m)
    for art, sha in sorted(m.files.items()):
        if _sha(folder / "channel" / art) != sha:
            raise fail(f"{art} is not the file its manifest's sha256 names", "files")
        path = folder / "results" / (art.replace("/", "__") + ".json")
        try:
            res = read_results(path, art)
        except FileNotFoundError:
            raise fail(f"no results file for {art}", "files") from None
        if res.sha256 != sha:
            raise fail(f"the results of {art} are about another file (sha256)", "files")
        if res.name not in outputs:
            raise fail(f"{art} is a '{res.name}', which none of its packages produces", "files")
        if res.recipe is not None and recipes.digest(res.recipe) != res.recipe_hash:
            raise fail(f"{art} was built from a recipe that is not this checkout's {res.recipe}", "files")
        for t in res.tests:
            bad = recipes.differing(t.recipes)
            if bad:
                raise fail(f"a test of {art} ran with recipes that are not this checkout's: {', '.join(bad)}", "tests")
        bundle.results[art] = res
    extra = {p.name for p in (folder / "results").glob("*")} - {a.replace("/", "__") + ".json" for a in m.files} \
        if (folder / "results").is_dir() else set()
    if extra:
        raise fail(f"results files without an artifact: {', '.join(sorted(extra)[:5])}", "files")
    for b in m.builds:
        if b.name not in own:
            raise fail(f"a build record of '{b.name}', which is not its package", "builds")
        if not owns.build(b):
            shown = ",".join(f"{k}={v}" for k, v in sorted(b.variant.items()))
            raise fail(f"a build record of '{b.name}' ({shown}), which is not one of its units", "builds")
        if b.sha256 and b.artifact and m.files.get(b.artifact) != b.sha256:
            raise fail(f"the build record of {b.artifact} names another file than it holds", "builds")
    for t in m.tests:
        if t.name not in outputs:
            raise fail(f"a test record of '{t.name}', which is not its package", "tests")
        if not owns.test(t, m.builds):
            raise fail(f"a test record of {t.artifact}, which is not one of its units' builds", "tests")
        got = bundle.results.get(t.artifact)
        if got is None and t.status == "blocked" and t.artifact not in m.files:
            continue  # a test that could not run for its dependency's failure: no results file (fails the gate)
        if got is None or not any(_same_test(t, r) for r in got.tests):
            raise fail(f"the test of {t.artifact} on pytorch {t.pytorch} ({t.variant}) is not in its results", "tests")
    held = {owns.unit_of(b) for b in m.builds}  # a package split into builds: each of its units' is accounted for
    for name, units in owns.parts.items():
        for _, kv in units:
            key = ",".join(f"{k}={v}" for k, v in kv)
            if (name, key) not in held:
                raise fail(f"no build record of '{name}' ({key})", "builds")
    return bundle


def _once(bundles: list[Bundle]) -> None:
    """Every build, test and artifact of the run comes from exactly one shard (a compiled package's builds
    are split over shards: two bundles must never speak for the same build, test or file)."""
    seen: dict[tuple, str] = {}
    for b in bundles:
        keys = [("build", r.name, r.artifact or "", tuple(sorted(r.variant.items()))) for r in b.manifest.builds] + \
            [("test", t.artifact, t.pytorch, t.variant) for t in b.manifest.tests] + \
            [("file", art, "", "") for art in b.manifest.files]
        for key in keys:
            if key in seen and seen[key] != b.manifest.shard:
                what = {"build": f"the build of {key[2] or key[1]}", "file": f"the file {key[1]}"}.get(
                    key[0], f"the test of {key[1]} on pytorch {key[2]} ({key[3]})")
                raise ShardError(f"shards {seen[key]} and {b.manifest.shard} both hold {what}", path=b.folder / MANIFEST,
                                 hint=_HINT)
            seen[key] = b.manifest.shard


def _same_test(a: TestRecord, b: TestRecord) -> bool:
    keys = ("pytorch", "variant", "status", "date", "reason")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


def read_bundles(folder: Path, plan: ShardPlan, shards: list[Shard], checkout: Checkout) -> list[Bundle]:
    """The bundles of ``shards`` under ``folder``, each checked (module docstring); any miss raises.
    Bundles of other shards found there are left alone (a download may see later uploads)."""
    found = _find(folder)
    for s in shards:  # bundles of other shards (later stages' uploads seen by a download) are not read
        if len(found.get(s.id, ())) > 1:
            raise ShardError(f"two bundles of shard '{s.id}'", path=found[s.id][1], hint=_HINT)
    recipes = checkout.recipes()
    out = []
    for s in shards:
        if s.id not in found:
            raise ShardError(f"the bundle of shard {s.id} ({' '.join(s.packages)}) is missing", path=folder,
                             hint="its job failed or did not run: see the run's shard jobs, then run the workflow again")
        try:
            out.append(_check_bundle(found[s.id][0], s, checkout, recipes))
        except ValidationError as exc:
            raise ShardError(f"shard {s.id}: unreadable manifest: {str(exc).splitlines()[0]}",
                             path=found[s.id][0] / MANIFEST, hint=_HINT) from None
    _once(out)
    return out


@dataclass
class Merged:
    """Bundles taken into a staging channel and a results store: their records, log paths rooted here."""

    builds: list[BuildRecord] = field(default_factory=list)
    tests: list[TestRecord] = field(default_factory=list)
    artifacts: list[str] = field(default_factory=list)


def take_bundles(bundles: list[Bundle], staging: Path, store: ResultsStore, checkout: Checkout) -> Merged:
    """Copy checked bundles into ``staging`` and ``store`` (and their logs into the build folder, nowhere
    else); the caller indexes the channel. Log paths in records and results become paths under the root."""
    root = checkout.root
    merged = Merged()
    for b in bundles:
        for art in sorted(b.manifest.files):
            dst = staging / art
            dst.parent.mkdir(parents=True, exist_ok=True)
            copy_atomic(b.folder / "channel" / art, dst)  # (killed midway: never a truncated package in staging)
            res = b.results[art].model_copy(deep=True)
            for t in res.tests:
                t.log = _abs_log(t.log, root)
            store.put(res)
            merged.artifacts.append(art)
        logs = b.folder / "logs"
        if logs.is_dir():
            for p in sorted(logs.rglob("*")):
                dst = root / p.relative_to(logs)
                if p.is_file() and dst.resolve().is_relative_to(checkout.build_dir.resolve()):
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(p, dst)
        merged.builds += [r.model_copy(update={"log": _abs_log(r.log, root)}) for r in b.manifest.builds]
        merged.tests += [r.model_copy(update={"log": _abs_log(r.log, root)}) for r in b.manifest.tests]
    return merged
