"""End-to-end tests of the build/test engine on the sandbox world (real rattler-build builds and tests).

Most tests read the session's ``build --all --jobs 2`` of the sandbox (``built_template`` /
``built_report``) or change a private copy of it (``built_world``). The world's roles (sandbox README):
chain tensorutils <- layerkit <- trainloop; diamond metrickit <- visionmetrics, textmetrics <- evalsuite;
visionkit pins pytorch >=2.5,<2.6 (lockstep); hookprofiler fails on the newest release only; fastquant
fails everywhere; quantserve depends on fastquant.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from support.helpers import run_cli_at, run_json_at, sha256, upstream_pytorch_builds
from support.worlds import copy_world

from conda_distro.state.results import ArtifactResults, ResultsStore

STAGING = Path("build/channels/staging")
CHAIN = {"tensorutils", "layerkit", "trainloop"}
DIAMOND = {"metrickit", "visionmetrics", "textmetrics", "evalsuite"}
# │ pytorch     ┆ 2.5.1   ┆ cuda124_hc9ac692_200 ┆ 2.5.1-cuda ┆ 18.25 KiB │  (rattler-build's environment table)
PYTORCH_ROW = re.compile(r"│\s*pytorch\s*┆\s*(\S+)\s*┆\s*(\S+)\s*┆\s*(\S+)\s*┆")

# ---------------------------------------------------------------------------------------------
# helpers


def config(root: Path) -> tuple[list[str], list[str]]:
    from conda_distro.config import load_config

    cfg = load_config(root).config.pytorch
    return list(cfg.releases), list(cfg.variants)


def recipe_names(root: Path) -> set[str]:
    return {p.parent.name for p in (root / "recipes").glob("*/recipe.yaml")}


def snapshot(folder: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``folder`` except git's own: (mtime_ns, sha256)."""
    if not folder.exists():
        return {}
    return {p.relative_to(folder).as_posix(): (p.stat().st_mtime_ns, sha256(p))
            for p in sorted(folder.rglob("*")) if p.is_file() and ".git" not in p.relative_to(folder).parts}


def staging_packages(root: Path) -> dict[str, str]:
    """artifact -> sha256 of every package file in staging."""
    st = root / STAGING
    return {p.relative_to(st).as_posix(): sha256(p) for p in st.glob("*/*.conda")}


def by_target(report: dict) -> dict[tuple[str, str, str], dict]:
    return {(t["name"], t["pytorch"], t["variant"]): t for t in report["tests"]}


def builds_by_name(report: dict) -> dict[str, dict]:
    out = {}
    for b in report["builds"]:
        assert b["name"] not in out, f"{b['name']} has more than one build in the report (noarch: one expected)"
        out[b["name"]] = b
    return out


def bump_build_number(root: Path, name: str) -> None:
    path = root / "recipes" / name / "recipe.yaml"
    text = path.read_text()
    assert "  number: 0\n" in text
    path.write_text(text.replace("  number: 0\n", "  number: 1\n", 1))


def expected_statuses(root: Path) -> dict[tuple[str, str, str], str]:
    """The test matrix the sandbox's roles call for: (name, release, variant) -> status."""
    releases, variants = config(root)
    newest = releases[-1]
    out: dict[tuple[str, str, str], str] = {}
    for name in recipe_names(root):
        for r in releases:
            if name == "visionkit" and not r.startswith("2.5."):
                continue  # lockstep: pytorch >=2.5,<2.6 admits 2.5.1 only
            for v in variants:
                if name == "fastquant":
                    status = "failed"
                elif name == "quantserve":
                    status = "blocked"
                elif name == "hookprofiler":
                    status = "failed" if r == newest else "passed"
                else:
                    status = "passed"
                out[(name, r, v)] = status
    return out


# ---------------------------------------------------------------------------------------------
# the session's `build --all --jobs 2`


@pytest.mark.slow
def test_every_buildable_package_is_in_staging_with_the_reported_sha256(built_report, built_template):
    builds = builds_by_name(built_report)
    assert set(builds) == recipe_names(built_template)
    staged = staging_packages(built_template)
    for name, b in builds.items():
        if name == "quantserve":
            continue
        assert b["status"] == "built", b
        path = built_template / STAGING / b["artifact"]
        assert path.is_file(), f"{b['artifact']} is not in staging"
        assert b["sha256"] == sha256(path)
        assert Path(b["log"]).is_file()
    # quantserve was never built: its dependency failed
    q = builds["quantserve"]
    assert q["status"] == "blocked" and "fastquant" in q["reason"]
    assert "sha256" not in q
    assert not [a for a in staged if "/quantserve-" in a]
    # staging holds exactly the reported artifacts, and its repodata agrees on their sha256
    assert set(staged) == {b["artifact"] for b in builds.values() if b["status"] == "built"}
    repodata = json.loads((built_template / STAGING / "noarch" / "repodata.json").read_text())
    indexed = {f"noarch/{fn}": rec["sha256"] for fn, rec in repodata["packages.conda"].items()}
    assert indexed == staged


