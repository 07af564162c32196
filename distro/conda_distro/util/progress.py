"""The one progress protocol of the whole tool, in rattler-build's callback shape
(``rattler_build.progress.ProgressCallback``: a small object whose ``on_*`` methods each receive one event).

Library code (build, verify-channel, promote, prune, sweep) reports what it does by calling a
:class:`ProgressSink` it is handed in its options; it never prints progress and never imports rich. The CLI
supplies the sink (:mod:`conda_distro.cli.progress`): a rich bar with the time left when a person watches
(stderr is a terminal and ``CI`` is not true), plain lines otherwise. Tests hand in a :class:`RecordingSink`.

Events, for one named task (``build``, ``verify``, ``promote``, ``prune``):

* :class:`TaskStart` (``on_start``): the task begins; ``total`` steps (None: unknown);
* :class:`TaskStep` (``on_step``): a step begins (a package starts building, a release is verified): a bar
  names the steps running; ``message``, when set, is a line about it (plain lines only);
* :class:`TaskProgress` (``on_progress``): ``done`` of ``total`` steps are finished; ``note``, when set, is
  a line about the finished step (printed above a bar, and in the plain lines);
* :class:`TaskFinish` (``on_finish``): the task ends (a bar goes away);
* :class:`LogEvent` (``on_log``): a line to tell people along the way (``info``, ``warn``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable


@dataclass(frozen=True)
class TaskStart:
    task: str
    total: int | None = None
    message: str = ""


@dataclass(frozen=True)
class TaskStep:
    task: str
    step: str  # what begins (a package name, a release × variant, a phase)
    message: str = ""  # a line about it, for plain output ("" : nothing to say)


@dataclass(frozen=True)
class TaskProgress:
    task: str
    done: int
    total: int | None = None
    step: str = ""  # the step that finished ("" : none in particular)
    note: str = ""  # a line about it ("" : nothing to say)
    ok: bool = True  # the finished step went well (a bar marks it ✓ or ✗)


@dataclass(frozen=True)
class TaskFinish:
    task: str
    message: str = ""


@dataclass(frozen=True)
class LogEvent:
    level: Literal["info", "warn", "error"]
    message: str


Event = TaskStart | TaskStep | TaskProgress | TaskFinish | LogEvent


@runtime_checkable
class ProgressSink(Protocol):
    """What library code calls to report progress (every method receives one event and returns nothing)."""

    def on_start(self, event: TaskStart) -> None: ...

    def on_step(self, event: TaskStep) -> None: ...

    def on_progress(self, event: TaskProgress) -> None: ...

    def on_finish(self, event: TaskFinish) -> None: ...

    def on_log(self, event: LogEvent) -> None: ...


class NullSink:
    """Says nothing (the default of every options object)."""

    def on_start(self, event: TaskStart) -> None:
        pass

    def on_step(self, event: TaskStep) -> None:
        pass

    def on_progress(self, event: TaskProgress) -> None:
        pass

    def on_finish(self, event: TaskFinish) -> None:
        pass

    def on_log(self, event: LogEvent) -> None:
        pass


NULL_SINK: ProgressSink = NullSink()


@dataclass
class RecordingSink:
    """Keeps every event, in order (tests and benchmarks read what a command reported)."""

    events: list[Event] = field(default_factory=list)

    def on_start(self, event: TaskStart) -> None:
        self.events.append(event)

    def on_step(self, event: TaskStep) -> None:
        self.events.append(event)

    def on_progress(self, event: TaskProgress) -> None:
        self.events.append(event)

    def on_finish(self, event: TaskFinish) -> None:
        self.events.append(event)

    def on_log(self, event: LogEvent) -> None:
        self.events.append(event)

    def of(self, task: str) -> list[Event]:
        """The events of ``task`` (log lines belong to no task)."""
        return [e for e in self.events if getattr(e, "task", None) == task]


def log_lines(sink: ProgressSink) -> Callable[[str], None]:
    """A one-line-per-step callback (what the channels take, :data:`conda_distro.channels.Progress`) that
    tells ``sink`` each line as an ``info`` :class:`LogEvent`."""

    def say(line: str) -> None:
        sink.on_log(LogEvent("info", line))

    return say
