"""Text from recipe code shown to people (conda_distro.util.safetext.shown), through every output that shows it.

Hostile output (mentions of a user and a team, links, images, autolinks, raw HTML, ``</details>``, code
fences, an issue reference, ANSI escapes, bidi overrides, very long lines) goes through the PR comment and
check-pr's text, the excuses, the status page, the sweep's PR bodies and tracking issue, and the
unmaintained report. The markdown is checked with a real CommonMark parser (markdown-it-py, rich's
own): no link, image or HTML of the hostile text survives, our ``<details>`` and fences are not closed
from inside, and no ``@name`` is left for GitHub to turn into a mention.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import git
import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from conda_distro.util.safetext import WIDTH, ZWJ, shown

HOSTILE = ("\x1b[31mFAILED\x1b[0m \x1b]0;pwned\x07@octocat @pytorch/core mail me@evil.example see https://evil.example/a "
           "and www.evil.example ![pixel](https://evil.example/p.png) [click](https://evil.example/c) "
           "<https://evil.example/auto> <img src=x onerror=alert(1)> </details> ``` <script>alert(1)</script> "
           "fixes #1234 | cell | $x^2$ **bold** \u202eesrever\u202c\x00\x07 " + "A" * 5000)
HOSTILE_LOG = "\n".join(["Traceback (most recent call last):", "```", "````", "~~~", "</details>",
                         "<!-- conda-distro:check-pr -->", "@octocat look: https://evil.example/x",
                         *(f"line {i} \x1b[1mbold\x1b[0m" for i in range(200)), HOSTILE])
FORBIDDEN = ("@octocat", "@pytorch", "me@evil", "https://evil", "www.evil", "#1234", "\x1b", "\u202e", "\x00", "\x07")

MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def tokens(md: str) -> list:
    out = []
    for t in MD.parse(md):
        out.append(t)
        out.extend(t.children or ())
    return out


def assert_inert(md: str, *, details: int = 0, links: tuple[str, ...] = (), mentions: tuple[str, ...] = ()) -> None:
    """``md`` holds no link, image or HTML but ours (``details``: how many <details> blocks we made,
    ``links``: hrefs we made), no mention but ``mentions``, none of FORBIDDEN as a reader sees it."""
    toks = tokens(md)
    kinds = {t.type for t in toks}
    assert "image" not in kinds and "html_inline" not in kinds, [t.content for t in toks if t.type in ("image", "html_inline")]
    blocks = [t.content.strip() for t in toks if t.type == "html_block"]
    assert len(blocks) == 2 * details, blocks
    assert all(b.startswith("<details><summary>") or b == "</details>" for b in blocks), blocks
    hrefs = [t.attrs.get("href") for t in toks if t.type == "link_open"]
    assert all(h in links for h in hrefs), hrefs
    seen = "\n".join(t.content for t in toks if t.type in ("text", "code_inline", "fence", "code_block"))
    for word in FORBIDDEN:
        assert word not in seen, f"{word!r} in:\n{seen[:3000]}"
    found = set(re.findall(r"(?<![\w/`])@([A-Za-z0-9][\w-]*(?:/[\w-]+)?)", seen))
    assert found <= set(mentions), found - set(mentions)
    assert all(len(line) <= 4 * WIDTH for line in md.splitlines()), max(len(line) for line in md.splitlines())


# ---------------------------------------------------------------------------------------------
# the function


def test_a_line_is_one_short_inert_line_of_markdown_and_html_the_same_for_a_page():
    line = shown(HOSTILE)
    assert "\n" not in line and len(line.replace("&#", "")) < 2 * WIDTH and line.endswith("…")
    assert_inert(f"- reason: {line}\n")
    assert f"@{ZWJ}octocat" in line and f"@{ZWJ}pytorch/core" in line and f"#{ZWJ}1234" in line
    # HTML: jinja's autoescape leaves it as it is (no double escaping); no tag, no attribute gets through
    env = jinja2.Environment(autoescape=True)
    env.filters["shown"] = shown
    html = env.from_string("<p title=\"{{ x | shown('html') }}\">{{ x | shown('html') }}</p>").render(x=HOSTILE + '" onclick="x')
    assert "<img" not in html and "<script" not in html and "&amp;" not in html and "&lt;img" in html
    page = _Elements()
    page.feed(html)
    assert page.tags == ["p"] and [name for name, _ in page.attrs] == ["title"]
    # a markdown line put into an HTML template by mistake is escaped again: ugly, never unsafe
    assert "<img" not in env.from_string("<p>{{ x | shown }}</p>").render(x=HOSTILE)


def test_legible_text_stays_legible():
    assert shown("AttributeError: legacy_autograd_hook (cpu)") == "AttributeError: legacy_autograd_hook (cpu)"
    assert shown("unknown key 'licence'; did you mean \"license\"?") == "unknown key 'licence'; did you mean \"license\"?"
    assert shown("a\tb\r\nc", "text") == "a b c" and shown(None) == ""
    assert shown("x" * 10, width=5) == "xxxx…"


def test_a_block_cannot_be_closed_from_inside():
    block = shown(HOSTILE_LOG, "block")
    md = f"<details><summary>log</summary>\n\n{block}\n</details>\n\nafter\n"
    assert_inert(md, details=1)
    fence = [t for t in tokens(md) if t.type == "fence"]
    assert len(fence) == 1 and "</details>" in fence[0].content and "```" in fence[0].content
    assert fence[0].content.splitlines()[0].startswith("[… ") and "earlier line(s) left out" in fence[0].content
    assert len(fence[0].content.splitlines()) == 40 and tokens(md)[-2].content == "after"


def test_a_code_span_cannot_be_closed_from_inside():
    span = shown("a ``` b ` c @octocat", "code")
    (code,) = [t for t in tokens(f"changed: {span}\n") if t.type == "code_inline"]
    assert code.content == f"a ``` b ` c @{ZWJ}octocat"


def test_text_for_terminals_and_json_is_clean_and_short():
    text = shown(HOSTILE, "text")
    assert all(ch not in text for ch in "\x1b\x00\x07\u202e") and len(text) == WIDTH
    assert f"@{ZWJ}octocat" in text and "https://evil.example/a" in text  # no mention; a link a terminal can open
    many = shown(HOSTILE_LOG, "text", lines=5, keep="head")
    assert many.splitlines()[0] == "Traceback (most recent call last):" and "more line(s) left out" in many


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_inert_as_a_line(text):
    md = f"- reason: {shown(text)}\n"
    toks = tokens(md)
    assert not {"image", "html_inline", "html_block", "link_open"} & {t.type for t in toks}
    assert [t.type for t in MD.parse(md)].count("list_item_open") == 1  # it stays in its list item
    seen = "".join(t.content for t in toks if t.type == "text")
    assert not re.search(r"@[A-Za-z0-9]", seen) and not re.search(r"#\d", seen)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_any_text_stays_inside_its_block(text):
    md = f"<details><summary>log</summary>\n\n{shown(text, 'block')}\n</details>\n\nafter\n"
    top = [t.type for t in MD.parse(md)]
    assert top == ["html_block", "fence", "html_block", "paragraph_open", "inline", "paragraph_close"]


# ---------------------------------------------------------------------------------------------
# every output


def hostile_check_pr():
    from conda_distro.checkpr.check import CheckPrResult, RecipeLocation
    from conda_distro.lint.base import Finding
    from conda_distro.solve import TargetSolve
    from conda_distro.state.results import BuildRecord
    from conda_distro.state.results import TestRecord as Run

    tests = [Run(name=n, artifact=f"noarch/{n}-1.0-h_0.conda", pytorch="2.6.0", variant=v,
                 status="failed" if n == "evil" else "blocked", reason=HOSTILE, log=f"/w/logs/{n}-{v}.log")
             for n in ("evil", "victim") for v in ("cpu", "cuda")]
    return CheckPrResult(
        base="main", changed=["evil", "x` @octocat `y"], affected=["evil", "victim", "builder"], built=True,
        root=Path("/w"), tests=tests, maintainers={"victim": ["vic"], "evil": ["eve"]},
        builds=[BuildRecord(name="evil", version="1.0", status="built"), BuildRecord(name="victim", version="1.0", status="built"),
                BuildRecord(name="builder", version="1.0", status="failed", reason=HOSTILE, log="/w/logs/builder.log")],
        lint=[Finding(recipe="evil", check="missing-license", severity="error", message=HOSTILE, path="recipes/evil/recipe.yaml",
                      line=3, hint=HOSTILE)],
        solve=[TargetSolve(pytorch="2.6.0", variant="cpu", ok=False, conflict=HOSTILE_LOG, conflicting=["evil"])],
        locations={"evil": RecipeLocation("recipes/evil/recipe.yaml", 1, 2)})


def test_the_pr_comment_and_check_pr_text(tmp_path):
    from conda_distro.checkpr.comment import error_report, to_markdown, to_text
    from conda_distro.errors import DistroError

    res = hostile_check_pr()
    md = to_markdown(res, log_url="https://ci.example/run/1#{path}")
    assert_inert(md, details=1, mentions=("vic",),
                 links=("https://ci.example/run/1#logs/evil-cpu.log", "https://ci.example/run/1#logs/builder.log"))
    assert "FAILED" in md and "onerror" in md  # shown, not dropped
    text = to_text(res)
    assert not any(ch in text for ch in "\x1b\x00\x07\u202e") and max(len(ln) for ln in text.splitlines()) < 1000
    stopped = error_report(DistroError(HOSTILE, path="/w/proposals/x.yaml", line=3, hint=HOSTILE), "main", Path("/w")).markdown()
    assert_inert(stopped)
    assert stopped.startswith("### 🛑 conda-distro check-pr: cannot read `proposals/x.yaml:3`: FAILED ")


def test_the_excuses_text_and_markdown():
    from conda_distro.gate.excuses import Excuse, Excuses

    ex = Excuses(generated=dt.datetime(2025, 1, 1, tzinfo=dt.UTC), candidates=[
        Excuse(name="evil", new_version="1.0", verdict="held-temporarily", reasons=[f"test-failed: {HOSTILE}"],
               maintainers=["eve"])])
    assert_inert(ex.markdown(), mentions=("eve",))
    assert not any(ch in "\n".join(ex.text_lines()) for ch in "\x1b\x00\x07\u202e")


def test_the_sweep_pr_bodies_tracking_issue_and_text():
    from conda_distro.sweep import Decision, SweepPlan, SweepResult
    from conda_distro.sweep.render import pr_body, tracking_issue

    plan = SweepPlan("2.7.0", [
        Decision("evil", "failed", ["eve"], "pytorch >=2.4,<2.7", "pytorch >=2.4,<2.8", old_build=0, new_build=1,
                 reason=f"test failed on pytorch 2.7.0 (cpu): {HOSTILE}", log=HOSTILE_LOG),
        Decision("good", "bumped", ["gus"], "pytorch >=2.4,<2.7", "pytorch >=2.4,<2.8", old_build=0, new_build=1,
                 tests=[{"pytorch": "2.7.0", "variant": "cpu", "status": "passed"}])])
    result = SweepResult(plan)
    result.pr_bodies = {"good": pr_body(plan.get("good"), "2.7.0")}
    issue = tracking_issue(plan, result)
    assert_inert(issue, details=1, mentions=("eve",))
    assert_inert(result.pr_bodies["good"]["body"], mentions=("gus",))
    result.tracking_issue = issue
    assert_inert(result.markdown(), details=1, mentions=("eve", "gus"))
    assert not any(ch in "\n".join(result.text_lines()) for ch in "\x1b\x00\x07\u202e")


@pytest.fixture()
def hostile_scenario(tmp_path):
    """The dated scenario of test_reports.py, with a build in staging whose tests failed with HOSTILE, the
    promotion gate's excuses quoting it, a retirement and a commit by a hostile author."""
    from test_reports import AS_OF, RELEASES, commit, day, everywhere, make_scenario, recipe_text, stage

    from conda_distro.gate.excuses import Excuse, Excuses, Regression, write_excuses

    root = make_scenario(tmp_path / "distro")
    commit(git.Repo(root), {"recipes/hooky/recipe.yaml": recipe_text("hooky", "pytorch >=2.4,<2.7", [], ["hank"])},
           "Add hooky @octocat https://evil.example/c <img src=x> #1234", "Mallory @octocat [x](https://evil.example/a) *b*", day(-240))
    art = stage(root, "hooky", "1.0", {**everywhere("passed", RELEASES[:2]), **everywhere("failed", RELEASES[2:])},
                day(-25), reason=HOSTILE[:700])
    write_excuses(root / "build" / "excuses.json", Excuses(generated=day(-1), candidates=[
        Excuse(name="hooky", new_version="1.0", verdict="held-temporarily", reasons=[f"test-failed: {HOSTILE[:700]}"],
               maintainers=["hank"], artifacts=[art],
               regressions=[Regression(package="hooky", pytorch="2.6.0", variant="cpu")])]))
    return root, AS_OF