@pytest.mark.slow
def test_statuses_follow_the_sandbox_roles(built_report, built_template):
    got = {key: t["status"] for key, t in by_target(built_report).items()}
    assert len(got) == len(built_report["tests"]), "a (package, release, variant) was tested twice"
    assert got == expected_statuses(built_template)
    # the scenario is meaningful: the expectation has every kind of outcome
    assert {"passed", "failed", "blocked"} == set(got.values())
    assert {(r, v) for (n, r, v) in got if n == "visionkit"} == {("2.5.1", "cpu"), ("2.5.1", "cuda")}
    quantserve = [t for t in built_report["tests"] if t["name"] == "quantserve"]
    assert quantserve and all("fastquant" in t["reason"] for t in quantserve)
    # a failing run is not ok (the CLI exits 1 on it; see test_end_to_end's CLI chain)
    assert built_report["ok"] is False


@pytest.mark.slow
def test_each_failed_test_has_a_log_holding_the_failure(built_report):
    failed = [t for t in built_report["tests"] if t["status"] == "failed"]
    assert {t["name"] for t in failed} == {"fastquant", "hookprofiler"}
    what = {"fastquant": "AssertionError: [0, 128, 256]",
            "hookprofiler": "has no attribute 'legacy_autograd_hook'"}
    for t in failed:
        log = Path(t["log"])
        assert log.is_file(), t
        text = log.read_text()
        assert what[t["name"]] in text, f"{log} does not show the failure"
        assert f"{t['pytorch']}-{t['variant']}" in log.name
        assert what[t["name"]] in t["reason"], t["reason"]  # the report says why, not just "script failed"
    for t in built_report["tests"]:
        if t["status"] == "passed":
            assert Path(t["log"]).is_file()


@pytest.mark.slow
def test_results_store_holds_one_artifact_results_per_artifact(built_report, built_template):
    files = sorted((built_template / "build" / "results").glob("*.json"))
    stored = [ArtifactResults.model_validate(json.loads(f.read_text())) for f in files]
    built = {b["artifact"]: b for b in built_report["builds"] if b["status"] == "built"}
    assert sorted(r.artifact for r in stored) == sorted(built)
    for f, res in zip(files, stored, strict=True):
        assert f.name == res.artifact.replace("/", "__") + ".json"
        assert res.sha256 == built[res.artifact]["sha256"] == sha256(built_template / STAGING / res.artifact)
        reported = {(t["pytorch"], t["variant"]): t["status"] for t in built_report["tests"]
                    if t["artifact"] == res.artifact}
        assert {k: t.status for k, t in res.latest().items()} == reported
        assert all(t.key for t in res.tests)
        assert res.depends and any(d.startswith("pytorch ") for d in res.depends)


@pytest.mark.slow
def test_each_test_ran_on_exactly_its_release_and_variant(built_report, built_template):
    builds = upstream_pytorch_builds(built_template)
    releases, variants = config(built_template)
    assert set(builds) == {(r, v) for r in releases for v in variants}
    assert all(b.startswith("cuda") for (r, v), b in builds.items() if v == "cuda")
    checked = 0
    for t in built_report["tests"]:
        if t["status"] == "blocked":
            continue
        rows = PYTORCH_ROW.findall(Path(t["log"]).read_text())
        assert rows, f"no pytorch in the test environment table of {t['log']}"
        for version, build, channel in rows:
            assert version == t["pytorch"], (t["log"], version)
            assert build == builds[(t["pytorch"], t["variant"])], (t["log"], build)
            assert channel == f"{t['pytorch']}-{t['variant']}"  # it came from the release view
        checked += 1
    assert checked >= 50


# ---------------------------------------------------------------------------------------------
# reruns and changes on a copy of the built world


