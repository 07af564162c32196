"""`conda-distro verify-channel`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from conda_distro.cli.app import FormatOpt, RootOpt, TextJson, app, out, print_json, report_unreadable


TAIL_LINES = 8  # of a failing check's output, in text mode (JSON has it all)


def result_lines(report) -> list[str]:
    """Per release × variant: the verdict, and for each failing check its name and the last lines of its
    output (the traceback's end: the exception)."""
    from conda_distro.gpu import variant_label

    lines = []
    for r in report.results:
        if r.skipped:
            lines.append(f"pytorch {r.pytorch} ({variant_label(r.variant, r.gpu)}): skipped — {r.skipped}")
            continue
        lines.append(f"pytorch {r.pytorch} ({variant_label(r.variant, r.gpu)}): {'ok' if r.ok else 'FAILED'} — {len(r.installed)} packages "
                     f"installed, {sum(c['ok'] for c in r.checks)}/{len(r.checks)} checks passed")
        for name, why in sorted(r.left_out.items()):
            lines.append(f"    {name}: not installed — {why}")
        failing = [c for c in r.checks if not c["ok"]]
        if r.error and not failing:
            lines.append(f"    {r.error}")
        for c in failing:
            lines.append(f"    {c['package']}: {c['check']} failed")
            output = [ln for ln in str(c.get("output") or "").splitlines() if ln.strip()]
            shown = output[-TAIL_LINES:]
            if len(output) > len(shown):
                lines.append(f"      [... {len(output) - len(shown)} earlier line(s); all of it in --format json]")
            lines += [f"      | {ln}" for ln in shown]
    return lines


@app.command("verify-channel")
def verify_channel_cmd(
    pytorch: Annotated[Optional[list[str]], typer.Option("--pytorch", help="Only this release (repeatable).")] = None,
    keep: Annotated[Optional[Path], typer.Option("--keep", help="Keep the test environments in this folder.")] = None,
    root: RootOpt = None,
    format: FormatOpt = TextJson.text,
) -> int:
    """Install from main + upstream as an end user would, for each release × variant; run import tests;
    check channel_state/ against the channel."""
    from conda_distro.distribution import load_distribution
    from conda_distro.verify import VerifyOptions, verify_channel

    dist = load_distribution(root, strict=False)
    unreadable = report_unreadable(dist)  # reported; the others are verified
    report = verify_channel(dist, VerifyOptions(pytorch=tuple(pytorch or ()), keep=keep))
    if format is TextJson.json:
        print_json(report.to_dict())
    else:
        for line in result_lines(report):
            out(line)
        for d in report.drift:
            out(f"drift: {d['kind']}: {d['artifact']} ({d['detail']})")
        out("ok" if report.ok else "FAILED")
    return 0 if report.ok and not unreadable else 1
