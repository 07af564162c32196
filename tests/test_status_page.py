"""`conda-distro status`: the static page for the dated scenario of test_reports.py, checked as rendered by
headless Chromium (Debian's ``chromium``; installed by the session fixture when missing).

Expected matrix as of AS_OF (releases 2.4.1 / 2.5.1 / 2.6.0 × cpu / cuda):
fine all passed; fresh passed up to 2.5.1, 2.6.0 not admitted by its pin (not-applicable); stale passed on
2.4.1 only, the rest not admitted; active passed on 2.4.1, 2.5.1 admitted by the recipe but without a
result (not-tested); failing fails 2.4.1 cpu; addon blocked on 2.4.1 cpu; gone is retired (nothing in main).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_reports import AS_OF, RELEASES, VARIANTS, add_never_promoted, day, everywhere, make_scenario, stage

from conda_distro.cli import main as cli_main

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"]

P, F, B, NA, NT = "passed", "failed", "blocked", "not-applicable", "not-tested"


def row(*statuses: str) -> dict[tuple[str, str], str]:
    """Six statuses in release-major order: 2.4.1 cpu, 2.4.1 cuda, 2.5.1 cpu, ..."""
    pairs = [(r, v) for r in RELEASES for v in VARIANTS]
    assert len(statuses) == len(pairs)
    return dict(zip(pairs, statuses, strict=True))


EXPECTED = {
    "fine": row(P, P, P, P, P, P),
    "fresh": row(P, P, P, P, NA, NA),
    "stale": row(P, P, NA, NA, NA, NA),
    "active": row(P, P, NT, NT, NA, NA),
    "failing": row(F, P, P, P, P, P),
    "addon": row(B, P, P, P, P, P),
    "gone": row(NT, NT, NA, NA, NA, NA),
}


# ---------------------------------------------------------------------------------------------
# headless Chromium


def _install_chromium() -> str | None:
    """apt-get install chromium; returns why it failed, or None."""
    if shutil.which("apt-get") is None:
        return "no apt-get on this machine"
    if os.geteuid() != 0:
        return "not root: cannot apt-get install chromium"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]):
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        if res.returncode != 0:
            return f"`{' '.join(cmd)}` failed: {(res.stderr or res.stdout).strip().splitlines()[-1:]}"
    return None


@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.exists():
        why = _install_chromium()
        if why or not CHROMIUM.exists():
            pytest.skip(f"headless Chromium unavailable: {why or 'installed, but /usr/bin/chromium is missing'}")
    return CHROMIUM


def run_chromium(chromium: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    profile.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(tmp_path)}
    return subprocess.run([str(chromium), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, env=env)


# ---------------------------------------------------------------------------------------------
# reading the page


class Page(HTMLParser):
    """The parts of the DOM the tests look at."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.cells: dict[tuple[str, str, str], dict[str, str]] = {}  # main rows
        self.staged: dict[tuple[str, str, str], dict[str, str]] = {}  # staging rows
        self.failures: list[dict[str, str]] = []  # rows of the failures list
        self.progress: dict[str, dict[str, str]] = {}
        self.excuses: dict[str, dict[str, str]] = {}  # package -> attributes (+ "group")
        self.links: list[tuple[str, str]] = []  # (href, text) of every <a>
        self._group: str | None = None
        self._a: str | None = None
        self.badges: dict[str, set[str]] = {}
        self.flagged: dict[str, str] = {}
        self.nodes: dict[str, str] = {}
        self.urls: list[tuple[str, str]] = []  # (tag, url) of every href/src
        self.scripts = 0
        self._row: str | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        classes = a.get("class", "").split()
        self.urls += [(tag, a[k]) for k in ("href", "src") if k in a]
        self.scripts += tag == "script"
        if tag == "tr" and "row" in classes:
            self._row = a["data-package"]
        if tag == "td" and "cell" in classes:
            key = (a["data-package"], a["data-release"], a["data-variant"])
            (self.staged if a.get("data-source") == "staging" else self.cells)[key] = {"class": a["class"], **a}
        if tag == "tr" and "failure" in classes:
            self.failures.append(a)
        if tag == "li" and "progress" in classes:
            self.progress[a["data-release"]] = a
        if tag == "div" and "excuse-group" in classes:
            self._group = a["data-blocked-by"]
        if tag == "article" and "excuse" in classes:
            self.excuses[a["data-package"]] = {**a, "group": self._group}
        if tag == "a":
            self._a = a.get("href", "")
            self.links.append((self._a, ""))

        if "badge" in classes and self._row and tag in ("a", "span"):
            self.badges.setdefault(self._row, set()).add(classes[1])
        if tag == "article" and "flagged" in classes:
            self.flagged[a["data-package"]] = a["data-action"]
        if tag == "g" and "node" in classes:
            self.nodes[a["data-package"]] = classes[1]

    def handle_data(self, data):
        if self._a is not None and data.strip():
            href, text = self.links[-1]
            self.links[-1] = (href, text + data.strip())

    def handle_endtag(self, tag):
        if tag == "tr":
            self._row = None
        if tag == "a":
            self._a = None

    def statuses(self) -> dict[str, dict[tuple[str, str], str]]:
        out: dict[str, dict[tuple[str, str], str]] = {}
        for (pkg, release, variant), attrs in self.cells.items():
            out.setdefault(pkg, {})[(release, variant)] = attrs["data-status"]
        return out