@pytest.mark.slow
def test_no_change_rerun_builds_and_tests_nothing(built_world, built_report, capsys):
    staging, results, logs = (snapshot(built_world / p) for p in (STAGING / "noarch", "build/results", "build/logs"))
    code, doc = run_json_at(capsys, built_world, "build", "--all")
    assert code == 1  # the designed failures are still failures
    assert {b["name"]: b["status"] for b in doc["builds"]} == {
        b["name"]: ("blocked" if b["status"] == "blocked" else "skipped-existing") for b in built_report["builds"]}
    for t in doc["tests"]:
        if t["status"] == "blocked":
            assert t["name"] == "quantserve"
        else:
            assert t["cached"] is True, t
    before = {k: t["status"] for k, t in by_target(built_report).items()}
    assert {k: t["status"] for k, t in by_target(doc).items()} == before
    # nothing was built, tested or recorded
    assert snapshot(built_world / STAGING / "noarch") == staging
    assert snapshot(built_world / "build/results") == results
    assert snapshot(built_world / "build/logs") == logs


@pytest.mark.slow
def test_changed_recipe_rebuilds_it_and_retests_its_dependents_only(built_world, capsys):
    import git

    bump_build_number(built_world, "tensorutils")
    build_dir = snapshot(built_world / "build")

    # --dry-run: the plan, nothing written
    code, doc = run_json_at(capsys, built_world, "build", "tensorutils", "--dry-run")
    assert code == 0 and doc["dry_run"] is True
    plan = {p["name"]: [v["action"] for v in p["variants"]] for p in doc["plan"]["packages"]}
    assert plan == {"tensorutils": ["build"], "layerkit": ["skip-existing"], "trainloop": ["skip-existing"]}
    assert doc["plan"]["order"] == ["tensorutils", "layerkit", "trainloop"]
    code, text, _ = run_cli_at(capsys, built_world, "build", "tensorutils", "--dry-run")
    assert code == 0 and "dry run" in text and "noarch/tensorutils-0.3.2-pyh" in text and "_1.conda" in text
    # --changed-since picks the same set: uncommitted, then committed
    code, doc = run_json_at(capsys, built_world, "build", "--changed-since", "HEAD", "--dry-run")
    assert code == 0 and doc["plan"]["order"] == ["tensorutils", "layerkit", "trainloop"]
    repo = git.Repo(built_world)
    repo.index.add(["recipes/tensorutils/recipe.yaml"])
    repo.index.commit("tensorutils: build number 1")
    code, doc = run_json_at(capsys, built_world, "build", "--changed-since", "HEAD~1", "--dry-run")
    assert code == 0 and doc["plan"]["order"] == ["tensorutils", "layerkit", "trainloop"]
    code, doc = run_json_at(capsys, built_world, "build", "--changed-since", "HEAD", "--dry-run")
    assert code == 0 and doc["plan"]["order"] == []
    assert snapshot(built_world / "build") == build_dir, "a dry run wrote something"

    old_staging = staging_packages(built_world)
    old_results = {n: json.loads(p.read_text()) for n in ("layerkit", "trainloop")
                   for p in (built_world / "build/results").glob(f"noarch__{n}-*.json")}
    code, doc = run_json_at(capsys, built_world, "build", "--changed-since", "HEAD~1")
    assert code == 0, doc
    assert {b["name"] for b in doc["builds"]} == {t["name"] for t in doc["tests"]} == CHAIN
    builds = builds_by_name(doc)
    assert builds["tensorutils"]["status"] == "built"
    assert builds["tensorutils"]["artifact"].endswith("_1.conda")
    assert builds["layerkit"]["status"] == builds["trainloop"]["status"] == "skipped-existing"
    assert all(t["status"] == "passed" and not t["cached"] for t in doc["tests"]), "dependents were not re-tested"
    # staging: one new file, the others untouched
    new = staging_packages(built_world)
    assert set(new) - set(old_staging) == {builds["tensorutils"]["artifact"]}
    assert {a: s for a, s in new.items() if a in old_staging} == old_staging
    # the dependents' latest results are this run's (tested against tensorutils _1); the runs against
    # _0 are kept beside them (one outcome per environment: the gate compares the two)
    for old in old_results.values():
        res = ResultsStore(built_world / "build/results").get(old["artifact"])
        latest = res.latest().values()
        assert {t.key for t in latest}.isdisjoint({t["key"] for t in old["tests"]})
        assert {t.against["tensorutils"] for t in latest} == {"tensorutils-0.3.2-" + builds["tensorutils"]["artifact"].split("-")[-1][:-6]}
        assert {t["key"] for t in old["tests"]} <= {t.key for t in res.tests}
        log = Path(next(t.log for t in latest))
        assert re.search(r"tensorutils\s*┆\s*0\.3\.2\s*┆\s*pyh\w+_1\s", log.read_text()), log

    # and then nothing is left to do
    code, doc = run_json_at(capsys, built_world, "build", "--all")
    assert all(t["cached"] for t in doc["tests"] if t["status"] != "blocked"), [t for t in doc["tests"] if not t["cached"]]
    assert staging_packages(built_world) == new


