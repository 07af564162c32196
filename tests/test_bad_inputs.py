"""The bad-input harness (issue 11): every file the tool reads, broken in the ways people and crashes break
them, and bad command-line arguments.

Each case copies one small, valid distribution repository (distro.yaml, two recipes, a proposal, a ledger
entry, a retirement record, a staging and a main channel index, test results, a sweep record), breaks one
thing, runs the real CLI in-process and asserts: exit code 2, no traceback, a message naming the file (or
the flag), and nothing written anywhere in the repository (every file's size and mtime, and the set of
folders, are the same before and after). No case builds anything: every command stops at input validation.

Nothing is promotable in it (beta's tests failed, alpha is in main already), so even the
commands that would write get nowhere near the channels' files, which are not real packages.

The valid repository itself is checked first (``test_the_valid_world_is_accepted``): each command the
cases use gets past input validation on it, so a case fails only because of what it broke.

Recipe cases use only constructs that rattler-build refuses as well (duplicate keys, YAML errors, wrong
types, unclosed expressions, ...): they do not depend on which renderer reads the recipe.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.helpers import sha256, with_provenance
from support.repos import clean_recipe_text
from test_promote import make_root

from conda_distro.channels import ChannelFile
from conda_distro.cli import main as cli_main
from conda_distro.gate.promote import ledger_entry
from conda_distro.state.ledger import Ledger
from conda_distro.state.records import RetirementRecord, RetirementRecords
from conda_distro.state.results import ArtifactResults, ResultsStore
from conda_distro.state.results import TestRecord as Run
from conda_distro.util.yamlio import MAX_DOCUMENT_BYTES

DISTRO_YAML = """\
name: test-distro
channels:
  upstream: [conda-forge]
  staging: build/channels/staging
  main: build/channels/main
pytorch:
  name: pytorch
  releases: ["2.4.1", "2.5.1", "2.6.0"]
  variants: [cpu, cuda]
platforms: [linux-64]
policy:
  upper_bounds: required
  unbounded_allowed: [python]
  unmaintained_grace_days: 60
"""

PROPOSAL = """\
schema_version: 1
name: alpha
version: "1.2.0"
summary: The alpha test package
homepage: https://example.org/alpha
repository: https://github.com/octocat/alpha
license: BSD-3-Clause
issue: ''
maintainers:
  - handle: octocat
    consent: true
pytorch_dependency: uses torch.nn
focus_area: deep learning
downstream_users: tests
test_plan: imports it
"""

BUILD = "pyh4616a5c_0"
ALPHA = f"noarch/alpha-1.2.0-{BUILD}.conda"
BETA = f"noarch/beta-1.2.0-{BUILD}.conda"
STAGING_INDEX = "build/channels/staging/noarch/repodata.json"
MAIN_INDEX = "build/channels/main/noarch/repodata.json"
ALPHA_RESULTS = f"build/results/{ALPHA.replace('/', '__')}.json"
LEDGER = "channel_state/alpha.json"
RECORD = "channel_state/retirements/alpha-20250101.yaml"
SWEEP = "build/sweep/pytorch-2.6.0.json"
RELEASES = ("2.4.1", "2.5.1", "2.6.0")


def _write_channel(folder: Path, names: list[str]) -> dict[str, ChannelFile]:
    """A channel index naming files that exist (their content is not a real package: no case gets that far)."""
    (folder / "noarch").mkdir(parents=True)
    (folder / "linux-64").mkdir()
    (folder / "linux-64" / "repodata.json").write_text(json.dumps({"info": {"subdir": "linux-64"}, "packages": {},
                                                                   "packages.conda": {}}))
    records, files = {}, {}
    for name in names:
        filename = f"{name}-1.2.0-{BUILD}.conda"
        (folder / "noarch" / filename).write_bytes(f"not a real package: {name}".encode())
        depends = ["python >=3.10", "pytorch >=2.4,<2.7"] + (["alpha >=1.2,<2"] if name == "beta" else [])
        records[filename] = {"build": BUILD, "build_number": 0, "depends": depends, "license": "BSD-3-Clause",
                             "md5": "0" * 32, "name": name, "noarch": "python",
                             "sha256": sha256(folder / "noarch" / filename), "size": 20, "subdir": "noarch",
                             "timestamp": 1735732800000, "version": "1.2.0"}
        files[name] = ChannelFile("noarch", filename, name, "1.2.0", BUILD, 0, records[filename]["sha256"],
                                  tuple(depends))
    (folder / "noarch" / "repodata.json").write_text(json.dumps(
        {"info": {"subdir": "noarch"}, "packages": {}, "packages.conda": records, "removed": [],
         "repodata_version": 1}, indent=1))
    return files


def make_world(root: Path) -> Path:
    import datetime as dt

    root.mkdir(parents=True)
    (root / "distro.yaml").write_text(DISTRO_YAML)
    for name, run in (("alpha", []), ("beta", ["alpha >=1.2,<2"])):
        (root / "recipes" / name).mkdir(parents=True)
        (root / "recipes" / name / "recipe.yaml").write_text(clean_recipe_text(name, run=run))
    (root / "proposals").mkdir()
    (root / "proposals" / "alpha.yaml").write_text(PROPOSAL)
    staging = _write_channel(root / "build" / "channels" / "staging", ["alpha", "beta"])
    main = _write_channel(root / "build" / "channels" / "main", ["alpha"])
    date = dt.datetime(2025, 1, 1, 12, tzinfo=dt.UTC)
    store = ResultsStore(root / "build" / "results")
    for f in staging.values():
        store.put(with_provenance(root, ArtifactResults(
            artifact=f.artifact, name=f.name, version=f.version, sha256=f.sha256, depends=list(f.depends),
            tests=[Run(name=f.name, artifact=f.artifact, pytorch=r, variant=v,
                       status="passed" if f.name == "alpha" else "failed", date=date)
                   for r in RELEASES for v in ("cpu", "cuda")])))
    ledger = Ledger(root / "channel_state")
    ledger.add_artifacts("alpha", [ledger_entry(main["alpha"], store.get(ALPHA), channel="build/channels/main",
                                                promoted_at=date, commit=None)])
    RetirementRecords(root / "channel_state").write(RetirementRecord(
        name="alpha", at=dt.datetime(2025, 1, 1, tzinfo=dt.UTC), by="tester", reason="an old retirement",
        artifacts=["noarch/alpha-1.0.0-pyh0_0.conda"]))
    (root / "build" / "sweep").mkdir(parents=True)
    (root / SWEEP).write_text(json.dumps({"release": "2.6.0", "packages": [{"name": "alpha", "status": "passed"}]}))
    return root


@pytest.fixture(scope="module")
def world_template(tmp_path_factory) -> Path:
    return make_world(tmp_path_factory.mktemp("bad-inputs") / "world")


@pytest.fixture()
def world(world_template: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(world_template, tmp_path / "world", symlinks=True))


def snapshot(root: Path) -> dict[str, tuple]:
    """Every file and folder under ``root``: (kind, size, mtime_ns, mode)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            out[p.relative_to(root).as_posix()] = ("dir" if name in dirnames else "file",
                                                   None if name in dirnames else st.st_size,
                                                   None if name in dirnames else st.st_mtime_ns, st.st_mode)
    return out


