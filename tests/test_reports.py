"""`report unmaintained` on a dated scenario, and the retirement round trip (request records, --force).

The scenario (:func:`make_scenario`, also used by test_status_page.py) is a git repository whose commits
have controlled dates and authors, plus a hand-written channel_state/ ledger. Dates are relative to
``AS_OF`` (2025-06-01); grace period 60 days. pytorch 2.4.1 is in distro.yaml from the first commit
(AS_OF-250), 2.5.1 is added at AS_OF-130, 2.6.0 at AS_OF-30.

=========  =====================  ==========================================  ================================
package    pin                    ledger (artifacts in main)                  as of AS_OF
=========  =====================  ==========================================  ================================
fine       pytorch >=2.4,<2.7     passes 2.4.1, 2.5.1, 2.6.0                  fine
fresh      pytorch >=2.4,<2.6     passes 2.4.1, 2.5.1; not 2.6.0 (30 days)    within grace: not reported
stale      pytorch >=2.4,<2.5     passes 2.4.1 only; last commit AS_OF-200    misses 2.5.1 130 days: retire
active     pytorch >=2.4,<2.6     passes 2.4.1 only; last commit AS_OF-10     misses 2.5.1 130 days: ping
failing    pytorch >=2.4,<2.7     newest 2.0 fails 2.4.1 cpu since AS_OF-20   newest-fails: ping
addon      failing >=1,<3         2.4.1 cpu blocked (by failing)              fine (blocked is not failed)
gone       pytorch >=2.4,<2.5     retired AS_OF-45, request record            listed as retired, with record
=========  =====================  ==========================================  ================================

A commit to recipes/stale/ at AS_OF+5 and tests after a report's date must be ignored by ``--as-of``.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import git
import pytest
import yaml
from support.helpers import recorded_env, with_provenance
from support.repos import clean_recipe_text

from conda_distro.channels import LocalChannel
from conda_distro.cli import main as cli_main
from conda_distro.state.ledger import ArtifactEntry, Ledger, PackageState, Retirement, TestEvidence
from conda_distro.state.records import RecordEvidence, RetirementRecord, RetirementRecords
from conda_distro.state.results import ArtifactResults, ResultsStore
from conda_distro.state.results import TestRecord as Run

AS_OF = dt.date(2025, 6, 1)
RELEASES = ("2.4.1", "2.5.1", "2.6.0")
VARIANTS = ("cpu", "cuda")
SHA = "ab" * 32


def day(offset: int, hour: int = 12) -> dt.datetime:
    """AS_OF + ``offset`` days at ``hour``:00 UTC."""
    return dt.datetime.combine(AS_OF + dt.timedelta(days=offset), dt.time(hour), dt.UTC)


D1, D2, D3 = day(-250), day(-130), day(-30)  # when 2.4.1, 2.5.1, 2.6.0 were added to distro.yaml

# folder -> (pytorch pin, other run requirements, maintainers)
RECIPES = {
    "fine": ("pytorch >=2.4,<2.7", [], ["fiona"]),
    "fresh": ("pytorch >=2.4,<2.6", [], ["fred"]),
    "stale": ("pytorch >=2.4,<2.5", [], ["sam", "sue"]),
    "active": ("pytorch >=2.4,<2.6", [], ["ada"]),
    "failing": ("pytorch >=2.4,<2.7", [], ["fay"]),
    "addon": ("pytorch >=2.4,<2.7", ["failing >=1,<3"], ["al"]),
    "gone": ("pytorch >=2.4,<2.5", [], ["gus"]),
}


def recipe_text(name: str, pin: str, run: list[str], maintainers: list[str]) -> str:
    text = clean_recipe_text(name, version="1.0", pytorch=pin, run=run)
    return text.replace("    - octocat\n", "".join(f"    - {m}\n" for m in maintainers))


def distro_yaml(releases: list[str]) -> str:
    return yaml.safe_dump({
        "name": "scenario-distro",
        "channels": {"upstream": ["conda-forge"], "staging": "build/channels/staging", "main": "build/channels/main"},
        "pytorch": {"name": "pytorch", "releases": releases, "variants": list(VARIANTS)},
        "platforms": ["linux-64"],
        "policy": {"unmaintained_grace_days": 60},
    }, sort_keys=False)


def commit(repo: git.Repo, files: dict[str, str], message: str, author: str, when: dt.datetime, append=False) -> str:
    root = Path(repo.working_tree_dir)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(path.read_text() + text if append else text)
    repo.index.add(list(files))
    actor = git.Actor(author, f"{author.split()[0].lower()}@example.org")
    return repo.index.commit(message, author=actor, committer=actor, author_date=when,
                             commit_date=when).hexsha


def touch(name: str, note: str) -> dict[str, str]:
    return {f"recipes/{name}/recipe.yaml": f"# {note}\n"}


def make_git_history(root: Path) -> dict[str, str]:
    """The dated commits; returns label -> sha."""
    repo = git.Repo.init(root)
    recipes = {f"recipes/{n}/recipe.yaml": recipe_text(n, *spec) for n, spec in RECIPES.items()}
    shas = {"initial": commit(repo, {"distro.yaml": distro_yaml(["2.4.1"]), **recipes}, "Initial distribution",
                              "Alice Founder", D1)}
    shas["stale"] = commit(repo, touch("stale", "tidy"), "stale: tidy the recipe", "Sam Stale", day(-200), append=True)
    shas["2.5.1"] = commit(repo, {"distro.yaml": distro_yaml(["2.4.1", "2.5.1"])}, "Add pytorch 2.5.1",
                           "Release Bot", D2)
    shas["fresh"] = commit(repo, touch("fresh", "admit 2.5"), "fresh: admit pytorch 2.5", "Fred Fresh", day(-125),
                           append=True)
    shas["2.6.0"] = commit(repo, {"distro.yaml": distro_yaml(list(RELEASES))}, "Add pytorch 2.6.0", "Release Bot", D3)
    shas["fine"] = commit(repo, touch("fine", "admit 2.6"), "fine: admit pytorch 2.6", "Fiona Fine", day(-25),
                          append=True)
    shas["active"] = commit(repo, touch("active", "work on 2.5"), "active: start on pytorch 2.5", "Ada Active",
                            day(-10), append=True)
    shas["future"] = commit(repo, touch("stale", "late"), "stale: a commit after AS_OF", "Sam Stale", day(5),
                            append=True)
    return shas


def runs(releases, date: dt.datetime, status: str = "passed", variants=VARIANTS) -> list[TestEvidence]:
    return [TestEvidence(release=r, variant=v, status=status, date=date) for r in releases for v in variants]


def artifact(name: str, version: str, pin: str, promoted: dt.datetime, tests: list[TestEvidence],
             retired: Retirement | None = None) -> ArtifactEntry:
    return ArtifactEntry(artifact=f"noarch/{name}-{version}-h0_0.conda", sha256=SHA, version=version, build="h0_0",
                         build_number=0, depends=["python >=3.10", pin], channel="build/channels/main",
                         promoted_at=promoted, commit=None, tests=tests, retired=retired)


GONE_RETIREMENT = Retirement(at=day(-45), reason="unmaintained: misses pytorch 2.5.1", by="Release Manager")


def ledger_states() -> list[PackageState]:
    p24, p25, p26 = "pytorch >=2.4,<2.5", "pytorch >=2.4,<2.6", "pytorch >=2.4,<2.7"
    arts = {
        "fine": [artifact("fine", "1.0", p26, D1 + dt.timedelta(days=5),
                          runs(["2.4.1"], D1 + dt.timedelta(days=5)) + runs(["2.5.1"], D2 + dt.timedelta(days=5))
                          + runs(["2.6.0"], D3 + dt.timedelta(days=5)))],
        "fresh": [artifact("fresh", "1.0", p24, D1 + dt.timedelta(days=5), runs(["2.4.1"], D1 + dt.timedelta(days=5))),
                  artifact("fresh", "1.1", p25, D2 + dt.timedelta(days=10),
                           runs(["2.4.1", "2.5.1"], D2 + dt.timedelta(days=10)))],
        "stale": [artifact("stale", "1.0", p24, D1 + dt.timedelta(days=5), runs(["2.4.1"], D1 + dt.timedelta(days=5)))],
        "active": [artifact("active", "1.0", p24, D1 + dt.timedelta(days=5), runs(["2.4.1"], D1 + dt.timedelta(days=5)))],
        "failing": [
            artifact("failing", "1.0", p24, D1 + dt.timedelta(days=5), runs(["2.4.1"], D1 + dt.timedelta(days=5))),
            artifact("failing", "2.0", p26, D2 + dt.timedelta(days=20),
                     runs(["2.4.1", "2.5.1"], D2 + dt.timedelta(days=20)) + runs(["2.6.0"], D3 + dt.timedelta(days=5))
                     + runs(["2.4.1"], day(-20), "failed", ["cpu"]) + runs(["2.4.1"], day(-10), "failed", ["cpu"])),
        ],
        "addon": [artifact("addon", "1.0", p26, D2 + dt.timedelta(days=20),
                           runs(["2.4.1", "2.5.1"], D2 + dt.timedelta(days=20)) + runs(["2.6.0"], D3 + dt.timedelta(days=5))
                           + runs(["2.4.1"], day(-20), "blocked", ["cpu"]))],
        "gone": [artifact("gone", "1.0", p24, D1 + dt.timedelta(days=5), runs(["2.4.1"], D1 + dt.timedelta(days=5)),
                          retired=GONE_RETIREMENT)],
    }
    arts["addon"][0].depends.append("failing >=1,<3")
    return [PackageState(schema_version=1, name=n, artifacts=a) for n, a in arts.items()]


def write_ledger(root: Path) -> None:
    ledger = Ledger(root / "channel_state")
    for state in ledger_states():
        ledger.save(state)
    RetirementRecords(root / "channel_state").write(RetirementRecord(
        name="gone", at=GONE_RETIREMENT.at, by=GONE_RETIREMENT.by, reason=GONE_RETIREMENT.reason,
        artifacts=["noarch/gone-1.0-h0_0.conda"], evidence=RecordEvidence()))


def write_sweep(root: Path) -> None:
    folder = root / "build" / "sweep"
    folder.mkdir(parents=True)
    (folder / "pytorch-2.6.0.json").write_text(json.dumps({"release": "2.6.0", "packages": [
        {"name": "active", "status": "failed", "reason": "test failed on pytorch 2.6.0 (cpu)", "old_pin": "x"},
        {"name": "fine", "status": "bumped"}]}))


def make_scenario(root: Path) -> Path:
    make_git_history(root)
    write_ledger(root)
    write_sweep(root)
    return root


@pytest.fixture(scope="module")
def scenario_template(tmp_path_factory) -> Path:
    return make_scenario(tmp_path_factory.mktemp("scenario") / "distro")


@pytest.fixture()
def scenario(scenario_template, tmp_path) -> Path:
    return Path(shutil.copytree(scenario_template, tmp_path / "distro", symlinks=True))


def report(root: Path, *args: str, capsys, fmt: str = "json") -> tuple[int, dict | str]:
    code = cli_main(["report", "unmaintained", "--root", str(root), "--format", fmt, *args])
    out = capsys.readouterr().out
    return code, (json.loads(out) if fmt == "json" else out)


def summary(doc: dict) -> dict[str, tuple[str, list[tuple]]]:
    return {p["name"]: (p["action"], [(r["kind"], r["release"], r["variant"], r["days"]) for r in p["reasons"]])
            for p in doc["packages"]}


# ---------------------------------------------------------------------------------------------
# report unmaintained


def test_who_is_reported_as_of_the_date(scenario, capsys):
    code, doc = report(scenario, "--as-of", AS_OF.isoformat(), capsys=capsys)
    assert code == 1
    assert summary(doc) == {
        "stale": ("retire", [("missed-release", "2.5.1", None, 130)]),
        "active": ("ping", [("missed-release", "2.5.1", None, 130)]),
        "failing": ("ping", [("newest-fails", "2.4.1", "cpu", 20)]),
    }
    assert [p["name"] for p in doc["packages"]] == ["stale", "active", "failing"]  # retire first, then oldest
    assert doc["retired"] == [{"name": "gone", "at": "2025-04-17T12:00:00Z", "by": "Release Manager",
                               "reason": "unmaintained: misses pytorch 2.5.1", "artifacts": ["noarch/gone-1.0-h0_0.conda"],
                               "record": "channel_state/retirements/gone-20250417.yaml"}]
    assert (scenario / doc["retired"][0]["record"]).is_file()


@pytest.mark.parametrize(("as_of", "expected"), [
    # 2.6.0 not yet added; the failures are in the future; active's recent commit too, but 90 < 2 x 60
    (AS_OF - dt.timedelta(days=40), {"stale": ("ping", [("missed-release", "2.5.1", None, 90)]),
                                     "active": ("ping", [("missed-release", "2.5.1", None, 90)])}),
    # 2.5.1 is 30 days old: within the grace period, nobody lags
    (AS_OF - dt.timedelta(days=100), {}),
    # 2.6.0 is 70 days old: fresh now lags too; stale's commit of AS_OF+5 makes it active again (ping)
    (AS_OF + dt.timedelta(days=40), {
        "stale": ("ping", [("missed-release", "2.5.1", None, 170), ("missed-release", "2.6.0", None, 70)]),
        "active": ("ping", [("missed-release", "2.5.1", None, 170), ("missed-release", "2.6.0", None, 70)]),
        "failing": ("ping", [("newest-fails", "2.4.1", "cpu", 60)]),
        "fresh": ("ping", [("missed-release", "2.6.0", None, 70)])}),
])
def test_as_of_moves_the_clock(scenario, capsys, as_of, expected):
    code, doc = report(scenario, "--as-of", as_of.isoformat(), capsys=capsys)
    assert summary(doc) == expected
    assert code == (1 if expected else 0)
    assert doc["as_of"] == as_of.isoformat()


def test_retire_needs_twice_the_grace_and_inactivity(scenario, capsys):
    """At AS_OF+40 the newest failing streak is 60 days: still ping. At AS_OF+101 it is 121 days, and
    failing's recipe has not been touched since the first commit: retire."""
    _, doc = report(scenario, "--as-of", (AS_OF + dt.timedelta(days=101)).isoformat(), capsys=capsys)
    assert summary(doc)["failing"] == ("retire", [("newest-fails", "2.4.1", "cpu", 121)])
    assert summary(doc)["active"][0] == "retire"  # 2.5.1 missed for 231 days, last commit 111 days ago


