"""`conda-distro snapshots`."""

from __future__ import annotations

from conda_distro.cli.app import Format, FormatOpt, RootOpt, app, emit


@app.command()
def snapshots(root: RootOpt = None, format: FormatOpt = Format.text) -> int:
    """List the snapshots of main (one per promotion that changed it), the channel URL to pin each, and
    which one main holds now."""
    from conda_distro.enduser.snapshots import SnapshotsOptions, list_snapshots

    return emit(list_snapshots(SnapshotsOptions(root=root)), format)