@pytest.mark.slow
def test_dependents_are_tested_against_this_runs_build_of_their_parents(built_world, capsys):
    """tensorutils 0.4.0 breaks layerkit's pin (<0.4): layerkit must fail, although tensorutils 0.3.2
    (which it would accept) is still in staging."""
    path = built_world / "recipes/tensorutils/recipe.yaml"
    path.write_text(path.read_text().replace('version: "0.3.2"', 'version: "0.4.0"'))
    code, doc = run_json_at(capsys, built_world, "build", "tensorutils")
    assert code == 1
    assert any(a.startswith("noarch/tensorutils-0.3.2-") for a in staging_packages(built_world))
    builds = builds_by_name(doc)
    assert builds["tensorutils"]["status"] == "built" and "-0.4.0-" in builds["tensorutils"]["artifact"]
    assert builds["layerkit"]["status"] == "skipped-existing"
    assert builds["trainloop"]["status"] == "blocked" and "layerkit" in builds["trainloop"]["reason"]
    tests = by_target(doc)
    releases, variants = config(built_world)
    for r in releases:
        for v in variants:
            assert tests[("tensorutils", r, v)]["status"] == "passed"
            lk = tests[("layerkit", r, v)]
            assert lk["status"] == "failed" and not lk["cached"]
            assert "tensorutils >=0.3.1,<0.4" in lk["reason"], lk["reason"]
            assert "tensorutils >=0.3.1,<0.4" in Path(lk["log"]).read_text()
            assert tests[("trainloop", r, v)]["status"] == "blocked"


@pytest.mark.slow
def test_failed_build_blocks_its_dependents(built_world, capsys):
    path = built_world / "recipes/tensorutils/recipe.yaml"
    text = path.read_text()
    path.write_text(text.replace("    - cp -r $SRC_DIR/tensorutils $SP_DIR/\n",
                                 "    - cp -r $SRC_DIR/tensorutils $SP_DIR/\n    - echo 'compiler exploded' && exit 3\n"))
    assert path.read_text() != text
    code, doc = run_json_at(capsys, built_world, "build", "tensorutils")
    assert code == 1
    builds = builds_by_name(doc)
    assert builds["tensorutils"]["status"] == "failed"
    assert "compiler exploded" in Path(builds["tensorutils"]["log"]).read_text()
    assert builds["layerkit"]["status"] == "blocked" and "tensorutils" in builds["layerkit"]["reason"]
    assert builds["trainloop"]["status"] == "blocked" and "layerkit" in builds["trainloop"]["reason"]
    assert {t["status"] for t in doc["tests"]} == {"blocked"}
    # the stale artifact of the old recipe is gone from staging; dependents' files are kept
    staged = staging_packages(built_world)
    assert not [a for a in staged if "/tensorutils-" in a]
    assert [a for a in staged if "/layerkit-" in a]


@pytest.mark.slow
def test_jobs_2_gives_the_same_outcome_as_jobs_1(sandbox_template, tmp_path, capsys):
    """The diamond below metrickit, from scratch, tested against one release (both variants) to keep it short."""
    docs = {}
    for jobs in ("1", "2"):
        root = copy_world(sandbox_template, tmp_path / f"jobs{jobs}")
        code, docs[jobs] = run_json_at(capsys, root, "build", "metrickit", "--jobs", jobs, "--pytorch", "2.5.1")
        assert code == 0, docs[jobs]
        assert {b["name"] for b in docs[jobs]["builds"]} == DIAMOND
        assert len(staging_packages(root)) == len(DIAMOND)

    def outcome(doc):
        return ({(b["name"], b["artifact"], b["status"]) for b in doc["builds"]},
                {(t["name"], t["artifact"], t["pytorch"], t["variant"], t["status"], t["cached"]) for t in doc["tests"]})

    assert outcome(docs["1"]) == outcome(docs["2"])
    assert docs["1"]["plan"]["order"] == docs["2"]["plan"]["order"]
    order = docs["2"]["plan"]["order"]
    assert order[0] == "metrickit" and order[-1] == "evalsuite"
    _, variants = config(sandbox_template)
    assert {(t["pytorch"], t["status"]) for t in docs["2"]["tests"]} == {("2.5.1", "passed")}
    assert len(docs["2"]["tests"]) == len(DIAMOND) * len(variants)


# ---------------------------------------------------------------------------------------------
# bad input: exit 2, nothing written


def _break_yaml(root: Path) -> None:
    (root / "recipes/layerkit/recipe.yaml").write_text("package: [\n")