def test_the_unmaintained_report(hostile_scenario, capsys):
    from conda_distro.cli import main

    root, as_of = hostile_scenario
    assert main(["report", "unmaintained", "--root", str(root), "--as-of", as_of.isoformat(), "--format", "markdown"]) == 1
    md = capsys.readouterr().out
    assert "FAILED" in md
    assert_inert(md, details=md.count("<details>"), mentions=("hank", "sam", "sue", "ada", "fay", "gus"),
                 links=("channel_state/retirements/gone-20250417.yaml",))
    assert main(["report", "unmaintained", "--root", str(root), "--as-of", as_of.isoformat()]) == 1
    assert not any(ch in capsys.readouterr().out for ch in "\x1b\x00\x07\u202e")


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs

    def handle_data(self, data):
        self.text.append(data)


def test_the_status_page(hostile_scenario, capsys):
    from conda_distro.cli import main

    root, as_of = hostile_scenario
    assert main(["status", "--root", str(root), "--out", str(root / "site"), "--as-of", as_of.isoformat()]) in (0, 1)
    html = (root / "site" / "index.html").read_text()
    page = _Elements()
    page.feed(html)
    assert not {"img", "script"} & set(page.tags) and not any(name.startswith("on") for name, _ in page.attrs)
    assert not any("evil.example" in (value or "") for name, value in page.attrs if name in ("href", "src"))
    text = "".join(page.text) + " ".join(v or "" for _, v in page.attrs)
    assert "FAILED" in text and "&#" not in text  # shown, and escaped once (the browser reads entities back)
    assert not any(ch in text for ch in "\x1b\x00\x07\u202e")
    assert f"@{ZWJ}octocat" in text and "@octocat" not in text


