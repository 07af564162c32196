"""The docs people read: the README is a front door (at most 12 KB, its links lead somewhere), the site under
docs/ builds with mkdocs-material with warnings as errors (links and anchors checked), the generated
reference is not stale, nothing points at a file outside the repository or at a numbered ticket instead
of the rule, and no binary file is tracked."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"


def _reference_tool():
    spec = importlib.util.spec_from_file_location("docs_reference", REPO / "tools" / "docs_reference.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tracked() -> list[str]:
    return subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True,
                          timeout=120).stdout.split("\0")


def test_readme_is_a_front_door():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode()) <= 12 * 1024, f"README.md is {len(text.encode())} bytes; move detail into docs/"
    for must in ("RFC-0006", "overlay on conda-forge", "## Install from the channel", "## The two commands",
                 "## Who does what", "## Help", "conda-distro -h"):
        assert must in text, must
    # one paragraph per persona, each with a link into docs/
    for page in ("use-the-channel.md", "add-your-package.md", "release-day.md", "maintain.md", "operate.md",
                 "architecture.md"):
        assert f"(docs/{page}" in text, page


def _slug(heading: str) -> str:
    """The anchor mkdocs' toc gives a heading (lowercase, punctuation out, spaces to dashes)."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return re.sub(r"[\s]+", "-", text).strip("-")


def test_readme_links_lead_somewhere():
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [ln for ln in links if not ln.startswith(("http://", "https://"))]
    assert len(local) >= 8
    for link in local:
        path, _, anchor = link.partition("#")
        target = REPO / path
        assert target.is_file(), f"README links to {link}: no such file"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), re.M)
            assert anchor in {_slug(h) for h in headings}, f"README links to {link}: no such heading"


def test_site_builds_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.fail("mkdocs-material is not installed: pip install -e '.[test]'")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "WARNING" not in res.stderr, res.stderr[-3000:]
    site = tmp_path / "site"
    for page in ("index.html", "use-the-channel/index.html", "add-your-package/index.html", "release-day/index.html",
                 "maintain/index.html", "operate/index.html", "architecture/index.html", "reference/cli/index.html",
                 "reference/lint-checks/index.html", "reference/schemas/index.html", "changelog/index.html"):
        assert (site / page).is_file(), page
    # the changelog page is the repository's CHANGELOG.md, included (not a copy that drifts)
    changelog = (site / "changelog" / "index.html").read_text(encoding="utf-8")
    first = next(ln for ln in (REPO / "CHANGELOG.md").read_text().splitlines() if ln.startswith("- "))
    assert re.sub(r"`", "", first[2:30]) in re.sub(r"<[^>]+>", "", changelog)


def test_every_nav_page_exists_and_every_page_is_in_the_nav():
    nav = (REPO / "mkdocs.yml").read_text()
    listed = set(re.findall(r"([\w/-]+\.md)", nav))
    pages = {p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md")}
    assert listed == pages, (sorted(listed - pages), sorted(pages - listed))


def test_reference_is_generated_from_the_code_and_not_stale():
    tool = _reference_tool()
    stale = tool.stale()
    assert not stale, f"stale: {stale}; run python tools/docs_reference.py"
    cli = (REPO / "docs" / "reference" / "cli.md").read_text()
    from conda_distro.cli.app import FLOW_ORDER

    for name in FLOW_ORDER:
        assert f"## conda-distro {name}\n" in cli, name
    assert "## conda-distro sandbox publish-release" in cli and "sandbox create" not in cli
    from conda_distro.lint import CHECKS

    checks = (REPO / "docs" / "reference" / "lint-checks.md").read_text()
    for cid, check in CHECKS.items():
        assert f"| `{cid}` | {check.severity.value} |" in checks, cid
    schemas = (REPO / "docs" / "reference" / "schemas.md").read_text()
    for title in ("## distro.yaml", "## hints.yaml", "## proposals/NAME.yaml"):
        assert title in schemas


def test_the_staleness_check_catches_a_change(tmp_path, monkeypatch):
    tool = _reference_tool()
    monkeypatch.setattr(tool, "OUT", tmp_path)
    assert set(tool.stale()) == set(tool.PAGES)  # nothing written yet: every page is stale
    assert tool.main([]) == 0 and tool.stale() == []
    (tmp_path / "exit-codes.md").write_text((tmp_path / "exit-codes.md").read_text().replace("| 2 |", "| 3 |"))
    assert tool.stale() == ["exit-codes.md"] and tool.main(["--check"]) == 1


#: a reference to a rule by a number in a document outside the repository, or to a ticket
OUTSIDE = re.compile(r"spec §|spec section \d|spec\.md|shared/docs|\bissue \d+\b", re.I)


def test_rules_are_stated_not_cited():
    hits = []
    for rel in _tracked():
        if not rel or not rel.startswith(("distro/", "tests/", "bench/", "docs/", ".github/", "tools/", "README.md",
                                          "CHANGELOG.md")) or rel == "tests/test_docs.py":
            continue
        path = REPO / rel
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        hits += [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group()}" for m in OUTSIDE.finditer(text)]
    assert not hits, "write the rule itself or link the docs page that states it:\n" + "\n".join(hits)


def test_no_binary_file_is_tracked():
    """Wheels, archives and other binaries stay out of git (a stray wheel once sat at the root); images the
    docs show and the sandbox's test data are text or listed here."""
    binary = []
    for rel in _tracked():
        path = REPO / rel
        if not rel or not path.is_file():
            continue
        head = path.read_bytes()[:8192]
        if b"\0" in head:
            binary.append(rel)
    assert not binary, binary


def test_site_pages_in_headless_chromium(tmp_path):
    """The built site as a browser shows it: the persona pages in the navigation, the walkthrough's commands
    and the generated help rendered as code, and a screenshot that is a page rather than a blank canvas."""
    from test_status_page import CHROMIUM, png_info, run_chromium

    if not CHROMIUM.exists():
        pytest.skip("headless Chromium unavailable (tests/test_status_page.py installs Debian's chromium)")
    if importlib.util.find_spec("material") is None:
        pytest.fail("mkdocs-material is not installed: pip install -e '.[test]'")
    site = tmp_path / "site"
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=REPO,
                         capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    dom = run_chromium(CHROMIUM, tmp_path, "--dump-dom", (site / "walkthroughs" / "index.html").as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    for nav in ("Use the channel", "Add your package", "Release day", "Maintain", "Operate", "Command help"):
        assert nav in dom.stdout, nav
    assert "conda-distro sweep --pytorch 2.7.0 --dry-run" in re.sub(r"<[^>]+>", "", dom.stdout)
    shot = tmp_path / "docs.png"
    res = run_chromium(CHROMIUM, tmp_path, f"--screenshot={shot}", "--window-size=1280,900", "--hide-scrollbars",
                       (site / "reference" / "cli" / "index.html").as_uri())
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    width, height, distinct = png_info(shot)
    assert (width, height) == (1280, 900) and distinct > 50