def test_dropping_a_release_does_not_restart_the_lag_clock(scenario, capsys):
    """The window drops 2.4.1 and 2.5.1 at AS_OF-5. At AS_OF+75 the only reason left is 2.6.0 missed for 105
    days (< 2 x 60), but stale and active never passed 2.5.1: they have lagged since it was added (205 days)
    and no person touched them for the grace period: retire. fresh passed 2.5.1, so its lag began with
    2.6.0: ping. failing's broken 2.4.1 is no longer supported and it passes 2.6.0: not listed."""
    commit(git.Repo(scenario), {"distro.yaml": distro_yaml(["2.6.0"])}, "Drop pytorch 2.4.1, 2.5.1", "Release Bot",
           day(-5))
    _, doc = report(scenario, "--as-of", (AS_OF + dt.timedelta(days=75)).isoformat(), capsys=capsys)
    assert summary(doc) == {
        "stale": ("retire", [("missed-release", "2.6.0", None, 105)]),
        "active": ("retire", [("missed-release", "2.6.0", None, 105)]),
        "fresh": ("ping", [("missed-release", "2.6.0", None, 105)]),
    }
    since = {p["name"]: p["evidence"]["lagging_since"] for p in doc["packages"]}
    assert since == {"stale": D2.date().isoformat(), "active": D2.date().isoformat(), "fresh": None}