# ---------------------------------------------------------------------------------------------
# how a case breaks the repository

Mutation = Callable[[Path], None]


def write(rel: str, content: str | bytes) -> Mutation:
    def apply(root: Path) -> None:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return apply


def edit(rel: str, old: str, new: str) -> Mutation:
    def apply(root: Path) -> None:
        text = (root / rel).read_text()
        assert old in text, f"{old!r} not in {rel}"
        (root / rel).write_text(text.replace(old, new, 1))
    return apply


def append(rel: str, content: str) -> Mutation:
    def apply(root: Path) -> None:
        with open(root / rel, "a") as fh:
            fh.write(content)
    return apply


_DELETE = object()


def jset(rel: str, keys: tuple, value: Any) -> Mutation:
    """Set (or with ``_DELETE`` remove) ``keys`` in the JSON document ``rel``."""
    def apply(root: Path) -> None:
        doc = json.loads((root / rel).read_text())
        node = doc
        for k in keys[:-1]:
            node = node[k]
        if value is _DELETE:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value
        (root / rel).write_text(json.dumps(doc, indent=1))
    return apply


def jraw(rel: str, text: str) -> Mutation:
    return write(rel, text)


def mkdir(rel: str) -> Mutation:
    return lambda root: (root / rel).mkdir(parents=True)