def _unknown_field(root: Path) -> None:
    p = root / "recipes/tensorutils/recipe.yaml"
    p.write_text(p.read_text().replace("  number: 0\n", "  numbr: 0\n"))


@pytest.mark.slow
@pytest.mark.parametrize(("args", "change", "message"), [
    (["build", "tensorutil"], None, "did you mean 'tensorutils'"),
    (["build", "--all", "--pytorch", "9.9.9"], None, "9.9.9"),
    (["build", "--all", "--engine", "conda-build"], None, "conda-build is not on PATH"),
    (["build", "--all", "--engine", "bogus"], None, "unknown engine 'bogus'"),
    (["build"], None, "nothing selected"),
    (["build", "--all", "--jobs", "0"], None, "--jobs"),
    (["build", "--changed-since", "no-such-ref"], None, "no-such-ref"),
    (["build", "layerkit"], _break_yaml, "recipes/layerkit/recipe.yaml"),  # named: bad input (--all: exit 1)
    (["build", "tensorutils"], _unknown_field, "unknown field 'numbr'"),
], ids=["unknown-name", "unknown-release", "conda-build-missing", "bogus-engine", "nothing-selected",
        "jobs-0", "bad-ref", "yaml-error", "unknown-recipe-field"])
def test_bad_input_exits_2_and_writes_nothing(sandbox_world, capsys, args, change, message):
    if "conda-build" in args and shutil.which("conda-build"):
        pytest.skip("conda-build is on PATH here")
    if change:
        change(sandbox_world)
    before = snapshot(sandbox_world)
    code, out, err = run_cli_at(capsys, sandbox_world, *args)
    assert code == 2, (out, err)
    assert message in err, err
    assert not (sandbox_world / "build").exists()
    assert snapshot(sandbox_world) == before


def test_a_runner_message_that_passes_with_a_failures_words_is_refused():
    """A pass carries no error and no failure message (only the no-tests note): anything else is no verdict,
    which the orchestrator records as an infrastructure error, never as a pass."""
    from pydantic import ValidationError

    from conda_distro.engine.jobs import Envelope, TestedMsg

    assert TestedMsg(ok=True).ok and TestedMsg(ok=True, message="no tests", no_tests=True).no_tests
    assert not TestedMsg(ok=False, message="test 0 failed: AssertionError").ok
    for bad in ({"ok": True, "message": "test 0 failed: AssertionError"}, {"ok": True, "error": True}):
        with pytest.raises(ValidationError):
            TestedMsg(**bad)
        with pytest.raises(ValidationError):
            Envelope.model_validate_json(Envelope(msg=TestedMsg(ok=False)).model_dump_json()
                                         .replace('"ok":false', '"ok":true').replace('"message":null', '"message":"x"'))


@pytest.mark.slow
def test_a_damaged_release_view_stamp_makes_the_view_again(built_world, capsys):
    """A release view's stamp (``.source.json``: which pytorch file the view holds) written by a command killed
    with -9 mid-write is a damaged cache: the next build makes the view again, it does not stop on it."""
    stamps = sorted((built_world / "build" / "release-views").glob("*/.source.json"))
    assert stamps
    for p in stamps:
        text = p.read_text()
        p.write_text(text[: len(text) // 2])  # (what a kill mid-write left)
    code, doc = run_json_at(capsys, built_world, "build", "tensorutils", "--pytorch", "2.6.0")
    assert code == 0, doc
    made = [json.loads(p.read_text()) for p in stamps if p.read_text().endswith("}")]
    assert made and all(m["url"].startswith((built_world / "upstream").as_uri()) for m in made)


@pytest.mark.slow
def test_a_file_staging_lost_is_rebuilt_and_its_index_entry_follows(built_world, capsys):
    """Staging's index names a file that is gone (what `promote` and `excuses` then advise: build it again).
    The rebuild's file has other bytes; before, the index kept the old entry (an index after an intake only
    adds new names), so the package stayed "not tested: sha256 differs" however often it was built."""
    from conda_distro.channels import LocalChannel

    staging = built_world / "build" / "channels" / "staging"
    [old] = [f for f in LocalChannel(staging).list_files().values() if f.name == "tensorutils"]
    (staging / old.artifact).unlink()
    code, doc = run_json_at(capsys, built_world, "build", "tensorutils", "--pytorch", "2.6.0")
    assert code == 0, doc
    [new] = [f for f in LocalChannel(staging).list_files().values() if f.name == "tensorutils"]
    assert (staging / new.artifact).is_file() and new.sha256 == sha256(staging / new.artifact)