def test_json_evidence(scenario, capsys):
    _, doc = report(scenario, "--as-of", AS_OF.isoformat(), capsys=capsys)
    assert set(doc) == {"ok", "as_of", "grace_days", "releases", "packages", "retired"}
    assert doc["grace_days"] == 60
    assert doc["releases"] == [
        {"release": "2.4.1", "date": "2024-09-24T12:00:00Z", "source": doc["releases"][0]["source"]},
        {"release": "2.5.1", "date": "2025-01-22T12:00:00Z", "source": doc["releases"][1]["source"]},
        {"release": "2.6.0", "date": "2025-05-02T12:00:00Z", "source": doc["releases"][2]["source"]}]
    repo = git.Repo(scenario)
    added = {c.hexsha[:7] for c in repo.iter_commits(paths="distro.yaml")}
    assert all(r["source"].startswith("distro.yaml, commit ") and r["source"][-7:] in added for r in doc["releases"])
    by = {p["name"]: p for p in doc["packages"]}
    for p in doc["packages"]:
        assert set(p) == {"name", "maintainers", "reasons", "action", "evidence"}
    stale = by["stale"]
    assert stale["maintainers"] == ["sam", "sue"]
    ev = stale["evidence"]
    assert ev["missed_releases"] == [{"release": "2.5.1", "released": "2025-01-22",
                                      "release_source": doc["releases"][1]["source"], "since": "2025-01-22",
                                      "days_since": 130, "overdue_days": 70}]
    last = ev["last_commit"]  # the AS_OF+5 commit is in the future of the report
    assert (last["author"], last["date"][:10], last["days_ago"], last["summary"]) == (
        "Sam Stale", "2024-11-13", 200, "stale: tidy the recipe")
    assert last["sha"] == next(c.hexsha for c in repo.iter_commits(paths="recipes/stale") if c.summary == "stale: tidy the recipe")
    assert ev["inactive"] is True and ev["sweep"] is None and ev["failing"] == []
    assert ev["newest_artifact"] == {"artifact": "noarch/stale-1.0-h0_0.conda", "version": "1.0", "promoted_at": "2024-09-29"}
    assert [(t["release"], t["variant"], t["status"]) for t in ev["last_tests"]] == [("2.4.1", "cpu", "passed"),
                                                                                    ("2.4.1", "cuda", "passed")]
    active = by["active"]["evidence"]
    assert active["inactive"] is False and active["last_commit"]["author"] == "Ada Active"
    assert active["sweep"] == {"release": "2.6.0", "status": "failed", "reason": "test failed on pytorch 2.6.0 (cpu)",
                               "file": "build/sweep/pytorch-2.6.0.json"}
    failing = by["failing"]["evidence"]
    assert failing["failing"] == [{"artifact": "noarch/failing-2.0-h0_0.conda", "where": "main", "release": "2.4.1", "variant": "cpu",
                                   "since": "2025-05-12", "days": 20}]
    assert ("2.4.1", "cpu", "failed", "2025-05-22") in [(t["release"], t["variant"], t["status"], t["date"][:10])
                                                         for t in failing["last_tests"]]
    assert by["failing"]["reasons"][0]["message"] == \
        "newest artifact 2.0 fails against pytorch 2.4.1 (cpu) since 2025-05-12 (20 days)"


