"""Staging's life cycle: `prune` removes the builds that can never be promoted, promote's exit code and the
status page reflect only holds a person can act on, and the three agree on every package.

The end-to-end test plays a few days of ordinary use on the sandbox world (real builds, real solves):
recipes removed, a build number bumped, a sweep-like try reverted; the plan tests pin the rules.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import git
import pytest
from support.helpers import run_cli_at, run_json_at

from conda_distro.channels import ChannelFile
from conda_distro.gate.holds import HoldClass, HoldReason
from conda_distro.gate.promote import PlanInputs, TestMatrix, plan_gate
from conda_distro.gate.prune import plan_prune
from conda_distro.gate.staleness import RecipeOutput, StalenessInputs, stale_builds
from conda_distro.state.results import ArtifactResults
from conda_distro.state.results import TestRecord as Run

STAGING = Path("build/channels/staging")
RESULTS = Path("build/results")
PAIRS = [("2.5.1", "cpu"), ("2.5.1", "cuda")]
T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
HERE = {"recipes/foo": "a" * 64, "recipes/bar": "b" * 64, "recipes/baz": "c" * 64}


def cf(name, version="1.0", bn=0, sha="1", depends=("pytorch >=2.5,<2.6",)) -> ChannelFile:
    return ChannelFile("noarch", f"{name}-{version}-h0_{bn}.conda", name, version, f"h0_{bn}", bn, sha * 64,
                       tuple(depends))


def res(f: ChannelFile, recipe_hash: str | None, status="passed", against=None) -> ArtifactResults:
    recipe = f"recipes/{f.name}"
    recipes = {recipe: recipe_hash} if recipe_hash else {}
    return ArtifactResults(artifact=f.artifact, name=f.name, version=f.version, sha256=f.sha256, depends=list(f.depends),
                           recipe=recipe if recipe_hash else None, recipe_hash=recipe_hash,
                           tests=[Run(name=f.name, artifact=f.artifact, pytorch=r, variant=v, status=status, date=T0,
                                      recipes=recipes, against=against or {}, log=f"/nowhere/{f.name}-{r}-{v}.log")
                                  for r, v in PAIRS])


def inputs(staging, main, results, outputs, retired=frozenset()):
    st = {f.artifact: f for f in staging}
    mn = {f.artifact: f for f in main}
    rs = {r.artifact: r for r in results}
    stale = stale_builds(StalenessInputs(st, mn, rs, HERE, outputs, retired))
    return PlanInputs(st, mn, rs, {}, TestMatrix("pytorch", ("2.5.1",), ("cpu", "cuda")), recipes=HERE, stale=stale)


def test_staleness_superseded_reverted_other_recipes_and_untested():
    outputs = {"foo": RecipeOutput("recipes/foo", "1.1", 0), "bar": RecipeOutput("recipes/bar", "2.0", 0),
               "baz": RecipeOutput("recipes/baz", "3.0", 1)}
    foo10, foo11 = cf("foo", "1.0"), cf("foo", "1.1", sha="2")  # 1.0 built before the bump: superseded
    bar_try = cf("bar", "2.0", bn=1, sha="3")  # a sweep's try, put back: the recipe says build number 0
    bar_pr = cf("bar", "2.1", sha="4")  # a PR branch built here
    baz_lost = cf("baz", "3.0", bn=0, sha="5")  # no results, not what the recipe makes (build number 1)
    baz_new = cf("baz", "3.0", bn=1, sha="6")  # no results, what the recipe makes: `build` tests it
    plan_in = inputs([foo10, foo11, bar_try, bar_pr, baz_lost, baz_new],
                     [], [res(foo10, "0" * 64), res(foo11, "a" * 64), res(bar_try, "9" * 64), res(bar_pr, "8" * 64)],
                     outputs)
    assert {a.split("/")[1]: s.reason.value for a, s in plan_in.stale.items()} == {
        "foo-1.0-h0_0.conda": "superseded", "bar-2.0-h0_1.conda": "reverted",
        "bar-2.1-h0_0.conda": "not-from-this-checkout", "baz-3.0-h0_0.conda": "not-from-this-checkout"}
    gate = plan_gate(plan_in)
    # stale builds are held with their reason, class stale, advice prune; they alone do not make it exit 1
    assert [f.artifact for f in gate.promote] == [foo11.artifact]
    held = {h.artifact: h for h in gate.held}
    assert {h.hold_class for h in held.values()} == {HoldClass.STALE}
    assert all("conda-distro prune" in h.what_to_do for h in held.values())
    assert gate.untracked == [baz_new.artifact] and gate.exit_code == 0
    # prune removes exactly them (and their results), keeps the candidate and the untested build
    p = plan_prune(plan_in, gate)
    assert {i.artifact: i.reason for i in p.removed} == {a: s.reason.value for a, s in plan_in.stale.items()}
    assert sorted(p.results) == sorted([foo10.artifact, bar_try.artifact, bar_pr.artifact])
    assert {i.artifact: i.reason for i in p.kept} == {foo11.artifact: "candidate", baz_new.artifact: "untested"}


def test_prune_keeps_what_a_candidate_needs_and_what_main_holds():
    outputs = {"foo": RecipeOutput("recipes/foo", "2.0", 0), "bar": RecipeOutput("recipes/bar", "1.0", 0)}
    foo1, foo2 = cf("foo", "1.0"), cf("foo", "2.0", sha="2")
    bar = cf("bar", "1.0", sha="3", depends=("pytorch >=2.5,<2.6", "foo >=1,<2"))  # needs the old foo
    in_main = cf("baz", "1.0", sha="4")
    orphan = cf("gone", "1.0", sha="5")
    plan_in = inputs([foo1, foo2, bar, in_main], [in_main],
                     [res(foo1, "0" * 64), res(foo2, "a" * 64), res(bar, "b" * 64, against={"foo": "foo-1.0-h0_0"}),
                      res(orphan, "0" * 64)], outputs)
    assert set(plan_in.stale) == {foo1.artifact}  # superseded by foo 2.0 ...
    p = plan_prune(plan_in, plan_gate(plan_in))
    kept = {i.artifact: i for i in p.kept}
    assert kept[foo1.artifact].reason == "needed" and "bar-1.0-h0_0.conda needs 'foo >=1,<2'" in kept[foo1.artifact].detail
    assert kept[in_main.artifact].reason == "in-main"
    assert [i.artifact for i in p.removed] == [orphan.artifact] and p.results == [orphan.artifact]
    assert not p.remove  # ... but bar needs it: kept


def test_every_hold_reason_has_a_class_and_advice():
    for reason in HoldReason:
        assert isinstance(reason.hold_class, HoldClass)
        from conda_distro.gate.holds import default_advice

        assert default_advice(reason, "foo", ("bar",)).strip()
    counted = {r for r in HoldReason if r.is_failure}
    assert HoldReason.SUPERSEDED not in counted and HoldReason.NOT_FROM_THIS_CHECKOUT not in counted
    assert {HoldReason.TEST_FAILED, HoldReason.WAITING, HoldReason.BLOCKED_BY_HINT} <= counted


# ---------------------------------------------------------------------------------------------
# end to end on the sandbox world


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def localize_logs(world: Path) -> None:
    """The copied world's results name the template's logs: point them at the world's own copies."""
    from conda_distro.state.results import ResultsStore

    store = ResultsStore(world / RESULTS)
    for r in store.all():
        tests = [t.model_copy(update={"log": str(world / "build" / "logs" / t.log.split("/build/logs/", 1)[1])})
                 if t.log and "/build/logs/" in t.log else t for t in r.tests]
        store.put(r.model_copy(update={"tests": tests}))