def png_info(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct byte values of the decompressed image data) of a PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


# ---------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The scenario's page as of AS_OF, written by the CLI."""
    root = make_scenario(tmp_path_factory.mktemp("status") / "distro")
    out = root.parent / "site"
    code = cli_main(["status", "--root", str(root), "--out", str(out), "--as-of", AS_OF.isoformat(), "--format", "json"])
    assert code == 0
    assert not (root / "build" / "channels").exists()  # the scenario has no channel: the page never needs one
    return out


# ---------------------------------------------------------------------------------------------
# tests


def test_writes_index_and_stylesheet(tmp_path, capsys):
    root = make_scenario(tmp_path / "distro")
    out = tmp_path / "pages" / "site"
    assert cli_main(["status", "--root", str(root), "--out", str(out), "--as-of", AS_OF.isoformat(),
                     "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in doc.items() if k != "progress"} == \
        {"ok": True, "written": [str(out / "index.html"), str(out / "style.css")]}
    assert [p["release"] for p in doc["progress"]] == ["2.4.1", "2.5.1", "2.6.0"]
    assert sorted(p.name for p in out.iterdir()) == ["index.html", "style.css"]
    assert cli_main(["status", "--root", str(root), "--out", str(out), "--as-of", AS_OF.isoformat()]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"wrote {out / 'index.html'}\nwrote {out / 'style.css'}\n")
    assert "2.6.0: 3 of 6 packages of the distribution admit and pass: active (pins exclude it);" in text


def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys):
    root = make_scenario(tmp_path / "distro")
    out = tmp_path / "site"
    assert cli_main(["status", "--root", str(root), "--out", str(out), "--as-of", "01/06/2025"]) == 2
    assert "hint: write the date as YYYY-MM-DD" in capsys.readouterr().err
    assert not out.exists()
    (tmp_path / "file").write_text("x")
    assert cli_main(["status", "--root", str(root), "--out", str(tmp_path / "file")]) == 2


def test_page_is_self_contained(site):
    """No external asset (stylesheet, script, image): links to GitHub profiles and files only."""
    html = (site / "index.html").read_text()
    page = Page(html)
    assert page.scripts == 0
    assert ("link", "style.css") in page.urls
    assets = [(t, u) for t, u in page.urls if t != "a"]
    assert assets == [("link", "style.css")]
    external = [u for t, u in page.urls if t == "a" and ("://" in u or u.startswith("//"))]
    assert external and all(u.startswith("https://github.com/") for u in external)
    assert all(u.startswith(("#", "https://github.com/", "logs/")) for t, u in page.urls if t == "a")
    assert "url(" not in (site / "style.css").read_text().replace("url(#arrow)", "")
    assert "@import" not in (site / "style.css").read_text()


def test_page_matrix_in_the_rendered_dom(site, chromium, tmp_path):
    res = run_chromium(chromium, tmp_path, "--dump-dom", (site / "index.html").as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    page = Page(res.stdout)
    assert page.statuses() == EXPECTED
    for (pkg, release, variant), attrs in page.cells.items():
        assert attrs["class"].split() == ["cell", EXPECTED[pkg][(release, variant)]] or \
            attrs["class"].split() == ["cell", EXPECTED[pkg][(release, variant)], "first"]
    failing = page.cells[("failing", "2.4.1", "cpu")]
    assert "failing-2.0-h0_0.conda" in failing["title"] and "2025-05-22" in failing["title"]
    # unmaintained flags come from `report unmaintained`; retired packages carry a retired badge
    assert page.badges == {"stale": {"retire"}, "active": {"ping"}, "failing": {"ping"}, "gone": {"retired"}}
    assert page.flagged == {"stale": "retire", "active": "ping", "failing": "ping"}
    # the dependency view
    assert page.nodes == {"fine": "ok", "fresh": "ok", "stale": "retire", "active": "ping", "failing": "ping",
                          "addon": "ok", "gone": "retired"}
    html = res.stdout
    assert "channel_state/retirements/gone-20250417.yaml" in html
    assert '<td class="deps-of">failing</td><td class="dependents-of">—</td>' in html
    for handle in ("sam", "sue", "ada", "fay", "fiona", "gus"):
        assert (f"https://github.com/{handle}", f"@{handle}") in page.links  # maintainers' GitHub profiles


def test_page_screenshot(site, chromium, tmp_path):
    shot = tmp_path / "status.png"
    res = run_chromium(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1400,1000",
                       "--hide-scrollbars", (site / "index.html").as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    assert shot.is_file() and shot.stat().st_size > 20_000
    width, height, distinct = png_info(shot)
    assert (width, height) == (1400, 1000)
    assert distinct > 100  # a rendered page, not a blank canvas
    keep = os.environ.get("CONDA_DISTRO_KEEP_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)


def test_as_of_shows_the_past(tmp_path):
    """40 days earlier the 2.4.1 cpu failure of `failing` (and so the block of addon) had not happened."""
    from conda_distro.reports.status import StatusOptions, write_status

    root = make_scenario(tmp_path / "distro")
    written = write_status(StatusOptions(out=tmp_path / "site", root=root,
                                         as_of=(AS_OF - dt.timedelta(days=40)).isoformat())).written
    page = Page(written[0].read_text())
    statuses = page.statuses()
    assert statuses["failing"][("2.4.1", "cpu")] == P and statuses["addon"][("2.4.1", "cpu")] == P
    assert statuses["fine"][("2.6.0", "cpu")] == NT  # tested only later
    assert page.flagged == {"stale": "ping", "active": "ping"}


# ---------------------------------------------------------------------------------------------
# issue 14: failures in staging, logs, per-release progress, excuses, recipe links


def write_log(root: Path, name: str, text: str) -> str:
    path = root / "build" / "logs" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def make_busy_scenario(root: Path) -> Path:
    """The scenario plus two packages never promoted, whose builds are in staging: hooky passes 2.4/2.5 and
    fails 2.6 (cpu, cuda); broken fails everywhere. A fine build 1.1 awaits promotion. And the promotion
    gate's excuses."""
    make_scenario(root)
    add_never_promoted(root, "hooky")
    import git
    from test_reports import commit, recipe_text

    commit(git.Repo(root), {"recipes/broken/recipe.yaml": recipe_text("broken", "pytorch >=2.4,<2.7", [], ["bo"])},
           "Add broken", "Bo Broken", day(-50))
    stage(root, "broken", "0.1", everywhere("failed"), day(-3), reason="test 0 failed: ImportError: no module named broken")
    stage(root, "fine", "1.1", everywhere("passed"), day(-1))
    from conda_distro.state.results import ResultsStore

    store = ResultsStore(root / "build" / "results")
    for res in store.all():  # give the failures real logs on this machine
        tests = [t.model_copy(update={"log": write_log(root, f"{res.name}/{t.pytorch}-{t.variant}.test.log",
                                                       f"== {res.name} {t.pytorch} {t.variant}\n{t.reason}\n")})
                 if t.status == "failed" else t for t in res.tests]
        store.put(res.model_copy(update={"tests": tests}))
    regression_log = write_log(root, "fine/regression.log", "fine broke with addon 2.0\n")
    (root / "build" / "excuses.json").write_text(json.dumps({
        "ok": False, "generated": "2025-06-01T03:00:00Z",
        "candidates": [
            {"name": "addon", "old_version": "1.0", "new_version": "2.0", "verdict": "held-temporarily",
             "reasons": ["regression: fine fails with it on pytorch 2.6.0 (cpu)"], "blocked_by": ["failing"],
             "promote_with": [], "days_waiting": 4, "maintainers": ["al"], "artifacts": ["noarch/addon-2.0-h1_0.conda"],
             "regressions": [{"package": "fine", "pytorch": "2.6.0", "variant": "cpu", "log": regression_log}]},
            {"name": "hooky", "old_version": None, "new_version": "1.0", "verdict": "held-permanently",
             "reasons": ["test-failed: pytorch 2.6.0 (cpu, cuda)"], "blocked_by": [], "promote_with": [],
             "days_waiting": 25, "maintainers": ["hank"], "artifacts": [], "regressions": []},
            {"name": "fine", "old_version": "1.0", "new_version": "1.1", "verdict": "promote", "reasons": [],
             "blocked_by": [], "promote_with": [], "days_waiting": 0, "maintainers": ["fiona"], "artifacts": [],
             "regressions": []}],
        "groups": [{"blocked_by": "failing", "candidates": ["addon"]}]}))
    return root


@pytest.fixture(scope="module")
def busy_site(tmp_path_factory) -> Path:
    root = make_busy_scenario(tmp_path_factory.mktemp("busy") / "distro")
    out = root.parent / "site"
    assert cli_main(["status", "--root", str(root), "--out", str(out), "--as-of", AS_OF.isoformat(),
                     "--repo-url", "https://github.com/example/distro", "--format", "json"]) == 0
    return out


@pytest.fixture(scope="module")
def busy_dom(busy_site, chromium, tmp_path_factory) -> subprocess.CompletedProcess:
    """The busy page's DOM as headless Chromium renders it (one Chromium run for the module's readers)."""
    return run_chromium(chromium, tmp_path_factory.mktemp("busy-dom"), "--dump-dom", (busy_site / "index.html").as_uri())


def test_failures_in_staging_are_shown_in_red_with_reason_and_log(busy_site, busy_dom):
    res = busy_dom
    assert res.returncode == 0, res.stderr[-2000:]
    page = Page(res.stdout)
    # main rows are as before; a package never promoted is untested in main ...
    assert page.statuses()["broken"] == row(NT, NT, NT, NT, NT, NT)
    # ... and red in its staging row, labelled as staging
    staged = {pkg: {} for pkg, _, _ in page.staged}
    for (pkg, release, variant), attrs in page.staged.items():
        staged[pkg][(release, variant)] = attrs["data-status"]
        assert attrs["data-source"] == "staging"
    assert staged == {"broken": row(F, F, F, F, F, F), "hooky": row(P, P, P, P, F, F), "fine": row(P, P, P, P, P, P)}
    assert '<span class="src staging"' in res.stdout and "held: a test failed" in res.stdout
    assert "awaiting promotion" in res.stdout
    # the summary counts failures (not "0 failed")
    assert re.search(r'<a class="stat failed" href="#failures" data-failed="9">', res.stdout)
    # every failure is listed with its reason and a log copied beside the page
    listed = {(f["data-package"], f["data-release"], f["data-variant"], f["data-source"]) for f in page.failures}
    assert ("failing", "2.4.1", "cpu", "main") in listed and ("hooky", "2.6.0", "cuda", "staging") in listed
    assert len(listed) == 9
    assert "ImportError: no module named broken" in res.stdout and "needs pytorch &lt; 2.6" in res.stdout
    logs = [href for href, text in page.links if text == "log"]
    assert "logs/broken/2.4.1-cpu.test.log" in logs and "logs/fine/regression.log" in logs
    for href in logs:
        assert (busy_site / href).is_file()
    assert "ImportError" in (busy_site / "logs/broken/2.4.1-cpu.test.log").read_text()
    # a red cell links to its entry in the failures list
    cell = page.staged[("hooky", "2.6.0", "cpu")]
    assert cell["class"].split()[:2] == ["cell", "failed"]
    assert ("#fail-staging-hooky-2.6.0-cpu", "fail") in page.links


def test_per_release_progress(busy_dom):
    res = busy_dom
    assert res.returncode == 0, res.stderr[-2000:]
    page = Page(res.stdout)
    got = {r: (a["data-pass"], a["data-total"], a["data-in-main"]) for r, a in page.progress.items()}
    # every package of the distribution counts, those whose pins exclude the release too (never "3/5 pass"
    # while 3 packages cannot be installed with the release), and each one lagging is named with why
    assert got == {"2.4.1": ("5", "8", "4"), "2.5.1": ("5", "8", "4"), "2.6.0": ("3", "8", "3")}
    for text in ("2.4.1: 5 of 8 packages of the distribution admit and pass",
                 "2.5.1: 5 of 8 packages of the distribution admit and pass",
                 "2.6.0: 3 of 8 packages of the distribution admit and pass"):
        assert text in res.stdout
    lags = re.findall(r'<span class="lag" data-package="([\w-]+)" data-why="([^"]+)">', res.stdout)
    assert lags == [("addon", "blocked"), ("broken", "failing"), ("failing", "failing"),  # 2.4.1
                    ("active", "not tested yet"), ("broken", "failing"), ("stale", "pins exclude it"),  # 2.5.1
                    ("active", "pins exclude it"), ("broken", "failing"), ("fresh", "pins exclude it"),  # 2.6.0
                    ("hooky", "failing"), ("stale", "pins exclude it")]


def test_excuses_grouped_by_what_blocks_them(busy_dom):
    res = busy_dom
    assert res.returncode == 0, res.stderr[-2000:]
    page = Page(res.stdout)
    assert {n: (a["data-verdict"], a["group"]) for n, a in page.excuses.items()} == {
        "addon": ("held-temporarily", "failing"), "hooky": ("held-permanently", ""), "fine": ("promote", "")}
    assert "regression: fine fails with it on pytorch 2.6.0 (cpu)" in res.stdout
    assert ("https://github.com/hank", "@hank") in page.links


def test_recipe_and_profile_links(busy_site):
    page = Page((busy_site / "index.html").read_text())
    recipe_links = [h for h, _ in page.links if "/blob/" in h]
    assert any(re.fullmatch(r"https://github\.com/example/distro/blob/[0-9a-f]{40}/recipes/hooky/recipe\.yaml", h)
               for h in recipe_links)
    assert ("https://github.com/bo", "@bo") in page.links


def test_pull_request_and_tracking_issue_links(busy_dom):
    """Per package: a search of the repository's open pull requests naming it; per release a sweep added
    (2.5.1, 2.6.0: not in the first distro.yaml): a search for its tracking issue. Both from --repo-url."""
    from urllib.parse import parse_qs, urlsplit

    res = busy_dom
    assert res.returncode == 0, res.stderr[-2000:]
    page = Page(res.stdout)
    pulls = {parse_qs(urlsplit(h).query)["q"][0]: h for h, text in page.links if text == "PRs"}
    with_recipe = {"fine", "fresh", "stale", "active", "failing", "addon", "gone", "hooky", "broken"}
    assert set(pulls) == {f"is:pr is:open {n}" for n in with_recipe}
    assert all(h.startswith("https://github.com/example/distro/pulls?q=") for h in pulls.values())
    issues = [h for h, text in page.links if text == "sweep tracking issue"]
    assert [parse_qs(urlsplit(h).query)["q"][0] for h in issues] == [
        'is:issue in:title "PyTorch 2.5.1 release sweep"', 'is:issue in:title "PyTorch 2.6.0 release sweep"']
    assert all(h.startswith("https://github.com/example/distro/issues?q=") for h in issues)
    # excuses: grouped as the gate groups them (the promoted one is not "blocked by nothing"); a held
    # candidate's own failing tests are not called regressions
    assert '<h3>nothing: promoted <span class="count">1</span></h3>' in res.stdout
    assert "blocked by <code>nothing" not in res.stdout
    assert "regression: fine fails on pytorch 2.6.0 (cpu)" in res.stdout


def test_no_repository_url_no_search_links(site):
    """The dated scenario has no GitHub remote and no --repo-url: no PR or issue links (nothing to guess)."""
    page = Page((site / "index.html").read_text())
    assert not [h for h, text in page.links if text in ("PRs", "sweep tracking issue")]


def test_busy_page_screenshot(busy_site, chromium, tmp_path):
    shot = tmp_path / "busy.png"
    res = run_chromium(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1400,1600", "--hide-scrollbars",
                       (busy_site / "index.html").as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    width, height, distinct = png_info(shot)
    assert (width, height) == (1400, 1600) and distinct > 100
    keep = os.environ.get("CONDA_DISTRO_KEEP_SCREENSHOT")
    if keep:
        shutil.copy(shot, Path(keep).with_name("busy-" + Path(keep).name))


def test_bad_excuses_file_exits_2_and_writes_nothing(tmp_path, capsys):
    """The page reads build/excuses.json into the promotion gate's own types (conda_distro.gate.excuses): a file
    of another shape is bad input, named with its field."""
    root = make_scenario(tmp_path / "distro")
    out = tmp_path / "site"
    for doc, field in (({"ok": True, "generated": "2025-06-01T03:00:00Z", "candidates": [
                            {"name": "a", "new_version": "1", "verdict": "maybe"}]}, "candidates.0.verdict"),
                       ({"generated": "x", "candidates": []}, "'generated'"),
                       ({"generated": "2025-06-01T03:00:00Z", "candidates": [
                            {"name": "a", "new_version": "1", "verdict": "held-temporarily",
                             "regressions": [{"package": "b", "pytorch": "2.6.0"}]}]}, "candidates.0.regressions.0.variant")):
        (root / "build" / "excuses.json").write_text(json.dumps(doc))
        assert cli_main(["status", "--root", str(root), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert "excuses.json" in err and field in err and "hint:" in err
        assert not out.exists()


def test_excuses_file_round_trips_through_the_gates_types(tmp_path):
    """What `promote` writes is what the page reads: one schema (conda_distro.gate.excuses)."""
    from conda_distro.gate.excuses import EXCUSES_FILE, Excuse, Excuses, Regression, read_excuses, write_excuses

    ex = Excuses(generated=dt.datetime(2025, 6, 1, 3, tzinfo=dt.UTC), candidates=[
        Excuse(name="addon", old_version="1.0", new_version="2.0", verdict="held-temporarily", blocked_by=["failing"],
               regressions=[Regression(package="fine", pytorch="2.6.0", variant="cpu", log="build/logs/x.log")]),
        Excuse(name="hooky", new_version="1.0", verdict="held-permanently", group="a rebuild from this checkout"),
        Excuse(name="fine", old_version="1.0", new_version="1.1", verdict="promote")])
    write_excuses(tmp_path / EXCUSES_FILE, ex)
    back = read_excuses(tmp_path)
    assert back == ex and back.to_dict() == ex.to_dict()
    assert [(g, [e.name for e in es]) for g, es in back.groups()] == [
        ("a rebuild from this checkout", ["hooky"]), ("failing", ["addon"]), ("nothing: promoted", ["fine"])]
    assert back.text_lines() == ex.text_lines() and back.markdown() == ex.markdown()
    assert read_excuses(tmp_path / "nowhere") is None


def test_candidates_promoted_since_the_excuses_were_written_are_left_out(tmp_path):
    """`promote` writes build/excuses.json before it promotes: a candidate now in main has no excuse on the page."""
    from conda_distro.gate.excuses import Excuse, Excuses, write_excuses
    from conda_distro.reports.status import StatusOptions, write_status
    from conda_distro.state.ledger import Ledger

    root = make_scenario(tmp_path / "distro")
    in_main = Ledger(root / "channel_state").load("fine").artifacts[0].artifact
    write_excuses(root / "build" / "excuses.json", Excuses(generated=dt.datetime(2025, 6, 1, tzinfo=dt.UTC), candidates=[
        Excuse(name="fine", new_version="1.0", verdict="promote", artifacts=[in_main]),
        Excuse(name="addon", new_version="3.0", verdict="held-temporarily", artifacts=["noarch/addon-3.0-h0_0.conda"])]))
    written = write_status(StatusOptions(out=tmp_path / "site", root=root, as_of=AS_OF.isoformat())).written
    page = Page(written[0].read_text())
    assert set(page.excuses) == {"addon"}


def test_a_package_blocked_by_a_failing_dependency_is_blocked_not_untested(tmp_path, chromium):
    """`build` does not attempt a package whose dependency fails: it leaves no artifact and no result. The
    page says "blocked" (in a staging row naming what it waits for), not "untested", and passes it on."""
    import git
    from test_reports import commit, recipe_text

    root = make_busy_scenario(tmp_path / "distro")
    commit(git.Repo(root), {"recipes/onbroken/recipe.yaml": recipe_text("onbroken", "pytorch >=2.4,<2.7", ["broken >=0.1,<1"], ["ob"]),
                            "recipes/onhooky/recipe.yaml": recipe_text("onhooky", "pytorch >=2.4,<2.7", ["hooky >=1.0,<2"], ["oh"]),
                            "recipes/ononbroken/recipe.yaml": recipe_text("ononbroken", "pytorch >=2.4,<2.7", ["onbroken >=1,<2"], ["oo"])},
           "Add dependents of broken and hooky", "Ob", day(-2))
    out = tmp_path / "site"
    assert cli_main(["status", "--root", str(root), "--out", str(out), "--as-of", AS_OF.isoformat()]) == 0
    res = run_chromium(chromium, tmp_path, "--dump-dom", (out / "index.html").as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    page = Page(res.stdout)
    staged = {}
    for (pkg, release, variant), attrs in page.staged.items():
        staged.setdefault(pkg, {})[(release, variant)] = attrs["data-status"]
    assert staged["onbroken"] == row(B, B, B, B, B, B) and staged["ononbroken"] == row(B, B, B, B, B, B)
    assert staged["onhooky"] == row(NT, NT, NT, NT, B, B)  # hooky passes 2.4 and 2.5: onhooky is only to be built
    assert page.statuses()["onbroken"] == row(NT, NT, NT, NT, NT, NT)  # main: nothing there
    assert "not built: waits for broken" in res.stdout and "not built: waits for onbroken" in res.stdout
    assert "blocked: not built: broken fails or is blocked here" in page.staged[("onbroken", "2.4.1", "cpu")]["title"]


def test_a_staged_infrastructure_error_reads_not_tested(tmp_path):
    """A staged test that ended in an infrastructure error (status ``error``: worker killed, channel
    unreadable) is no verdict on the package: its staging cell reads not-tested (it was a KeyError)."""
    from conda_distro.reports.status import StatusOptions, write_status

    root = make_scenario(tmp_path / "distro")
    stage(root, "fine", "1.1", {**everywhere("passed"), ("2.6.0", "cpu"): "error"}, day(-1))
    written = write_status(StatusOptions(out=tmp_path / "site", root=root, as_of=AS_OF.isoformat())).written
    page = Page(written[0].read_text())
    assert page.staged[("fine", "2.6.0", "cpu")]["data-status"] == NT
    assert page.staged[("fine", "2.6.0", "cuda")]["data-status"] == P


# ---------------------------------------------------------------------------------------------
# honest progress on the sandbox world


@pytest.mark.slow
def test_progress_counts_packages_whose_pins_exclude_a_release(built_world: Path, tmp_path, capsys):
    """2.7.0 and 2.8.0 are added to distro.yaml; upstream has a 2.7.0 build only. tensorutils' pin is widened
    and it is built and tested against 2.7.0; every other recipe's pins exclude 2.7.0 (their cells read n/a).
    The page must not say "2.7.0: 1/1 pass": it says 1 of all the packages admits and passes, and names
    each other one with why."""
    from support.helpers import run_cli, run_cli_at

    world = built_world
    assert run_cli(capsys, "sandbox", "publish-release", str(world), "2.7.0")[0] == 0
    distro = world / "distro.yaml"
    text = distro.read_text()
    assert 'releases: ["2.4.1", "2.5.1", "2.6.0"]' in text, text
    distro.write_text(text.replace('releases: ["2.4.1", "2.5.1", "2.6.0"]', 'releases: ["2.4.1", "2.5.1", "2.6.0", "2.7.0", "2.8.0"]'))
    recipe = world / "recipes/tensorutils/recipe.yaml"
    recipe.write_text(recipe.read_text().replace("pytorch >=2.4,<2.7", "pytorch >=2.4,<2.9").replace("number: 0", "number: 1"))
    code, out, err = run_cli_at(capsys, world, "build", "tensorutils", "--pytorch", "2.7.0")
    assert code == 0, out + err
    code, out, _ = run_cli_at(capsys, world, "status", "--out", str(tmp_path / "site"), "--format", "json")
    assert code == 0
    progress = {p["release"]: p for p in json.loads(out)["progress"]}
    p27, p28 = progress["2.7.0"], progress["2.8.0"]
    recipes = sorted(p.parent.name for p in (world / "recipes").glob("*/recipe.yaml"))
    assert p27["total"] == len(recipes) and p27["passing"] == 1
    assert p27["headline"] == f"2.7.0: 1 of {len(recipes)} packages of the distribution admit and pass"
    lag27 = {lag["name"]: lag["why"] for lag in p27["lagging"]}
    assert set(lag27) == set(recipes) - {"tensorutils"} and set(lag27.values()) == {"pins exclude it"}
    # 2.8.0 is admitted by tensorutils' pin, but upstream has no pytorch 2.8.0 to test it with
    assert {lag["name"]: lag["why"] for lag in p28["lagging"]}["tensorutils"] == "not tested (upstream has no build)"
    html = (tmp_path / "site" / "index.html").read_text()
    assert f"2.7.0: 1 of {len(recipes)} packages of the distribution admit and pass" in html
    assert '<span class="lag" data-package="layerkit" data-why="pins exclude it">' in html
    assert not re.search(r"2\.7\.0: \d+/\d+ pass", html)