def test_markdown_is_an_issue_body(scenario, capsys):
    code, md = report(scenario, "--as-of", AS_OF.isoformat(), capsys=capsys, fmt="markdown")
    assert code == 1
    assert md.startswith("# Unmaintained packages as of 2025-06-01\n")
    rows = [line for line in md.splitlines() if line.startswith("| `")]
    tidy = next(c.hexsha for c in git.Repo(scenario).iter_commits(paths="recipes/stale") if c.summary.endswith("tidy the recipe"))
    assert rows[0] == f"| `stale` | @sam @sue | missed pytorch 2.5.1 (130 days) | 2024-11-13 ({tidy[:7]}, Sam Stale) | **retire** |"
    assert rows[1].startswith("| `active` | @ada | missed pytorch 2.5.1 (130 days) | 2025-05-22 (") and rows[1].endswith("| **ping** |")
    assert rows[2].startswith("| `failing` | @fay | fails on pytorch 2.4.1 cpu (20 days) |") and rows[2].endswith("| **ping** |")
    assert "## `stale`: retire\n\n@sam @sue\n" in md and "## `failing`: ping\n\n@fay\n" in md
    assert "- open release sweep: pytorch 2.6.0 `failed`: test failed on pytorch 2.6.0 (cpu)" in md
    assert rows[3] == ("| `gone` | 2025-04-17 | Release Manager | unmaintained: misses pytorch 2.5.1 | "
                       "[channel_state/retirements/gone-20250417.yaml](channel_state/retirements/gone-20250417.yaml) |")
    for name in ("fine", "fresh", "addon"):
        assert f"`{name}`" not in md and f"@{RECIPES[name][2][0]}" not in md
    assert "\n\n\n" not in md


