"""The walkthroughs of docs/walkthroughs.md run: every `$` command of its ```console blocks is typed, in
order, into one bash shell on a fresh sandbox world; each line shown under a command must be in what it
printed (stdout and stderr, runs of spaces taken as one), and its exit code must be the ``[exit N]`` shown
(0 when none is)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "walkthroughs.md"
PERSONAS = ("Set up a world", "Build, test and promote", "Use the channel", "Add your package", "Release day", "Maintain")


@dataclass
class Step:
    command: str
    shown: list[str] = field(default_factory=list)
    exit_code: int = 0


def steps(text: str) -> list[Step]:
    out: list[Step] = []
    for block in re.findall(r"^```console\n(.*?)^```", text, re.S | re.M):
        for line in block.splitlines():
            if line.startswith("$ "):
                out.append(Step(line[2:]))
            elif (m := re.fullmatch(r"\[exit (\d+)\]", line.strip())):
                out[-1].exit_code = int(m.group(1))
            elif line.strip():
                out[-1].shown.append(line.strip())
    return out


def _squeeze(text: str) -> str:
    return re.sub(r"[ \t]+", " ", text)


def test_every_persona_has_a_walkthrough_of_commands():
    text = PAGE.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.M)
    for persona in PERSONAS:
        assert any(h.startswith(persona) for h in headings), persona
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    for section in sections:
        assert steps(section), f"no command in the walkthrough section {section.splitlines()[0]!r}"
    assert all(s.command for s in steps(text)) and len(steps(text)) >= 15


@pytest.mark.slow
def test_walkthroughs_run_on_a_fresh_world(tmp_path):
    todo = steps(PAGE.read_text(encoding="utf-8"))
    script = ["set +e", f'export PATH="{Path(sys.executable).parent}:$PATH"', f'cd "{tmp_path}"']
    for i, s in enumerate(todo):
        script += [f"echo '@@begin {i}@@'", s.command + " 2>&1", f"echo \"@@end {i} $?@@\""]
    env = {**os.environ, "TMPDIR": str(tmp_path), "CI": "true", "COLUMNS": "200"}
    res = subprocess.run(["bash", "-c", "\n".join(script)], capture_output=True, text=True, timeout=3000, env=env,
                         cwd=tmp_path)
    out = res.stdout
    for i, s in enumerate(todo):
        m = re.search(rf"^@@begin {i}@@\n(.*?)^@@end {i} (\d+)@@$", out, re.S | re.M)
        assert m is not None, f"step {i} `{s.command}` did not finish:\n{out[-3000:]}\n{res.stderr[-2000:]}"
        printed, code = m.group(1), int(m.group(2))
        assert code == s.exit_code, f"`{s.command}` exited {code}, the walkthrough shows {s.exit_code}:\n{printed[-3000:]}"
        for line in s.shown:
            assert _squeeze(line) in _squeeze(printed), f"`{s.command}` did not print {line!r}:\n{printed[-3000:]}"
