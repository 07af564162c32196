"""`conda-distro verify-channel`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from conda_distro.cli.app import Format, FormatOpt, RootOpt, app, emit, progress_bar


@app.command("verify-channel")
def verify_channel_cmd(
    pytorch: Annotated[list[str] | None, typer.Option("--pytorch", help="Only this release (repeatable).")] = None,
    keep: Annotated[Path | None, typer.Option("--keep", help="Keep the test environments in this folder.")] = None,
    root: RootOpt = None,
    format: FormatOpt = Format.text,
) -> int:
    """Install from main + upstream as an end user would, for each release × variant; run import tests;
    check channel_state/ against the channel. On a terminal, a progress bar with the time left."""
    from conda_distro.verify import VerifyOptions, verify

    return emit(verify(VerifyOptions(pytorch=tuple(pytorch or ()), keep=keep, root=root, progress=progress_bar())),
                format)