def test_text_and_nothing_to_report(scenario, capsys):
    code, text = report(scenario, "--as-of", AS_OF.isoformat(), capsys=capsys, fmt="text")
    assert code == 1
    assert "  retire  stale  maintainers: @sam, @sue" in text and "  ping    failing  maintainers: @fay" in text
    assert "retired gone on 2025-04-17" in text and "channel_state/retirements/gone-20250417.yaml" in text
    code, md = report(scenario, "--as-of", "2025-02-21", capsys=capsys, fmt="markdown")
    assert code == 0 and "Nothing to do." in md and "| `" not in md


@pytest.mark.parametrize("bad", ["2025-13-01", "June 1st", "2025/06/01"])
def test_bad_date_exits_2_with_a_hint(scenario, capsys, bad):
    assert cli_main(["report", "unmaintained", "--root", str(scenario), "--as-of", bad]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "--as-of" in captured.err and "hint: write the date as YYYY-MM-DD" in captured.err


def test_without_git_release_dates_come_from_the_ledger(scenario, capsys):
    shutil.rmtree(scenario / ".git")
    _, doc = report(scenario, "--as-of", AS_OF.isoformat(), capsys=capsys)
    assert [(r["release"], r["date"][:10], r["source"]) for r in doc["releases"]] == [
        ("2.4.1", "2024-09-29", "first test in channel_state/"),
        ("2.5.1", "2025-01-27", "first test in channel_state/"),
        ("2.6.0", "2025-05-07", "first test in channel_state/")]
    # no git: no evidence of inactivity, so nobody is suggested for retirement
    assert summary(doc) == {"stale": ("ping", [("missed-release", "2.5.1", None, 125)]),
                            "active": ("ping", [("missed-release", "2.5.1", None, 125)]),
                            "failing": ("ping", [("newest-fails", "2.4.1", "cpu", 20)])}
    assert doc["packages"][0]["evidence"]["last_commit"] is None


# ---------------------------------------------------------------------------------------------
# retirement round trip on a real local main channel


def build_result(f, date: dt.datetime) -> ArtifactResults:
    tests = [Run(name=f.name, artifact=f.artifact, pytorch=r, variant=v, status="passed", date=date)
             for r in RELEASES for v in VARIANTS]
    return ArtifactResults(artifact=f.artifact, name=f.name, version=f.version, sha256=f.sha256,
                           depends=list(f.depends), tests=tests)


@pytest.fixture(scope="module")
def built_channel(tmp_path_factory) -> Path:
    """A staging channel with base (pytorch) and top (base): tiny noarch generic packages."""
    from support.channel_builds import build_package

    out = tmp_path_factory.mktemp("built") / "staging"
    build_package(out, "base", ["pytorch >=2.4,<2.7"])
    build_package(out, "top", ["base >=1.0,<2", "pytorch >=2.4,<2.7"])
    return out


@pytest.fixture()
def promoted(built_channel, tmp_path, capsys) -> Path:
    root = tmp_path / "distro"
    root.mkdir()
    from test_channels import write_upstream

    # promote solves installability against the upstream: a local one here (conda-forge is unreachable)
    (root / "distro.yaml").write_text(distro_yaml(list(RELEASES)).replace("- conda-forge", "- ./upstream"))
    write_upstream(root / "upstream")
    for name, run in (("base", []), ("top", ["base >=1.0,<2"])):
        (root / "recipes" / name).mkdir(parents=True)
        (root / "recipes" / name / "recipe.yaml").write_text(recipe_text(name, "pytorch >=2.4,<2.7", run, [f"{name}-dev"]))
    staging = shutil.copytree(built_channel, root / "build" / "channels" / "staging",
                              ignore=shutil.ignore_patterns("bld", ".tmp", "src_cache", "test", "broken"))
    store = ResultsStore(root / "build" / "results")
    files = LocalChannel(staging).list_files().values()
    for f in files:
        store.put(with_provenance(root, recorded_env(build_result(f, day(-300)), files)))
    assert cli_main(["promote", "--root", str(root)]) == 0
    capsys.readouterr()
    return root


def main_names(root: Path) -> set[str]:
    return {f.name for f in LocalChannel(root / "build" / "channels" / "main").list_files().values()}


def snapshot_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for folder in ("channel_state", "build/channels/main") for p in sorted((root / folder).rglob("*"))
            if p.is_file() and ".lock" not in p.name}


