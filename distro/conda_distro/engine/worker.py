"""The runner: the process that calls rattler-build, and so starts recipe code (build and test scripts).

Started by the orchestrator inside a sandbox of its own (:mod:`.sandbox`) as
``python -I -B -m conda_distro.engine.worker build|test --report-fd N JOB.json``; it reads the job
(:mod:`.jobs`), runs it and reports on descriptor ``N``, a pipe whose other end only the orchestrator
reads. Before anything else it:

* makes the descriptor close-on-exec, so no process it starts (rattler-build's build and test scripts)
  inherits it;
* makes itself non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): a process without capabilities (the
  sandbox drops them all) can then not open its ``/proc/<pid>/fd/*``, ``environ`` or ``mem``, nor
  ptrace it; recipe code, its child, cannot write the report, read the job or change the runner's
  memory. A runner that cannot make itself non-dumpable stops before reading its job.

Everything recipe code prints reaches rattler-build, which streams it to the runner (its progress
callback); the runner sends it on as ``log`` lines, bounded in length. Nothing printed decides a
verdict: a test's verdict is rattler-build's ``TestResult.success`` (the scripts' exit status), read
by the runner and sent as a ``tested`` message. The runner's own stdout and stderr go to the sandbox's
output stream (kept in the log, never read as a report).

The runner writes nothing outside its sandbox's work folder; the orchestrator hashes what a build
produced the moment its sandbox has exited, checks it and moves it into staging (:mod:`.unit`,
:mod:`.intake`); the runner's word is never taken for an artifact's name or sha256.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from pathlib import Path

from conda_distro.engine.backends import BuildJob, TestJob, make_builder
from conda_distro.engine.jobs import (
    MAX_LINE,
    BeginMsg,
    BuildPhaseJob,
    BuiltMsg,
    DoneMsg,
    Envelope,
    LogMsg,
    Message,
    TestedMsg,
    TestPhaseJob,
)
from conda_distro.util.exitguard import guard_exit

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


class Report:
    """The report stream: one JSON object a line on the private descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.Lock()

    def send(self, msg: Message) -> None:
        data = (Envelope(msg=msg).model_dump_json() + "\n").encode("utf-8", "replace")
        with self.lock:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]

    def log(self, line: str) -> None:
        self.send(LogMsg(line=line if len(line) <= MAX_LINE else line[:MAX_LINE] + " [line cut]"))


def seal_process(report_fd: int) -> None:
    """Keep the report descriptor and this process's memory out of reach of what it starts (raises
    OSError when the kernel refuses)."""
    os.set_inheritable(report_fd, False)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 or libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def run_builds(job: BuildPhaseJob, report: Report) -> None:
    """Build every variant of the job in turn; no tests."""
    builder = make_builder(job.engine)
    out_dir = Path(job.out_dir)
    settings = job.settings()
    for i, spec in enumerate(job.variants):
        report.send(BeginMsg(index=i))
        res = builder.build(BuildJob(Path(job.recipe), spec, settings, out_dir, tuple(job.channels), report.log))
        if not res.ok or res.path is None:
            report.send(BuiltMsg(artifact=spec.artifact, ok=False, message=res.message or "the build failed"))
            continue
        try:
            produced = Path(res.path).resolve().relative_to(out_dir.resolve()).as_posix()
        except ValueError:
            report.send(BuiltMsg(artifact=spec.artifact, ok=False,
                                 message=f"rattler-build reported {res.path}, outside the output folder"))
            continue
        report.send(BuiltMsg(artifact=spec.artifact, ok=True, produced=produced))


def run_test(job: TestPhaseJob, report: Report) -> None:
    """Run the package's tests once; the verdict is rattler-build's."""
    builder = make_builder(job.engine)
    res = builder.test(TestJob(Path(job.artifact), tuple(job.channels), job.cuda, report.log))
    report.send(TestedMsg(ok=res.ok, error=res.error, message=res.message, env=res.env, envs=list(res.envs),
                          no_tests=res.no_tests,
                          env_failed=res.env_failed, missing=[m[:200] for m in res.missing[:50]]))


def main(argv: list[str] | None = None) -> int:
    """Entry point inside the sandbox: ``build|test --report-fd N JOB``."""
    guard_exit()  # its exit waits for py-rattler's native threads to leave Python
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4 or args[0] not in ("build", "test") or args[1] != "--report-fd":
        print("usage: python -m conda_distro.engine.worker build|test --report-fd N JOB.json", file=sys.stderr)
        return 2
    fd = int(args[2])
    seal_process(fd)
    os.dup2(2, 1)  # anything printed goes to the output stream, never to a report
    sys.stdout = sys.stderr
    report = Report(fd)
    text = Path(args[3]).read_text(encoding="utf-8")
    if args[0] == "build":
        run_builds(BuildPhaseJob.model_validate_json(text), report)
    else:
        run_test(TestPhaseJob.model_validate_json(text), report)
    report.send(DoneMsg())
    return 0


if __name__ == "__main__":
    sys.exit(main())