def staged(world: Path) -> set[str]:
    out = set()
    for rd in (world / STAGING).glob("*/repodata.json"):
        doc = json.loads(rd.read_text())
        for key in ("packages", "packages.conda"):
            out |= {f"{rd.parent.name}/{fn}" for fn in doc.get(key) or {}}
    return out


@pytest.mark.slow
def test_days_of_ordinary_use_then_prune_and_promote_exits_0(built_world: Path, capsys, tmp_path):
    world = built_world
    repo = git.Repo(world)
    localize_logs(world)
    # day 1: the packages whose tests fail on purpose are dropped from the distribution (recipes removed)
    repo.git.rm("-r", "-q", "recipes/fastquant", "recipes/quantserve", "recipes/hookprofiler")
    repo.index.commit("Drop fastquant, quantserve and hookprofiler")
    # day 2: trainloop's build number is bumped and rebuilt: its first build is superseded
    edit(world / "recipes/trainloop/recipe.yaml", "number: 0", "number: 1")
    repo.git.add("-A")
    repo.index.commit("trainloop: rebuild")
    # day 3: a try of textmetrics (a sweep-like pin and build number bump) is built, then put back
    edit(world / "recipes/textmetrics/recipe.yaml", "number: 0", "number: 1")
    code, _ = run_json_at(capsys, world, "build", "textmetrics", "trainloop")
    assert code == 0
    repo.git.checkout("--", "recipes/textmetrics")
    before = staged(world)
    by_name = {a.split("/")[1].rsplit("-", 2)[0]: a for a in before}
    tried = next(a for a in before if a.split("/")[1].startswith("textmetrics-") and a.endswith("_1.conda"))
    trainloop_old = next(a for a in before if a.split("/")[1].startswith("trainloop-") and a.endswith("_0.conda"))

    # the gate, the excuses and the status page agree: those builds are stale, and hold nothing
    code, plan = run_json_at(capsys, world, "promote", "--dry-run")
    held = {h["artifact"]: h for h in plan["held"]}
    stale = {a: h["reason"] for a, h in held.items() if h["class"] == "stale"}
    dropped = {by_name[n] for n in ("fastquant", "quantserve", "hookprofiler") if n in by_name}  # (quantserve: blocked)
    assert len(dropped) == 2
    assert stale == {**dict.fromkeys(dropped, "not-from-this-checkout"), trainloop_old: "superseded",
                     tried: "reverted"}, held
    assert all("conda-distro prune" in h["advice"] for a, h in held.items() if a in stale)
    # the only hold a person can act on: evalsuite was re-tested with the try of textmetrics (a build of a
    # parent re-tests its dependents), so a build must re-test it with this checkout's recipes
    live = {h["name"]: h for h in plan["held"] if h["class"] != "stale"}
    assert {n: (h["reason"], h["class"]) for n, h in live.items()} == \
        {"evalsuite": ("tested-with-other-recipes", "waiting")}
    assert code == 1 and not plan["ok"]
    code, ex = run_json_at(capsys, world, "excuses")
    assert code == 1 and {b["artifact"] for b in ex["stale"]} == set(stale)
    assert {c["name"]: c["verdict"] for c in ex["candidates"] if c["verdict"] != "promote"} == {"evalsuite": "waiting"}
    assert not {c["name"] for c in ex["candidates"]} & {"fastquant", "quantserve", "hookprofiler"}
    site = tmp_path / "site"
    assert run_cli_at(capsys, world, "status", "--out", str(site))[0] == 0
    html = (site / "index.html").read_text()
    for name in ("fastquant", "quantserve", "hookprofiler"):
        row = re.search(rf'<tr data-package="{name}" data-source="staging"[^>]*>.*?</tr>', html, re.S)
        assert row is None or "awaiting promotion" not in row.group(0)
    # one classification: every staging row says the gate's verdict of that package
    rows = {n: v for n, v in re.findall(r'<tr data-package="([\w-]+)" data-source="staging".*?data-verdict="([\w-]*)"',
                                        html, re.S) if v}
    verdicts = {c["name"]: c["verdict"] for c in ex["candidates"]}
    assert rows and rows == {n: verdicts.get(n) for n in rows}
    assert rows["evalsuite"] == "waiting" and "awaiting promotion" not in re.search(
        r'<tr data-package="evalsuite" data-source="staging".*?</tr>', html, re.S).group(0)
    assert plan["counts"]["stale"] == len(stale) and plan["counts"]["waiting"] == 1
    assert all(f'data-artifact="{a}"' in html for a in stale)  # listed apart as stale

    # prune --dry-run changes nothing; prune removes exactly the stale builds with their results and logs
    results_before = sorted(p.name for p in (world / RESULTS).glob("*.json"))
    code, dry = run_json_at(capsys, world, "prune", "--dry-run")
    assert code == 0 and {i["artifact"] for i in dry["removed"]} == set(stale)
    assert staged(world) == before and sorted(p.name for p in (world / RESULTS).glob("*.json")) == results_before
    logs = [Path(t.log) for r in (world / RESULTS).glob("*.json") for t in
            ArtifactResults.model_validate_json(r.read_text()).tests
            if t.log and ArtifactResults.model_validate_json(r.read_text()).artifact in stale]
    assert logs and all(p.is_file() for p in logs)
    code, done = run_json_at(capsys, world, "prune")
    assert code == 0 and {i["reason"] for i in done["removed"]} == {"not-from-this-checkout", "superseded", "reverted"}
    assert staged(world) == before - set(stale)
    assert not any((world / STAGING / a).exists() for a in stale)
    assert not any((world / RESULTS / (a.replace("/", "__") + ".json")).exists() for a in stale)
    assert not any(p.exists() for p in logs) and done["logs_removed"] >= len(set(logs))
    assert not (world / "build" / "prune.journal.json").exists()
    assert json.loads((world / "build" / "excuses.json").read_text())["stale"] == []  # the status page's view too
    kept = {i["artifact"]: i for i in done["kept"]}
    assert set(kept) == staged(world) and {i["reason"] for i in kept.values()} <= {"candidate", "in-main", "needed"}
    # a second run has nothing to do (it converges)
    code, again = run_json_at(capsys, world, "prune")
    assert code == 0 and again["removed"] == []
    # follow evalsuite's advice as written: it unblocks it
    advice = live["evalsuite"]["advice"]
    command = re.match(r"`conda-distro ([^`]+)`", advice)
    assert command, advice
    code, _ = run_json_at(capsys, world, *command.group(1).split())
    assert code == 0
    # promote takes everything that is left and exits 0
    code, out = run_json_at(capsys, world, "promote")
    assert code == 0 and not [h for h in out["held"] if h["class"] != "done"]
    assert {a["artifact"] for a in out["promoted"]} == staged(world)