def test_retire_writes_a_request_record_and_the_report_links_it(promoted, capsys):
    root = promoted
    assert main_names(root) == {"base", "top"}
    ledger = Ledger(root / "channel_state")
    (entry,) = ledger.load("top").artifacts  # a later re-test failed: the record carries the report's entry
    failed = TestEvidence(release="2.6.0", variant="cuda", status="failed", date=day(-5))
    ledger.save(ledger.load("top").model_copy(update={"artifacts": [entry.model_copy(update={"tests": [*entry.tests, failed]})]}))

    code = cli_main(["retire", "top", "--reason", "fails on 2.6 and nobody answers", "--by", "Release Manager",
                     "--root", str(root), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["recipe_dependents"] == [] and doc["forced"] is False
    today = dt.datetime.now(dt.UTC)
    record_path = f"channel_state/retirements/top-{today:%Y%m%d}.yaml"
    assert doc["record"] == record_path
    record = yaml.safe_load((root / record_path).read_text())
    assert record["name"] == "top" and record["by"] == "Release Manager"
    assert record["reason"] == "fails on 2.6 and nobody answers" and record["forced"] is False
    assert record["artifacts"] == [entry.artifact] and record["dependents"] == []
    assert record["at"][:10] == today.date().isoformat()
    unmaintained = record["evidence"]["unmaintained"]
    assert unmaintained["name"] == "top" and unmaintained["maintainers"] == ["top-dev"]
    assert [(r["kind"], r["release"], r["variant"]) for r in unmaintained["reasons"]] == [("newest-fails", "2.6.0", "cuda")]
    last = {(t["release"], t["variant"]): t["status"] for t in record["evidence"]["last_tests"]}
    assert last == {**{(r, v): "passed" for r in RELEASES for v in VARIANTS}, ("2.6.0", "cuda"): "failed"}

    (retired,) = ledger.load("top").artifacts
    assert retired.retired.reason == "fails on 2.6 and nobody answers" and retired.retired.by == "Release Manager"
    assert record["at"] == retired.retired.at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert main_names(root) == {"base"}
    repodata = json.loads((root / "build" / "channels" / "main" / "noarch" / "repodata.json").read_text())
    assert [fn for fn in repodata["packages.conda"] if fn.startswith("top-")] == []

    code, rep = report(root, capsys=capsys)
    assert [r["name"] for r in rep["retired"]] == ["top"] and rep["retired"][0]["record"] == record_path
    assert "top" not in [p["name"] for p in rep["packages"]]
    code, md = report(root, capsys=capsys, fmt="markdown")
    assert f"[{record_path}]({record_path})" in md

    # retiring it again is a no-op that points at the record
    assert cli_main(["retire", "top", "--reason", "again", "--root", str(root), "--format", "json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["retired"] == [] and again["record"] == record_path
    assert len(list((root / "channel_state" / "retirements").iterdir())) == 1


def test_retiring_a_dependency_is_refused_unless_forced(promoted, capsys):
    root = promoted
    before = snapshot_files(root)
    assert cli_main(["retire", "base", "--reason", "old", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "base is a dependency of distribution package(s): top" in err and "--force" in err
    assert snapshot_files(root) == before  # nothing written
    assert not (root / "channel_state" / "retirements").exists() and main_names(root) == {"base", "top"}

    assert cli_main(["retire", "base", "--reason", "old", "--by", "rm", "--force", "--root", str(root),
                     "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["forced"] is True and doc["recipe_dependents"] == ["top"]
    assert main_names(root) == {"top"}
    record = yaml.safe_load((root / doc["record"]).read_text())
    assert record["forced"] is True and record["dependents"] == ["top"]
    assert Ledger(root / "channel_state").load("base").artifacts[0].retired.by == "rm"


def test_retired_dependents_do_not_block(promoted, capsys):
    root = promoted
    assert cli_main(["retire", "top", "--reason", "first", "--root", str(root)]) == 0
    capsys.readouterr()
    assert cli_main(["retire", "base", "--reason", "then", "--root", str(root), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["forced"] is False and main_names(root) == set()
    names = sorted(p.name.split("-")[0] for p in (root / "channel_state" / "retirements").iterdir())
    assert names == ["base", "top"]


# ---------------------------------------------------------------------------------------------
# builds in staging, bot commits, the failing release, never-promoted packages


def stage(root: Path, name: str, version: str, outcomes: dict[tuple[str, str], str], date: dt.datetime,
          reason: str = "test 0 failed: Script failed with status 1: AssertionError") -> str:
    """A build of ``name`` in staging (build/results/) with these latest outcomes; returns its artifact."""
    art = f"noarch/{name}-{version}-h1_0.conda"
    tests = [Run(name=name, artifact=art, pytorch=r, variant=v, status=s, date=date,
                 reason=None if s == "passed" else reason, log=f"/ci/logs/{name}/{r}-{v}.test.log")
             for (r, v), s in outcomes.items()]
    ResultsStore(root / "build" / "results").put(ArtifactResults(
        artifact=art, name=name, version=version, sha256=SHA, depends=["pytorch >=2.4,<2.7"], tests=tests))
    return art


def everywhere(status: str, releases=RELEASES) -> dict[tuple[str, str], str]:
    return {(r, v): status for r in releases for v in VARIANTS}


def test_builds_awaiting_promotion_are_pending_not_retire(scenario, capsys):
    """Right after a sweep the new builds are in staging, not yet in main: stale's missed 2.5.1 is fixed by
    a build that passes everything, so stale is `pending` and its maintainers are not pinged."""
    art = stage(scenario, "stale", "1.1", everywhere("passed", RELEASES[:2]), day(-2))
    code, doc = report(scenario, "--as-of", AS_OF.isoformat(), capsys=capsys)
    by = {p["name"]: p for p in doc["packages"]}
    assert by["stale"]["action"] == "pending"
    (reason,) = by["stale"]["reasons"]
    assert reason["pending"] == art and reason["release"] == "2.5.1"
    assert "awaiting promotion" in reason["message"]
    assert by["stale"]["evidence"]["staged"]["promotable"] is True
    assert [p["name"] for p in doc["packages"]][-1] == "stale"  # pending last
    assert code == 1  # active and failing still lag
    _, md = report(scenario, "--as-of", AS_OF.isoformat(), capsys=capsys, fmt="markdown")
    assert "@sam" not in md and "## `stale`" not in md
    assert f"Awaiting promotion (a build in staging passes what main lacks; nothing for maintainers to do): `stale` ({art})" in md

    # a build that fails one test is held by promote: not pending, and the reason names that release
    stage(scenario, "stale", "1.1", {**everywhere("passed", RELEASES[:2]), ("2.5.1", "cuda"): "failed"}, day(-2))
    _, doc = report(scenario, "--as-of", AS_OF.isoformat(), capsys=capsys)
    stale = next(p for p in doc["packages"] if p["name"] == "stale")
    assert stale["action"] == "retire"
    assert [(r["kind"], r["release"], r["variants"], r["where"], r["pending"]) for r in stale["reasons"]] == [
        ("missed-release", "2.5.1", [], "main", None), ("newest-fails", "2.5.1", ["cuda"], "staging", None)]
    assert stale["reasons"][0]["message"].endswith(
        "its build 1.1 in staging passes it but cannot be promoted: it fails against pytorch 2.5.1 (cuda)")

    # nothing lags once only pending packages remain: exit 0
    code, _ = report(scenario, "--as-of", "2025-03-01", capsys=capsys)
    assert code == 0


def test_bot_commits_are_not_activity(scenario, capsys):
    repo = git.Repo(scenario)
    commit(repo, touch("stale", "bump build number"), "stale: rebuild", "github-actions[bot]", day(-3), append=True)
    commit(repo, touch("stale", "sweep"), "stale: admit pytorch 2.6", "conda-distro bot", day(-2), append=True)
    _, doc = report(scenario, "--as-of", AS_OF.isoformat(), capsys=capsys)
    stale = next(p for p in doc["packages"] if p["name"] == "stale")
    assert stale["action"] == "retire"
    assert stale["evidence"]["last_commit"]["author"] == "Sam Stale" and stale["evidence"]["bot_commits_ignored"] == 2
    assert stale["evidence"]["inactive"] is True

    # the list is configurable (distro.yaml policy.bot_authors): with none, those commits are activity
    doc_yaml = yaml.safe_load((scenario / "distro.yaml").read_text())
    doc_yaml["policy"]["bot_authors"] = ["conda-distro bot"]
    (scenario / "distro.yaml").write_text(yaml.safe_dump(doc_yaml, sort_keys=False))
    _, doc = report(scenario, "--as-of", AS_OF.isoformat(), capsys=capsys)
    stale = next(p for p in doc["packages"] if p["name"] == "stale")
    assert stale["action"] == "ping" and stale["evidence"]["last_commit"]["author"] == "github-actions[bot]"


def add_never_promoted(root: Path, name: str = "hooky") -> None:
    """A recipe added long ago by a person, never promoted: its build passes 2.4/2.5 and fails 2.6."""
    commit(git.Repo(root), {f"recipes/{name}/recipe.yaml": recipe_text(name, "pytorch >=2.4,<2.7", [], ["hank"])},
           f"Add {name}", "Hank Hook", day(-240))
    stage(root, name, "1.0", {**everywhere("passed", RELEASES[:2]), **everywhere("failed", RELEASES[2:])}, day(-25),
          reason="test 0 failed: Script failed with status 1: AssertionError: needs pytorch < 2.6")


def test_the_reason_names_the_release_that_fails(scenario, capsys):
    add_never_promoted(scenario)
    _, doc = report(scenario, "--as-of", AS_OF.isoformat(), capsys=capsys)
    hooky = next(p for p in doc["packages"] if p["name"] == "hooky")
    assert [(r["kind"], r["release"], r["variants"], r["where"], r["days"]) for r in hooky["reasons"]] == [
        ("missed-release", "2.4.1", [], "main", 240), ("missed-release", "2.5.1", [], "main", 130),
        ("newest-fails", "2.6.0", ["cpu", "cuda"], "staging", 25)]
    held = "its build 1.0 in staging passes it but cannot be promoted: it fails against pytorch 2.6.0 (cpu), 2.6.0 (cuda)"
    assert all(r["message"].endswith(held) for r in hooky["reasons"][:2])
    assert "(nothing of it was ever promoted to main)" in hooky["reasons"][0]["message"]
    failing = hooky["reasons"][2]
    assert failing["message"].startswith("its newest build 1.0 in staging fails against pytorch 2.6.0 (cpu, cuda)")
    assert "needs pytorch < 2.6" in failing["message"] and failing["log"] == "/ci/logs/hooky/2.6.0-cpu.test.log"
    assert hooky["evidence"]["never_promoted"] is True


def test_never_promoted_package_gets_remove_recipe_and_retire_says_so(scenario, capsys):
    add_never_promoted(scenario)
    later = AS_OF.isoformat()  # not in main for 240 days, no commit by a person for 240
    _, doc = report(scenario, "--as-of", later, capsys=capsys)
    hooky = next(p for p in doc["packages"] if p["name"] == "hooky")
    assert hooky["action"] == "remove-recipe"
    _, md = report(scenario, "--as-of", later, capsys=capsys, fmt="markdown")
    assert "| **remove-recipe** |" in md and "remove `recipes/hooky/`" in md

    LocalChannel(scenario / "build" / "channels" / "main").ensure_layout()
    before = snapshot_files(scenario)
    assert cli_main(["retire", "hooky", "--reason", "the report says so", "--root", str(scenario)]) == 2
    err = capsys.readouterr().err
    assert "hooky was never promoted to the main channel" in err and "nothing to retire" in err
    assert "hint: to drop it from the distribution, remove its recipe: git rm -r recipes/hooky/" in err
    assert snapshot_files(scenario) == before