# ---------------------------------------------------------------------------------------------
# the repro on real builds: the last line of a real test's output, through the PR comment

HOSTILE_RECIPE = Path(__file__).parent / "data" / "hostile" / "loudmouth"


@pytest.mark.slow
def test_a_real_test_that_prints_hostile_text_makes_an_inert_pr_comment(sandbox_world: Path):
    shutil.copytree(HOSTILE_RECIPE, sandbox_world / "recipes" / "loudmouth")
    repo = git.Repo(sandbox_world)
    repo.git.add("-A")
    repo.index.commit("Add loudmouth")
    res = subprocess.run([sys.executable, "-m", "conda_distro", "check-pr", "--base", "HEAD~1", "--root", str(sandbox_world),
                          "--format", "markdown"], capture_output=True, text=True, timeout=1200)
    assert res.returncode == 1, res.stderr
    md = res.stdout
    assert "`loudmouth` test failed on all 6: test 0 failed: Script failed with status 1: FAILED @" in md  # its words
    assert_inert(md, mentions=("hostile-tester",))
    doc = subprocess.run([sys.executable, "-m", "conda_distro", "check-pr", "--base", "HEAD~1", "--root",
                          str(sandbox_world), "--format", "json"], capture_output=True, text=True, timeout=1200)
    reasons = [t["reason"] for t in json.loads(doc.stdout)["tests"] if t["name"] == "loudmouth"]
    assert reasons and all("@octocat" in r for r in reasons)  # the results keep what the test said
