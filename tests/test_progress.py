"""One progress protocol for the whole tool (conda_distro.util.progress, rattler-build's callback shape):
library code (build, verify-channel, promote, prune) reports its tasks to the sink it is handed, the CLI
supplies a rich bar for a person watching and plain lines otherwise, and library code never imports rich."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from support.worlds import REPORT
from test_promote import make_root

from conda_distro.distribution import load_distribution
from conda_distro.engine.run import BuildOptions, run_build
from conda_distro.gate.promote import PROMOTE_STEPS, PromoteOptions, promote
from conda_distro.gate.prune import PRUNE_STEPS, PruneOptions, prune
from conda_distro.util.progress import (
    LogEvent,
    ProgressSink,
    RecordingSink,
    TaskFinish,
    TaskProgress,
    TaskStart,
    TaskStep,
)
from conda_distro.verify import VerifyOptions, verify

PACKAGE = Path(__file__).resolve().parent.parent / "distro" / "conda_distro"


def shape(sink: RecordingSink, task: str) -> list[tuple]:
    """The task's events as (kind, step or total, done)."""
    out: list[tuple] = []
    for e in sink.of(task):
        if isinstance(e, TaskStart):
            out.append(("start", e.total))
        elif isinstance(e, TaskStep):
            out.append(("step", e.step))
        elif isinstance(e, TaskProgress):
            out.append(("progress", e.step, e.done))
        elif isinstance(e, TaskFinish):
            out.append(("finish",))
    return out


def logs(sink: RecordingSink) -> list[str]:
    return [e.message for e in sink.events if isinstance(e, LogEvent)]


def test_recording_and_null_sinks_follow_the_protocol():
    from conda_distro.util.progress import NULL_SINK

    assert isinstance(RecordingSink(), ProgressSink) and isinstance(NULL_SINK, ProgressSink)


def stepped(steps: tuple[str, ...] | list[str]) -> list[tuple]:
    """The events of a task that reports each of ``steps`` in turn: start, (step, progress) each, finish."""
    out: list[tuple] = [("start", len(steps))]
    for i, s in enumerate(steps, 1):
        out += [("step", s), ("progress", s, i)]
    return [*out, ("finish",)]


def test_promote_and_prune_report_their_steps_to_the_sink_they_are_handed(template, tmp_path):
    root = make_root(template, tmp_path)
    sink = RecordingSink()
    assert len(PROMOTE_STEPS) == len(PRUNE_STEPS) == 3
    result = promote(PromoteOptions(root=root, progress=sink))
    assert {f.name for f in result.plan.promote} == {"alpha", "gamma"}
    assert shape(sink, "promote") == stepped(PROMOTE_STEPS)
    start = sink.of("promote")[0]
    assert isinstance(start, TaskStart) and start.message.startswith("promoting 2 artifact(s) to ")
    assert any(m.startswith("copied 2 file(s) into") for m in logs(sink)) and any(m.startswith("indexed") for m in logs(sink))

    # prune: eps' recipe edited, its build can never go
    (root / "recipes" / "eps" / "recipe.yaml").write_text((root / "recipes" / "eps" / "recipe.yaml").read_text() + "# x\n")
    sink = RecordingSink()
    result = prune(PruneOptions(root=root, progress=sink))
    assert [i.reason for i in result.plan.removed] == ["not-from-this-checkout"]
    assert shape(sink, "prune") == stepped(PRUNE_STEPS)
    assert any(re.match(r"removed 1 build\(s\) from ", m) for m in logs(sink))
    # nothing to do: no task at all
    sink = RecordingSink()
    prune(PruneOptions(root=root, progress=sink))
    assert shape(sink, "prune") == []


