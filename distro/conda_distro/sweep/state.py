"""Where a release stands, read from the repository (nothing is written here), and which sweep
commands that state allows.

The repository is authoritative: the release is

* ``interrupted`` — a sweep of it was killed (its journal, ``build/sweep/pytorch-VER.journal.json``):
  ``sweep --pytorch VER`` (with ``--commit`` if it had it) rolls it back or finishes it;
* ``uncommitted`` — distro.yaml in the work tree lists it and the checked-out commit does not, or a sweep
  without ``--commit`` left edits (``build/sweep/pytorch-VER.uncommitted.json``): ``--commit`` commits them;
* ``committed`` — the checked-out distro.yaml does not list it and its sweep branches exist
  (``sweep/pytorch-VER[-NAME]``): their pull requests are to be merged; every sweep refuses;
* ``supported`` — distro.yaml lists it (and the checked-out commit does, or there is no git): a sweep
  admits only the packages whose pins still leave it out (late admission, :mod:`.admit`);
* ``not-swept`` — none of these: ``sweep --pytorch VER`` is release day.

The saved report (``build/sweep/pytorch-VER.json``, not versioned) adds the details of the runs (tests,
failure reasons, logs, pull-request bodies); it never decides the state.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from conda_distro.config import DistroRepo
from conda_distro.errors import UsageError
from conda_distro.state.sweep_journal import SweepJournal, UncommittedEdits, find_journal
from conda_distro.sweep.git import committed_releases, refuse_half_made, sweep_branch
from conda_distro.sweep.model import SweepDocument, SweepOptions, command
from conda_distro.util.gitutil import branches_named, changed_paths, find_repo, head_sha, top_dir
from conda_distro.util.jsonio import read_json_text


def report_path(distro: DistroRepo, release: str) -> Path:
    """``build/sweep/pytorch-VER.json``: the release's saved report."""
    return distro.build_dir / "sweep" / f"pytorch-{release}.json"


def load_report(distro: DistroRepo, release: str) -> SweepDocument | None:
    """The saved report of ``release``; None when there is none or it cannot be read as one (it is a
    cache of what the sweep printed: the repository says where the release stands)."""
    try:
        return SweepDocument.model_validate_json(read_json_text(report_path(distro, release), "sweep"))
    except (OSError, ValueError):
        return None


@dataclass
class ReleaseState:
    release: str
    state: str  # interrupted | uncommitted | committed | supported | not-swept
    branches: list[str]  # the sweep's branches of the release that exist
    journal: SweepJournal | None = None
    uncommitted: UncommittedEdits | None = None  # a live record of edits a sweep without --commit left
    listed: bool = False  # distro.yaml (the work tree's) lists the release
    committed: bool | None = None  # the checked-out commit's distro.yaml lists it (None: no git)


def release_state(distro: DistroRepo, release: str) -> ReleaseState:
    """Read where ``release`` stands (see the module doc). Reads only."""
    journal = find_journal(distro.build_dir)
    listed = release in distro.config.pytorch.releases
    committed, branches = _git_view(distro, release)
    left = UncommittedEdits.load(distro.build_dir, release)
    if left is not None and (not _live(distro, left) or (committed and _release_day(left))):
        left = None  # (a release day's edits, and the checked-out commit lists the release: committed otherwise)
    out = ReleaseState(release, "not-swept", branches, journal if journal and journal.release == release else None,
                       left, listed, committed)
    if out.journal is not None:
        out.state = "interrupted"
    elif listed and committed is False:
        out.state = "uncommitted"
    elif listed and left is not None:
        out.state = "uncommitted"  # (late admission: edited recipes, distro.yaml listed the release before)
    elif listed:
        out.state = "supported"
    elif branches:
        out.state = "committed"
    return out


def _git_view(distro: DistroRepo, release: str) -> tuple[bool | None, list[str]]:
    """(does the checked-out commit's distro.yaml list ``release``: None without git or a commit, the sweep
    branches of ``release``). A repository git cannot be run on (no git binary) counts as none: a sweep
    without ``--commit`` needs no git (``--commit`` says what is missing)."""
    repo = find_repo(distro.root)
    try:
        if repo is None or head_sha(repo) is None:
            return None, []
        at_head = committed_releases(distro)
        return (None if at_head is None else release in at_head), sorted(branches_named(repo, sweep_branch(release)))
    except Exception:  # noqa: BLE001 - git missing or failing here: no git information, as find_repo says
        return None, []


def _release_day(left: UncommittedEdits) -> bool:
    """Is this the record of a release day's edits (distro.yaml among them)?"""
    return any(Path(rel).name == "distro.yaml" for rel in left.written)


def _live(distro: DistroRepo, left: UncommittedEdits) -> bool:
    """Does a record of uncommitted edits still describe edits in the work tree (some file it names differs
    from the checked-out commit)? Without git it does while its files hold what the sweep wrote."""
    repo = find_repo(distro.root)
    try:
        if repo is not None and head_sha(repo) is not None:
            top = top_dir(repo)
            return bool(changed_paths(repo, *[(distro.root / rel).resolve().relative_to(top).as_posix()
                                              for rel in left.written]))
    except Exception:  # noqa: BLE001 - git missing or failing: judged from the files alone
        pass
    return not left.changed_since(distro.root)


def refuse(distro: DistroRepo, state: ReleaseState, options: SweepOptions) -> None:
    """Exit 2 (nothing written) when ``options`` asks for a sweep this state does not allow; the message
    names the read-only ``sweep report`` and the command that does apply. A supported release is checked
    further by the late admission's plan (nothing ready to admit is refused there)."""
    release = state.release
    report = command(release, "report")
    if state.state == "supported" and options.commit:
        refuse_half_made(distro, release)  # an older version's interrupted sweep: the sweep branch checked out, dirty
    if state.state == "interrupted" or (state.state == "uncommitted" and options.commit and not options.package):
        return
    if state.state == "not-swept":
        if options.package:
            raise UsageError(f"pytorch {release} is not a supported release yet: there is nothing to admit "
                             f"{options.package} to", field="--package",
                             hint=f"sweep the release first: {command(release)} (it admits every package it can)")
        return
    if state.state == "uncommitted":
        raise UsageError(f"pytorch {release} was swept and its edits are not committed", field="--pytorch",
                         hint=f"`{report}` prints its report (it changes nothing); `{command(release, '--commit')}` "
                              "commits the edits on the sweep branches (or discard them: git checkout -- "
                              "distro.yaml recipes)")
    if state.state == "committed":
        shown = ", ".join(state.branches[:3]) + (f" and {len(state.branches) - 3} more" if len(state.branches) > 3 else "")
        raise UsageError(f"pytorch {release} was swept already: its branches ({shown}) are not merged into the "
                         "checked-out commit", field="--pytorch",
                         hint=f"`{report}` prints its report (it changes nothing); merge the sweep's pull requests, then "
                              f"on that checkout `{command(release)}` admits the packages fixed since (to sweep the "
                              f"release from scratch instead: git branch -D {' '.join(state.branches)})")
