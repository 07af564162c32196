"""`conda-distro verify-channel`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from conda_distro.cli.app import Format, FormatOpt, RootOpt, app, emit


@app.command("verify-channel")
def verify_channel_cmd(
    pytorch: Annotated[list[str] | None, typer.Option("--pytorch", help="Only this release (repeatable).")] = None,
    keep: Annotated[Path | None, typer.Option("--keep", help="Keep the test environments in this folder.")] = None,
    add_pip: Annotated[bool | None, typer.Option(
        "--add-pip-as-python-dependency/--no-add-pip-as-python-dependency",
        help="conda's setting of that name: pip is added to every python record (default: on, or "
             "CONDA_ADD_PIP_AS_PYTHON_DEPENDENCY).")] = None,
    root: RootOpt = None,
    format: FormatOpt = Format.text,
) -> int:
    """Install from main + upstream as a conda user would (conda's strict channel priority, pip with python),
    for each release × variant; run import tests; check channel_state/ against the channel. On a terminal,
    a progress bar with the time left."""
    from conda_distro.cli.progress import progress_sink
    from conda_distro.enduser.conda_solve import CondaSettings
    from conda_distro.verify import VerifyOptions, verify

    return emit(verify(VerifyOptions(pytorch=tuple(pytorch or ()), keep=keep, root=root,
                                     conda=CondaSettings.of_user(add_pip), progress=progress_sink())), format)