# ---------------------------------------------------------------------------------------------
# prune on a small real channel (tiny rattler-build packages): journal, kill -9, bad input


def small_world(template: Path, tmp_path: Path) -> tuple[Path, str]:
    """test_promote's repository (staging of tiny real packages, with results), after eps' recipe was
    edited: its build is not from this checkout any more. Returns the root and eps' artifact."""
    from test_promote import make_root

    root = make_root(template, tmp_path)
    (root / "recipes" / "eps" / "recipe.yaml").write_text((root / "recipes" / "eps" / "recipe.yaml").read_text() + "# edited\n")
    eps = next(a for a in staged(root) if a.split("/")[1].startswith("eps-"))
    return root, eps


def test_prune_removes_the_file_its_index_entry_and_results_then_converges(template, tmp_path, capsys):
    root, eps = small_world(template, tmp_path)
    code, dry = run_json_at(capsys, root, "prune", "--dry-run")
    assert code == 0 and [(i["artifact"], i["reason"]) for i in dry["removed"]] == [(eps, "not-from-this-checkout")]
    assert eps in staged(root)
    code, out, _ = run_cli_at(capsys, root, "prune")
    assert code == 0 and f"removed  {eps}  not-from-this-checkout" in out
    assert eps not in staged(root) and not (root / STAGING / eps).exists()
    assert not (root / RESULTS / (eps.replace("/", "__") + ".json")).exists()
    assert not (root / "build" / "prune.journal.json").exists()
    code, again = run_json_at(capsys, root, "prune")
    assert code == 0 and again["removed"] == [] and {i["reason"] for i in again["kept"]} <= {"candidate", "untested"}


