"""`conda-distro verify-channel`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from conda_distro.cli.app import FormatOpt, RootOpt, TextJson, app, out, print_json, report_unreadable


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
        for r in report.results:
            out(f"pytorch {r.pytorch} ({r.variant}): {'ok' if r.ok else 'FAILED'} — {len(r.installed)} packages installed, "
                f"{sum(c['ok'] for c in r.checks)}/{len(r.checks)} checks passed")
            if r.error:
                out(f"    {r.error}")
        for d in report.drift:
            out(f"drift: {d['kind']}: {d['artifact']} ({d['detail']})")
        out("ok" if report.ok else "FAILED")
    return 0 if report.ok and not unreadable else 1
