"""Release-day sweep: admit a new PyTorch release across the distribution, and later the packages
fixed since (late admission).

Plan (pure data, ``--dry-run`` prints it) -> edits (only the pin lines and the build-number line
change) -> build/test of the affected set against the new release -> statuses -> optional git branch
with one commit per bumped package, PR bodies and a tracking-issue body.

One job per module:

* :mod:`.model` — the options, the plan (a :class:`Decision` per package), the result, and the one
  schema of the document kept in ``build/sweep/pytorch-VER.json`` (:class:`SweepDocument`);
* :mod:`.plan` — what to bump (pure);
* :mod:`.edit` — the recipe and distro.yaml edits (through :mod:`conda_distro.recipe.edit`);
* :mod:`.git` — the branches and commits (through :mod:`conda_distro.util.gitutil`);
* :mod:`.render` — the pull-request and tracking-issue bodies (templates);
* :mod:`.run` — the orchestration: lock, journal, edits, build, reruns;
* :mod:`.state` — where a release stands (read from the repository) and the refusals it implies;
* :mod:`.admit` — late admission: the packages whose pins still leave a supported release out;
* :mod:`.report` — ``sweep report``: the release's report, read-only.
"""

from conda_distro.recipe.edit import EditError
from conda_distro.sweep.edit import add_release_text, edited_recipe, edited_text
from conda_distro.sweep.model import (
    Decision,
    PinEdit,
    ReleaseTest,
    SweepCommit,
    SweepDocument,
    SweepOptions,
    SweepPlan,
    SweepResult,
)
from conda_distro.sweep.plan import decide, plan_sweep, to_test, widen
from conda_distro.sweep.render import pr_body, tracking_issue
from conda_distro.sweep.run import run_sweep, sweep

__all__ = ["Decision", "EditError", "PinEdit", "ReleaseTest", "SweepCommit", "SweepDocument", "SweepOptions", "SweepPlan", "SweepResult",
           "add_release_text", "decide", "edited_recipe", "edited_text", "plan_sweep", "pr_body", "run_sweep",
           "sweep", "to_test", "tracking_issue", "widen"]