@pytest.mark.slow
def test_build_and_verify_report_each_package_and_target(built_world):
    report = json.loads((built_world / REPORT).read_text())
    name = report["builds"][0]["name"]
    sink = RecordingSink()
    run = run_build(load_distribution(built_world), BuildOptions(names=(name,), jobs=1), sink)
    planned = [p.name for p in run.plan.packages]
    events = shape(sink, "build")
    assert events[0] == ("start", len(planned)) and events[-1] == ("finish",)
    assert sorted(e[1] for e in events if e[0] == "step") == sorted(planned)
    assert [e[2] for e in events if e[0] == "progress"] == list(range(1, len(planned) + 1))
    notes = [e.note for e in sink.of("build") if isinstance(e, TaskProgress)]
    assert all(n.split(":")[0] in planned and "build " in n and "tests " in n for n in notes)

    promote(PromoteOptions(root=built_world))
    sink = RecordingSink()
    verify(VerifyOptions(pytorch=("2.5.1",), root=built_world, progress=sink))
    events = shape(sink, "verify")
    steps = [e[1] for e in events if e[0] == "step"]
    assert events[0] == ("start", len(steps)) and events[-1] == ("finish",) and len(steps) >= 1
    assert all(s.startswith("2.5.1/") for s in steps)
    assert [e[2] for e in events if e[0] == "progress"] == list(range(1, len(steps) + 1))


def test_the_cli_sink_is_a_bar_for_a_person_and_lines_otherwise(monkeypatch):
    from conda_distro.cli import progress as cli

    monkeypatch.delenv("CI", raising=False)
    assert isinstance(cli.progress_sink(), cli.LineSink)  # pytest captures stderr: not a terminal
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    monkeypatch.setenv("CI", "true")
    assert isinstance(cli.progress_sink(), cli.LineSink) and not cli.interactive()
    monkeypatch.delenv("CI")
    assert isinstance(cli.progress_sink(), cli.RichSink)


def _feed(sink: ProgressSink) -> None:
    sink.on_start(TaskStart("verify", 4, "verifying 4 release × variant(s)"))
    sink.on_step(TaskStep("verify", "2.6.0/cpu", "verifying pytorch 2.6.0 cpu"))
    sink.on_progress(TaskProgress("verify", 1, 4, step="2.6.0/cpu", note="[bold]tensorkit[/]: passed", ok=False))
    sink.on_log(LogEvent("info", "indexed main"))
    sink.on_progress(TaskProgress("verify", 2, 4))
    sink.on_finish(TaskFinish("verify", "verified"))


def test_plain_lines_say_what_was_done_without_a_bar():
    from conda_distro.cli.progress import LineSink

    buf = io.StringIO()
    _feed(LineSink(buf))
    lines = [re.sub(r"^\[\s*[\d.]+s\] ", "", line) for line in buf.getvalue().splitlines()]
    assert lines == ["verifying 4 release × variant(s)", "verifying pytorch 2.6.0 cpu",
                     "(1/4) [bold]tensorkit[/]: passed", "indexed main", "verified"]


def test_the_bar_shows_the_time_left_and_prints_notes_as_text():
    from rich.console import Console
    from rich.progress import TimeRemainingColumn

    from conda_distro.cli.progress import RichSink

    buf = io.StringIO()
    sink = RichSink(Console(file=buf, force_terminal=True, width=120))
    sink.on_start(TaskStart("verify", 4))
    sink.on_step(TaskStep("verify", "pytorch 2.6.0 cpu"))
    sink._bar().refresh()
    assert any(isinstance(c, TimeRemainingColumn) for c in sink._bar().columns)
    shown = buf.getvalue()
    assert "ETA" in shown and "0/4" in shown and "verify pytorch 2.6.0 cpu" in shown
    sink.on_progress(TaskProgress("verify", 1, 4, step="pytorch 2.6.0 cpu", note="[bold]tensorkit[/]: x", ok=False))
    sink.on_finish(TaskFinish("verify"))
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.getvalue())
    assert "✗ [bold]tensorkit[/]: x" in plain  # a note is text: its brackets are no markup


def test_library_code_never_imports_rich():
    """Only the CLI draws (cli/): every other module reports through the protocol."""
    offenders = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
                 if "cli" not in p.relative_to(PACKAGE).parts
                 and re.search(r"^\s*(from rich\b|import rich\b)", p.read_text(), re.M)]
    assert offenders == []