def test_a_prune_killed_after_unlisting_is_completed_by_the_next_run(template, tmp_path):
    import os
    import subprocess
    import sys

    root, eps = small_world(template, tmp_path)
    for step in ("prune-after-journal", "prune-after-unlist", "prune-after-files"):
        env = {**os.environ, "CONDA_DISTRO_TEST_CRASH_AT": step}
        killed = subprocess.run([sys.executable, "-m", "conda_distro", "prune", "--root", str(root)], env=env,
                                capture_output=True, text=True, timeout=300)
        assert killed.returncode == -9, killed.stderr
        if step == "prune-after-journal":
            assert (root / "build" / "prune.journal.json").is_file() and eps in staged(root)
        else:  # the index never names a missing file
            assert eps not in staged(root) and (root / "build" / "prune.journal.json").is_file()
            break
    rerun = subprocess.run([sys.executable, "-m", "conda_distro", "prune", "--root", str(root), "--format", "json"],
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0 and "Traceback" not in rerun.stderr
    assert json.loads(rerun.stdout)["completed"] == [eps]
    assert not (root / STAGING / eps).exists() and not (root / "build" / "prune.journal.json").exists()
    assert not (root / RESULTS / (eps.replace("/", "__") + ".json")).exists()


def test_a_corrupt_journal_is_bad_input(template, tmp_path, capsys):
    root, eps = small_world(template, tmp_path)
    (root / "build" / "prune.journal.json").write_text('{"files": 3}')
    code, out, err = run_cli_at(capsys, root, "prune")
    assert code == 2 and "prune.journal.json" in err and "Traceback" not in err
    assert eps in staged(root) and not (root / STAGING / ".conda-distro.lock").exists()