def bomb(levels: int = 9) -> str:
    """A "billion laughs" document: 10**levels items through nested aliases, a few hundred bytes of text."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


HUGE = "# padding\n" * (MAX_DOCUMENT_BYTES // 10 + 1)


@dataclass(frozen=True)
class Case:
    id: str
    mutations: tuple[Mutation, ...]
    argv: tuple[str, ...]
    expect: tuple[str, ...]  # all of these appear in the message (the file, the field, the flag)


CASES: list[Case] = []


def family(prefix: str, mutations: dict[str, tuple[Mutation, ...] | Mutation], commands: dict[str, tuple[str, ...]],
           expect: tuple[str, ...]) -> None:
    """Every mutation × every command, each a case."""
    for mid, muts in mutations.items():
        muts = muts if isinstance(muts, tuple) else (muts,)
        for cid, argv in commands.items():
            CASES.append(Case(f"{prefix}-{mid}-{cid}", muts, argv, expect))


# distro.yaml: read by every command ------------------------------------------------------------

D = "distro.yaml"
family("distro", {
    "duplicate-pytorch": append(D, "pytorch:\n  name: pytorch\n  releases: ['2.6.0']\n  variants: [cpu]\n"),
    "duplicate-nested": edit(D, "  main: build/channels/main\n", "  main: build/channels/main\n  main: other\n"),
    "duplicate-flow": edit(D, "variants: [cpu, cuda]", "variants: [cpu, cuda]\n  variants: [cpu]"),
    "syntax-error": append(D, "policy: [unclosed\n"),
    "tab-indent": edit(D, "  name: pytorch", "\tname: pytorch"),
    "not-a-mapping": write(D, "- name\n- channels\n"),
    "empty": write(D, ""),
    "not-utf8": write(D, b"name: \xff\xfe\n"),
    "alias-bomb": append(D, bomb()),
    "recursive-alias": append(D, "loop: &x [*x]\n"),
    "huge": append(D, HUGE),
    "unknown-key": append(D, "platfroms: [linux-64]\n"),
    "unknown-nested-key": edit(D, "  upstream:", "  upsteam:"),
    "missing-pytorch": edit(D, "pytorch:\n  name: pytorch\n", "pytorch_:\n  name: pytorch\n"),
    "release-not-version": edit(D, '"2.6.0"', '"two.six"'),
    "releases-a-string": edit(D, 'releases: ["2.4.1", "2.5.1", "2.6.0"]', "releases: 2.4.1"),
    "unknown-variant": edit(D, "[cpu, cuda]", "[cpu, tpu]"),
    "bad-upper-bounds": edit(D, "upper_bounds: required", "upper_bounds: maybe"),
    "grace-not-int": edit(D, "unmaintained_grace_days: 60", "unmaintained_grace_days: sixty"),
    "channels-a-list": edit(D, "channels:\n", "channels: []\nchannels_:\n"),
}, {"promote": ("promote",), "status": ("status", "--out", "site"), "graph": ("graph",)}, ("distro.yaml",))

# recipes: the named target cannot be read -----------------------------------------------------

R = "recipes/alpha/recipe.yaml"
family("recipe", {
    "duplicate-package": append(R, "package:\n  name: alpha\n  version: 9.9.9\n"),
    "duplicate-run": edit(R, "  run:\n", "  run:\n    - numpy\n  run:\n"),
    "duplicate-flow": edit(R, "build:\n", "build:\n  script: {a: 1, a: 2}\n"),
    "syntax-error": append(R, "about: [unclosed\n"),
    "tab-indent": edit(R, "  name: alpha", "\tname: alpha"),
    "not-a-mapping": write(R, "- package\n- source\n"),
    "empty": write(R, ""),
    "not-utf8": write(R, b"package:\n  name: \xff\n"),
    "alias-bomb": append(R, bomb()),
    "recursive-alias": append(R, "loop: &x [*x]\n"),
    "huge": append(R, HUGE),
    "package-a-list": edit(R, "package:\n  name: alpha\n  version: ${{ version }}\n", "package: [alpha]\n"),
    "unclosed-expression": edit(R, "version: ${{ version }}", "version: ${{ version"),
}, {"build-dry-run": ("build", "alpha", "--dry-run"), "lint": ("lint", "alpha"), "lint-fix": ("lint", "alpha", "--fix")},
    ("recipe.yaml",))

# proposals ------------------------------------------------------------------------------------

P = "proposals/alpha.yaml"
family("proposal", {
    "duplicate-key": append(P, "license: MIT\n"),
    "duplicate-nested": edit(P, "    consent: true\n", "    consent: true\n    consent: false\n"),
    "syntax-error": append(P, "test_plan: [unclosed\n"),
    "not-a-mapping": write(P, "- alpha\n"),
    "not-utf8": write(P, b"name: \xff\n"),
    "alias-bomb": append(P, bomb()),
    "huge": append(P, HUGE),
}, {"lint": ("lint", "alpha")}, ("proposals/alpha.yaml",))

# the ledger -----------------------------------------------------------------------------------

family("ledger", {
    "invalid-json": write(LEDGER, "{\"schema_version\": 1,"),
    "duplicate-key": edit(LEDGER, '"name": "alpha",', '"name": "alpha",\n  "name": "alpha",'),
    "not-an-object": write(LEDGER, "[]"),
    "newer-schema": jset(LEDGER, ("schema_version",), 99),
    "wrong-name": jset(LEDGER, ("name",), "beta"),
    "sha256-bad": jset(LEDGER, ("artifacts", 0, "sha256"), "abc"),
    "build-number-text": jset(LEDGER, ("artifacts", 0, "build_number"), "abc"),
    "date-without-zone": jset(LEDGER, ("artifacts", 0, "promoted_at"), "2025-01-01T12:00:00"),
    "unknown-variant": jset(LEDGER, ("artifacts", 0, "tests", 0, "variant"), "tpu"),
    "unknown-key": jset(LEDGER, ("artifacts", 0, "promotd_at"), None),
    "artifacts-not-a-list": jset(LEDGER, ("artifacts",), "noarch/alpha.conda"),
    "not-utf8": write(LEDGER, b"{\"name\": \"\xff\"}"),
}, {"promote": ("promote",), "status": ("status", "--out", "site"), "report": ("report", "unmaintained"),
    "retire": ("retire", "alpha", "--reason", "broken", "--force")}, ("channel_state/alpha.json",))

# retirement records ---------------------------------------------------------------------------

family("record", {
    "syntax-error": append(RECORD, "reason: [unclosed\n"),
    "duplicate-key": append(RECORD, "reason: again\n"),
    "alias-bomb": append(RECORD, bomb()),
    "not-a-mapping": write(RECORD, "- alpha\n"),
    "missing-reason": edit(RECORD, "reason: an old retirement\n", ""),
    "date-without-zone": edit(RECORD, "at: '2025-01-01T00:00:00Z'", "at: '2025-01-01T00:00:00'"),
    "not-utf8": write(RECORD, b"reason: \xff\n"),
}, {"retire": ("retire", "alpha", "--reason", "broken", "--force"), "status": ("status", "--out", "site"),
    "report": ("report", "unmaintained")}, ("alpha-20250101.yaml",))

family("records-folder", {
    "is-a-file": (lambda root: shutil.rmtree(root / "channel_state" / "retirements"),
                  write("channel_state/retirements", "not a folder\n")),
}, {"retire": ("retire", "alpha", "--reason", "broken", "--force"), "status": ("status", "--out", "site"),
    "report": ("report", "unmaintained")}, ("channel_state/retirements",))

# staging and main channel indexes -------------------------------------------------------------

STAGED = ("packages.conda", f"alpha-1.2.0-{BUILD}.conda")
family("staging", {
    "record-without-name": jset(STAGING_INDEX, (*STAGED, "name"), _DELETE),
    "build-number-text": jset(STAGING_INDEX, (*STAGED, "build_number"), "abc"),
    "record-not-an-object": jset(STAGING_INDEX, STAGED, ["alpha"]),
    "record-a-string": jset(STAGING_INDEX, STAGED, "alpha"),
    "subdir-escape": jset(STAGING_INDEX, (*STAGED, "subdir"), "../../../escape"),
    "depends-a-string": jset(STAGING_INDEX, (*STAGED, "depends"), "pytorch"),
    "depends-not-strings": jset(STAGING_INDEX, (*STAGED, "depends"), [1, 2]),
    "packages-conda-null-record": jset(STAGING_INDEX, STAGED, None),
    "packages-conda-a-list": jset(STAGING_INDEX, ("packages.conda",), ["alpha"]),
    "packages-conda-null": jset(STAGING_INDEX, ("packages.conda",), None),
    "packages-null": jset(STAGING_INDEX, ("packages",), None),
    "filename-escape": edit(STAGING_INDEX, f'"alpha-1.2.0-{BUILD}.conda"', '"../../../main/noarch/x.conda"'),
    "filename-mismatch": edit(STAGING_INDEX, f'"alpha-1.2.0-{BUILD}.conda"', f'"alpha-9.9-{BUILD}.conda"'),
    "sha256-bad": jset(STAGING_INDEX, (*STAGED, "sha256"), "xyz"),
    "sha256-missing": jset(STAGING_INDEX, (*STAGED, "sha256"), _DELETE),
    "version-missing": jset(STAGING_INDEX, (*STAGED, "version"), _DELETE),
    "negative-build-number": jset(STAGING_INDEX, (*STAGED, "build_number"), -1),
    "info-subdir-wrong": jset(STAGING_INDEX, ("info", "subdir"), "linux-64"),
    "invalid-json": write(STAGING_INDEX, "{\"packages.conda\": {"),
    "duplicate-key": edit(STAGING_INDEX, '"removed": [],', '"removed": [],\n "removed": [],'),
    "not-an-object": write(STAGING_INDEX, "[]"),
}, {"promote": ("promote",), "dry-run": ("promote", "--dry-run")}, ("build/channels/staging/noarch/repodata.json",))

MAINREC = ("packages.conda", f"alpha-1.2.0-{BUILD}.conda")
family("main", {
    "record-without-name": jset(MAIN_INDEX, (*MAINREC, "name"), _DELETE),
    "build-number-text": jset(MAIN_INDEX, (*MAINREC, "build_number"), "abc"),
    "subdir-escape": jset(MAIN_INDEX, (*MAINREC, "subdir"), "../../escape"),
    "invalid-json": write(MAIN_INDEX, "{"),
}, {"promote": ("promote",), "retire": ("retire", "alpha", "--reason", "broken", "--force")},
    ("build/channels/main/noarch/repodata.json",))

# test results ---------------------------------------------------------------------------------

family("results", {
    "invalid-json": write(ALPHA_RESULTS, "{"),
    "duplicate-key": edit(ALPHA_RESULTS, '"name": "alpha",', '"name": "alpha",\n  "name": "alpha",'),
    "not-an-object": write(ALPHA_RESULTS, "[]"),
    "status-unknown": jset(ALPHA_RESULTS, ("tests", 0, "status"), "maybe"),
    "variant-unknown": jset(ALPHA_RESULTS, ("tests", 0, "variant"), "tpu"),
    "sha256-bad": jset(ALPHA_RESULTS, ("sha256",), "abc"),
    "sha256-missing": jset(ALPHA_RESULTS, ("sha256",), _DELETE),
    "schema-version-text": jset(ALPHA_RESULTS, ("schema_version",), "1"),
    "tests-not-a-list": jset(ALPHA_RESULTS, ("tests",), {"passed": True}),
    "artifact-of-another-file": jset(ALPHA_RESULTS, ("artifact",), BETA),
    "artifact-escape": jset(ALPHA_RESULTS, ("artifact",), "../../x.conda"),
    "unknown-key": jset(ALPHA_RESULTS, ("verdict",), "passed"),
    "date-not-a-date": jset(ALPHA_RESULTS, ("tests", 0, "date"), "yesterday"),
}, {"promote": ("promote",), "dry-run": ("promote", "--dry-run")}, (ALPHA_RESULTS.rsplit("/", 1)[1],))

# sweep records --------------------------------------------------------------------------------

family("sweep", {
    "release-not-a-version": jset(SWEEP, ("release",), "not a version!"),
}, {"report": ("report", "unmaintained"), "report-json": ("report", "unmaintained", "--format", "json")},
    ("pytorch-2.6.0.json", "release"))

# special files: a FIFO, a device (a symbolic link to /dev/zero), a kernel file, a file past its size cap,
# JSON nested 100,000 deep. Each is refused by the one bounded reader (fsutil.read_bounded, jsonio) without
# reading it (a FIFO opened non-blocking: no hang), naming the file.


def _replace(rel: str, make: Callable[[Path], None]) -> Mutation:
    def apply(root: Path) -> None:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.is_symlink() or p.is_file():
            p.unlink()
        make(p)
    return apply


def fifo(rel: str) -> Mutation:
    return _replace(rel, lambda p: os.mkfifo(p))


def link(rel: str, target: str) -> Mutation:
    return _replace(rel, lambda p: p.symlink_to(target))


def oversize(rel: str, size: int) -> Mutation:
    """A sparse file of ``size`` bytes (nothing is written to disk; the reader refuses it by its size)."""
    def make(p: Path) -> None:
        with open(p, "wb") as fh:
            fh.truncate(size)
    return _replace(rel, make)


DEEP = "[" * 100_000 + "]" * 100_000


def special_files(rel: str, cap: int, *, json_file: bool) -> dict[str, tuple[Mutation, ...] | Mutation]:
    out: dict[str, tuple[Mutation, ...] | Mutation] = {
        "fifo": fifo(rel), "dev-zero": link(rel, "/dev/zero"), "proc-mem": link(rel, "/proc/self/mem"),
        "over-cap": oversize(rel, cap + 1), "a-folder": (_replace(rel, lambda p: p.mkdir()),),
    }
    if json_file:
        out["nested-100000"] = write(rel, DEEP)
        out["nested-in-a-string-and-deep"] = write(rel, '{"a": "]]]]", "b": ' + "[" * 5000 + "]" * 5000 + "}")
    return out


from conda_distro.util.jsonio import MAX_BYTES  # noqa: E402

EXCUSES = "build/excuses.json"
JOURNAL = "build/sweep/pytorch-2.6.0.journal.json"
OWNERS = "package_owners.yaml"
SPECIAL = [
    ("ledger", LEDGER, MAX_BYTES["ledger"], True, {"promote": ("promote",), "status": ("status", "--out", "site"),
                                                   "report": ("report", "unmaintained"),
                                                   "retire": ("retire", "alpha", "--reason", "broken", "--force")}),
    ("results", ALPHA_RESULTS, MAX_BYTES["results"], True, {"promote": ("promote",), "dry-run": ("promote", "--dry-run"),
                                                            "status": ("status", "--out", "site")}),
    ("staging", STAGING_INDEX, MAX_BYTES["repodata"], True, {"promote": ("promote",), "dry-run": ("promote", "--dry-run")}),
    ("main", MAIN_INDEX, MAX_BYTES["repodata"], True, {"promote": ("promote",),
                                                       "retire": ("retire", "alpha", "--reason", "x", "--force")}),
    ("excuses", EXCUSES, MAX_BYTES["excuses"], True, {"status": ("status", "--out", "site")}),
    ("sweep-report", SWEEP, MAX_BYTES["sweep"], True, {"report": ("report", "unmaintained"),
                                                       "sweep-report": ("sweep", "report", "--pytorch", "2.6.0")}),
    ("sweep-journal", JOURNAL, MAX_BYTES["sweep"], True, {"sweep": ("sweep", "--pytorch", "2.7.0", "--dry-run")}),
    ("distro", D, MAX_DOCUMENT_BYTES, False, {"graph": ("graph",), "promote": ("promote",)}),
    ("recipe", R, MAX_DOCUMENT_BYTES, False, {"lint": ("lint", "alpha"), "build-dry-run": ("build", "alpha", "--dry-run")}),
    ("proposal", P, MAX_DOCUMENT_BYTES, False, {"lint": ("lint", "alpha")}),
    ("hints", "hints.yaml", MAX_DOCUMENT_BYTES, False, {"lint": ("lint",), "promote": ("promote",)}),
    ("record", RECORD, MAX_DOCUMENT_BYTES, False, {"retire": ("retire", "alpha", "--reason", "broken", "--force")}),
    ("owners", OWNERS, MAX_DOCUMENT_BYTES, False, {"lint": ("lint",), "build-dry-run": ("build", "alpha", "--dry-run"),
                                                   "promote": ("promote",)}),
]
for kind, rel, cap, is_json, commands in SPECIAL:
    family(f"special-{kind}", special_files(rel, cap, json_file=is_json), commands, (rel.rsplit("/", 1)[-1],))

# a local upstream channel whose index is corrupt: build --dry-run and promote used to go on without it
UPSTREAM = "upstream/noarch/repodata.json"
family("upstream", {
    "invalid-json": (edit(D, "upstream: [conda-forge]", "upstream: [./upstream]"), write(UPSTREAM, "{\"packages\": ")),
    "fifo": (edit(D, "upstream: [conda-forge]", "upstream: [./upstream]"), fifo(UPSTREAM)),
    "dev-zero": (edit(D, "upstream: [conda-forge]", "upstream: [./upstream]"), link(UPSTREAM, "/dev/zero")),
    "nested-100000": (edit(D, "upstream: [conda-forge]", "upstream: [./upstream]"), write(UPSTREAM, DEEP)),
}, {"build-dry-run": ("build", "alpha", "--dry-run"), "promote": ("promote",), "dry-run": ("promote", "--dry-run")},
    (UPSTREAM,))

# the sweep journal names files outside the sweep's own: a rollback must never write them
family("journal-path", {
    f"{name}": write(JOURNAL, json.dumps({"release": "2.6.0", "phase": "edited", "originals": {path: "x"},
                                          "written": {path: "y"}}))
    for name, path in (("parent", "../../victim.txt"), ("absolute", "/tmp/victim.txt"), ("hooks", ".git/hooks/pre-commit"),
                       ("ledger", "channel_state/alpha.json"), ("recipe-escape", "recipes/../../victim.txt"))
}, {"sweep": ("sweep", "--pytorch", "2.7.0", "--dry-run")}, ("pytorch-2.6.0.journal.json", "originals"))

# package_owners.yaml -------------------------------------------------------------------------

family("owners", {
    "not-a-mapping": write(OWNERS, "- alpha\n"),
    "syntax-error": write(OWNERS, "owners: [unclosed\n"),
    "unknown-key": write(OWNERS, "ownrs:\n  alpha: {recipe: alpha, by: octocat, reason: r}\n"),
    "missing-by": write(OWNERS, "owners:\n  alpha:\n    recipe: alpha\n    reason: r\n"),
    "empty-reason": write(OWNERS, "owners:\n  alpha:\n    recipe: alpha\n    by: octocat\n    reason: ''\n"),
    "recipe-escape": write(OWNERS, "owners:\n  alpha:\n    recipe: ../../etc\n    by: octocat\n    reason: r\n"),
    "not-a-conda-name": write(OWNERS, "owners:\n  Alpha Pkg:\n    recipe: alpha\n    by: octocat\n    reason: r\n"),
    "bad-handle": write(OWNERS, "owners:\n  alpha:\n    recipe: alpha\n    by: '@octo cat'\n    reason: r\n"),
    "duplicate-key": write(OWNERS, "owners:\n  alpha: {recipe: alpha, by: octocat, reason: r}\n"
                                   "  alpha: {recipe: beta, by: octocat, reason: r}\n"),
    "alias-bomb": write(OWNERS, bomb()),
}, {"lint": ("lint",), "lint-named": ("lint", "alpha"), "build-dry-run": ("build", "alpha", "--dry-run"),
    "promote": ("promote",), "dry-run": ("promote", "--dry-run")}, (OWNERS,))

# bad values, field by field (each: the file, the field, the line) -----------------------------

for fid, muts, argv, expect in [
    # distro.yaml
    ("releases-not-xyz", edit(D, '"2.6.0"]', '"2.6"]'), ("graph",), ("distro.yaml:", "pytorch.releases", "MAJOR.MINOR.PATCH")),
    ("release-5000-digits", edit(D, '"2.6.0"]', '"2.6.' + "9" * 5000 + '"]'), ("graph",), ("distro.yaml:", "pytorch.releases")),
    ("release-leading-zero", edit(D, '"2.6.0"]', '"2.06.0"]'), ("graph",), ("distro.yaml:", "pytorch.releases")),
    ("variants-duplicate", edit(D, "[cpu, cuda]", "[cpu, cpu]"), ("graph",), ("distro.yaml:", "pytorch.variants", "twice")),
    ("platforms-duplicate", edit(D, "platforms: [linux-64]", "platforms: [linux-64, linux-64]"), ("graph",),
     ("distro.yaml:", "platforms", "twice")),
    ("upstream-duplicate", edit(D, "upstream: [conda-forge]", "upstream: [conda-forge, conda-forge]"), ("graph",),
     ("distro.yaml:", "channels.upstream", "twice")),
    ("upstream-empty", edit(D, "upstream: [conda-forge]", "upstream: [conda-forge, '  ']"), ("graph",),
     ("distro.yaml:", "channels.upstream", "empty")),
    ("unbounded-duplicate", edit(D, "unbounded_allowed: [python]", "unbounded_allowed: [python, python]"), ("graph",),
     ("distro.yaml:", "policy.unbounded_allowed", "twice")),
    ("unbounded-not-a-name", edit(D, "unbounded_allowed: [python]", "unbounded_allowed: ['Not A Name']"), ("graph",),
     ("distro.yaml:", "policy.unbounded_allowed", "conda package name")),
    ("grace-negative", edit(D, "unmaintained_grace_days: 60", "unmaintained_grace_days: -1"), ("graph",),
     ("distro.yaml:", "policy.unmaintained_grace_days")),
    ("grace-huge", edit(D, "unmaintained_grace_days: 60", "unmaintained_grace_days: 99999999999999999999"),
     ("report", "unmaintained"), ("distro.yaml:", "policy.unmaintained_grace_days")),
    ("name-blank", edit(D, "name: test-distro", "name: '   '"), ("graph",), ("distro.yaml:", "'name'", "empty")),
    ("name-control-char", edit(D, "name: test-distro", 'name: "test\\u0000distro"'), ("graph",), ("distro.yaml:", "'name'")),
    ("api-url-not-a-url", append(D, "anaconda:\n  api_url: 'not a url'\n"), ("graph",),
     ("distro.yaml:", "anaconda.api_url", "http(s) URL")),
    ("api-url-ftp", append(D, "anaconda:\n  api_url: ftp://api.anaconda.org\n"), ("graph",), ("distro.yaml:", "anaconda.api_url")),
    ("lockstep-duplicate", edit(D, "  name: pytorch\n", "  name: pytorch\n  lockstep: [torchvision, torchvision]\n"),
     ("graph",), ("distro.yaml:", "pytorch.lockstep", "twice")),
    ("lockstep-is-pytorch", edit(D, "  name: pytorch\n", "  name: pytorch\n  lockstep: [pytorch]\n"), ("graph",),
     ("distro.yaml:", "pytorch.lockstep", "pytorch package itself")),
    ("bot-authors-empty", edit(D, "  unbounded_allowed: [python]\n", "  unbounded_allowed: [python]\n  bot_authors: ['']\n"),
     ("graph",), ("distro.yaml:", "policy.bot_authors", "empty")),
    ("run-exports-not-a-name", edit(D, "  unbounded_allowed: [python]\n",
                                    "  unbounded_allowed: [python]\n  run_exports: {'Py Torch': x.x}\n"),
     ("graph",), ("distro.yaml:", "policy.run_exports")),
    ("run-exports-granularity", edit(D, "  unbounded_allowed: [python]\n",
                                     "  unbounded_allowed: [python]\n  run_exports: {pytorch: x.x.x.x}\n"),
     ("graph",), ("distro.yaml:", "policy.run_exports.pytorch")),
    ("variant-config-duplicate", append(D, "variant_config: [v.yaml, v.yaml]\n"), ("graph",),
     ("distro.yaml:", "variant_config", "twice")),
    ("variant-config-escape", append(D, "variant_config: [../../v.yaml]\n"), ("graph",),
     ("distro.yaml:", "variant_config.0", "outside the repository")),
    ("variant-config-fifo", (append(D, "variant_config: [v.yaml]\n"), fifo("v.yaml")), ("graph",), ("v.yaml", "FIFO")),
    ("runner-label", append(D, "ci:\n  runners: {cpu: 'ubuntu latest'}\n"), ("graph",), ("distro.yaml:", "ci.runners.cpu")),
    ("main-is-git", edit(D, "main: build/channels/main", "main: .git"), ("promote",), ("distro.yaml:", "channels.main", "git")),
    ("main-is-ledger", edit(D, "main: build/channels/main", "main: channel_state/x"), ("promote",),
     ("distro.yaml:", "channels.main", "ledger")),
    ("main-is-recipes", edit(D, "main: build/channels/main", "main: recipes"), ("promote",),
     ("distro.yaml:", "channels.main", "recipes")),
    ("main-is-results", edit(D, "main: build/channels/main", "main: build/results"), ("promote",),
     ("distro.yaml:", "channels.main", "build/results")),
    ("main-holds-build", edit(D, "main: build/channels/main", "main: build"), ("promote",), ("distro.yaml:", "channels.main")),
    ("staging-is-proposals", edit(D, "staging: build/channels/staging", "staging: proposals"), ("promote",),
     ("distro.yaml:", "channels.staging", "proposals")),
    # hints.yaml
    ("hint-bad-date", write("hints.yaml", "hints:\n  - action: block\n    package: alpha\n    by: octocat\n"
                                          "    reason: r\n    expires: 2026-02-30\n"), ("promote",), ("hints.yaml:", "expires")),
    ("hint-version-5000", write("hints.yaml", "hints:\n  - action: block\n    package: alpha\n    version: '1." + "9" * 5000
                                + "'\n    by: octocat\n    reason: r\n    expires: 2026-12-30\n"), ("promote",),
     ("hints.yaml:", "version")),
    ("hint-twice", write("hints.yaml", "hints:\n" + "  - action: block\n    package: alpha\n    by: octocat\n"
                                       "    reason: r\n    expires: 2026-12-30\n" * 2), ("promote",), ("hints.yaml", "hints")),
    # results
    ("results-newer-schema", jset(ALPHA_RESULTS, ("schema_version",), 99), ("promote",),
     (ALPHA_RESULTS.rsplit("/", 1)[1], "schema_version", "newer conda-distro")),
    ("results-schema-zero", jset(ALPHA_RESULTS, ("schema_version",), 0), ("promote",),
     (ALPHA_RESULTS.rsplit("/", 1)[1], "schema_version")),
    ("results-release-not-xyz", jset(ALPHA_RESULTS, ("tests", 0, "pytorch"), "2.4"), ("promote",),
     (ALPHA_RESULTS.rsplit("/", 1)[1], "tests.0.pytorch")),
    ("results-name-not-conda", jset(ALPHA_RESULTS, ("name",), "Alpha Pkg"), ("promote",), (ALPHA_RESULTS.rsplit("/", 1)[1], "name")),
    ("results-version-empty", jset(ALPHA_RESULTS, ("version",), ""), ("promote",), (ALPHA_RESULTS.rsplit("/", 1)[1], "version")),
    ("results-recipe-escape", jset(ALPHA_RESULTS, ("recipe",), "../../etc"), ("promote",), (ALPHA_RESULTS.rsplit("/", 1)[1], "recipe")),
    ("results-commit-not-hex", jset(ALPHA_RESULTS, ("commit",), "HEAD; rm -rf /"), ("promote",),
     (ALPHA_RESULTS.rsplit("/", 1)[1], "commit")),
    ("results-test-recipes-escape", jset(ALPHA_RESULTS, ("tests", 0, "recipes"), {"/etc": "0" * 64}), ("promote",),
     (ALPHA_RESULTS.rsplit("/", 1)[1], "tests.0.recipes")),
    # the ledger
    ("ledger-release-not-xyz", jset(LEDGER, ("artifacts", 0, "tests", 0, "release"), "2.4"), ("promote",),
     ("channel_state/alpha.json", "artifacts.0.tests.0.release")),
    ("ledger-version-empty", jset(LEDGER, ("artifacts", 0, "version"), ""), ("promote",),
     ("channel_state/alpha.json", "artifacts.0.version")),
    ("ledger-negative-build-number", jset(LEDGER, ("artifacts", 0, "build_number"), -1), ("promote",),
     ("channel_state/alpha.json", "artifacts.0.build_number")),
    ("ledger-recipe-escape", jset(LEDGER, ("artifacts", 0, "recipe"), "recipes/../../etc"), ("promote",),
     ("channel_state/alpha.json", "artifacts.0.recipe")),
    ("ledger-artifact-twice", lambda root: (root / LEDGER).write_text(json.dumps(
        {**(d := json.loads((root / LEDGER).read_text())), "artifacts": d["artifacts"] * 2})), ("promote",),
     ("channel_state/alpha.json", "artifacts", "twice")),
    ("ledger-is-a-file-folder", (lambda root: shutil.rmtree(root / "channel_state"), write("channel_state", "x")),
     ("promote",), ("channel_state",)),
]:
    CASES.append(Case(f"value-{fid}", muts if isinstance(muts, tuple) else (muts,), argv, expect))

# command-line arguments -----------------------------------------------------------------------

for cid, muts, argv, expect in [
    ("as-of-max", (), ("report", "unmaintained", "--as-of", "9999-12-31"), ("--as-of",)),
    ("as-of-not-a-date", (), ("report", "unmaintained", "--as-of", "yesterday"), ("--as-of",)),
    ("as-of-month-13", (), ("report", "unmaintained", "--as-of", "2025-13-01"), ("--as-of",)),
    ("status-as-of-max", (), ("status", "--out", "site", "--as-of", "9999-12-31"), ("--as-of",)),
    ("status-out-index-is-a-dir", (mkdir("site/index.html"),), ("status", "--out", "site"), ("index.html",)),
    ("status-out-style-is-a-dir", (mkdir("site/style.css"),), ("status", "--out", "site"), ("style.css",)),
    ("status-out-is-a-file", (write("site", "x"),), ("status", "--out", "site"), ("site",)),
    ("status-missing-out", (), ("status",), ("--out",)),
    ("promote-lock-timeout-text", (), ("promote", "--lock-timeout", "soon"), ("--lock-timeout",)),
    ("promote-unknown-flag", (), ("promote", "--force"), ("--force",)),
    ("graph-format-unknown", (), ("graph", "--format", "xml"), ("--format",)),
    ("graph-affected-by-unknown", (), ("graph", "--affected-by", "nosuch"), ("nosuch",)),
    ("lint-unknown-recipe", (), ("lint", "nosuch"), ("nosuch",)),
    ("lint-unknown-check", (), ("lint", "--check", "no-such-check"), ("no-such-check",)),
    ("lint-format-unknown", (), ("lint", "--format", "yaml"), ("--format",)),
    ("build-unknown-recipe", (), ("build", "nosuch", "--dry-run"), ("nosuch",)),
    ("build-pytorch-not-supported", (), ("build", "alpha", "--dry-run", "--pytorch", "9.9.9"), ("9.9.9",)),
    ("build-jobs-text", (), ("build", "alpha", "--dry-run", "--jobs", "many"), ("--jobs",)),
    ("retire-unknown-package", (), ("retire", "nosuch", "--reason", "x"), ("nosuch",)),
    ("retire-empty-reason", (), ("retire", "alpha", "--reason", "  "), ("--reason",)),
    ("retire-missing-reason", (), ("retire", "alpha"), ("--reason",)),
    ("propose-bad-name", (), ("propose", "Bad Name", "--maintainer", "octocat"), ("Bad Name",)),
    ("propose-bad-handle", (), ("propose", "gamma", "--maintainer", "@not a handle"), ("not a handle",)),
    ("propose-exists", (), ("propose", "alpha", "--maintainer", "octocat"), ("alpha",)),
    ("sweep-missing-pytorch", (), ("sweep", "--dry-run"), ("--pytorch",)),
    ("sweep-pytorch-not-a-version", (), ("sweep", "--pytorch", "abc", "--dry-run"), ("abc",)),
    ("unknown-command", (), ("frobnicate",), ("frobnicate",)),
    ("lock-timeout-inf", (), ("promote", "--lock-timeout", "inf"), ("--lock-timeout",)),
    ("lock-timeout-nan", (), ("promote", "--lock-timeout", "nan"), ("--lock-timeout",)),
    ("build-jobs-huge", (), ("build", "alpha", "--dry-run", "--jobs", "100000"), ("--jobs",)),
    ("graph-shards-huge", (), ("graph", "--format", "github-matrix", "--shards", "100000"), ("--shards",)),
    ("nul-in-out", (), ("status", "--out", "si\0te"), ("--out", "NUL")),
    ("nul-in-keep", (), ("verify-channel", "--keep", "k\0eep"), ("--keep", "NUL")),
    ("nul-in-name", (), ("lint", "al\0pha"), ("NUL",)),
    ("nul-in-base", (), ("check-pr", "--base", "HEAD\0"), ("--base", "NUL")),
    ("keep-in-proc", (), ("verify-channel", "--keep", "/proc/x"), ("--keep", "/proc/x")),
    ("keep-under-a-file", (), ("verify-channel", "--keep", "distro.yaml/envs"), ("--keep", "not a folder")),
    ("status-out-root", (), ("status", "--out", "."), ("--out", "repository itself")),
    ("status-out-ledger", (), ("status", "--out", "channel_state"), ("--out", "ledger")),
    ("status-out-main", (), ("status", "--out", "build/channels/main"), ("--out", "channels.main")),
    ("status-out-recipes", (), ("status", "--out", "recipes/alpha"), ("--out", "recipes")),
    ("status-out-git", (), ("status", "--out", ".git/site"), ("--out", "git")),
    ("status-out-proc", (), ("status", "--out", "/proc/x"), ("--out", "/proc/x")),
    ("sweep-release-5000-digits", (), ("sweep", "--pytorch", "2." + "9" * 5000 + ".0", "--dry-run"), ("--pytorch",)),
    ("sweep-release-not-xyz", (), ("sweep", "--pytorch", "2.7", "--dry-run"), ("--pytorch",)),
    ("report-as-of-year-1", (), ("report", "unmaintained", "--as-of", "0001-01-01"), ("--as-of",)),
    ("retire-by-empty", (), ("retire", "alpha", "--reason", "x", "--by", " ", "--force"), ("--by",)),
    ("retire-by-control-char", (), ("retire", "alpha", "--reason", "x", "--by", "a\x1b[31mb", "--force"), ("--by",)),
    ("retire-reason-huge", (), ("retire", "alpha", "--reason", "x" * 5000, "--force"), ("--reason",)),
    ("check-pr-log-url-not-url", (), ("check-pr", "--base", "HEAD", "--log-url", "javascript:alert(1)"), ("--log-url",)),
    ("status-repo-url-not-url", (), ("status", "--out", "site", "--repo-url", "javascript:alert(1)"), ("--repo-url",)),
]:
    CASES.append(Case(f"cli-{cid}", muts, argv, expect))


# ---------------------------------------------------------------------------------------------


def run(root: Path, argv: tuple[str, ...], capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    cwd = os.getcwd()
    os.chdir(root)  # relative --out paths land in the repository, where the snapshot sees them
    try:
        code = cli_main([*argv, "--root", str(root)])
    finally:
        os.chdir(cwd)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_case_count():
    assert len(CASES) >= 400, len(CASES)
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("argv", sorted({c.argv for c in CASES if not c.id.startswith("cli-")}), ids=" ".join)
def test_the_valid_world_is_accepted(world, argv, capsys):
    """Each command the file cases use gets past input validation on the unbroken repository."""
    code, out, err = run(world, argv, capsys)
    assert code != 2, err
    assert "Traceback" not in out + err


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_input(world, case, capsys):
    for mutate in case.mutations:
        mutate(world)
    before = snapshot(world)
    code, out, err = run(world, case.argv, capsys)
    assert code == 2, f"exit {code}\nstdout:\n{out}\nstderr:\n{err}"
    assert "Traceback" not in out + err
    said = err + out  # lint reports a recipe it cannot read as a finding, on stdout
    for word in case.expect:
        assert word in said, f"{word!r} not named in:\n{said}"
    assert len(said) < 20_000, "the message is not a clear one"
    assert snapshot(world) == before, "something was written"


# ---------------------------------------------------------------------------------------------
# the repros on real rattler-build artifacts: promote refuses, writes nothing, and once the index
# is repaired a rerun promotes (it does not fail forever)


@pytest.fixture()
def staged_root(template: Path, tmp_path: Path) -> Path:
    """test_promote's scenario: a staging channel of real rattler-build artifacts (the session's
    ``template``, tests/support/channel_builds.py) with their results; main empty."""
    return make_root(template, tmp_path)


def _corrupt_alpha(index: Path, how: Callable[[dict, str], None]) -> str:
    doc = json.loads(index.read_text())
    (filename,) = [f for f, r in doc["packages.conda"].items() if r["name"] == "alpha"]
    how(doc, filename)
    index.write_text(json.dumps(doc))
    return filename


REPROS: dict[str, Callable[[dict, str], None]] = {
    "record-without-name": lambda d, f: d["packages.conda"][f].pop("name"),
    "build-number-text": lambda d, f: d["packages.conda"][f].update(build_number="abc"),
    "record-not-a-dict": lambda d, f: d["packages.conda"].update({f: ["alpha"]}),
    "subdir-escape": lambda d, f: d["packages.conda"][f].update(subdir="../../../escape"),
    "depends-a-string": lambda d, f: d["packages.conda"][f].update(depends="pytorch"),
    "packages-conda-null": lambda d, f: d.update({"packages.conda": None}),
}


@pytest.mark.parametrize("repro", REPROS)
def test_corrupt_staging_index_on_real_artifacts(staged_root, repro, capsys):
    index = staged_root / "build" / "channels" / "staging" / "noarch" / "repodata.json"
    good = index.read_text()
    filename = _corrupt_alpha(index, REPROS[repro])
    before = snapshot(staged_root)
    code, out, err = run(staged_root, ("promote",), capsys)
    assert code == 2 and "Traceback" not in out + err
    assert "build/channels/staging/noarch/repodata.json" in err and "packages.conda" in err
    if repro != "packages-conda-null":
        assert filename in err
    assert snapshot(staged_root) == before
    assert not (staged_root / "build" / "channels" / "main").exists() and not (staged_root / "channel_state").exists()
    index.write_text(good)  # repaired: the rerun promotes what passed
    code, out, err = run(staged_root, ("promote", "--format", "json"), capsys)
    assert code == 1, err  # the scenario holds failed packages on purpose
    promoted = {p["artifact"].split("/")[1].split("-")[0] for p in json.loads(out)["promoted"]}
    assert promoted == {"alpha", "gamma"}
    assert (staged_root / "build" / "channels" / "main" / "noarch" / filename).is_file()
    assert (staged_root / "channel_state" / "alpha.json").is_file()


def test_retire_with_an_unreadable_record_writes_nothing(staged_root, capsys):
    """Issue 11 item 12: retire exited 2 *after* writing the ledger. Now it reads every record first."""
    assert run(staged_root, ("promote",), capsys)[0] == 1
    ledger_before = (staged_root / "channel_state" / "alpha.json").read_text()
    bad = staged_root / "channel_state" / "retirements" / "alpha-20240101.yaml"
    bad.parent.mkdir(parents=True)
    bad.write_text("name: alpha\nat: [unclosed\n")
    before = snapshot(staged_root)
    code, out, err = run(staged_root, ("retire", "alpha", "--reason", "broken", "--force"), capsys)
    assert code == 2 and "Traceback" not in out + err
    assert "channel_state/retirements/alpha-20240101.yaml:" in err and "invalid YAML" in err
    assert snapshot(staged_root) == before
    assert (staged_root / "channel_state" / "alpha.json").read_text() == ledger_before
    bad.unlink()
    code, out, err = run(staged_root, ("retire", "alpha", "--reason", "broken", "--force"), capsys)
    assert code == 0, err
    assert '"retired"' in (staged_root / "channel_state" / "alpha.json").read_text()
    assert len(list(bad.parent.glob("alpha-*.yaml"))) == 1
