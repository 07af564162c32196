"""Reports over the ledger (channel_state/) and the repository (recipes, distro.yaml, git history).

* :mod:`~conda_distro.reports.facts` — what the repository and the ledger say, as of a date: when each
  release was added, the last commit touching each recipe, the artifacts in main and their tests.
* :mod:`~conda_distro.reports.unmaintained` — `report unmaintained` (spec §8): which packages lag, why,
  and the suggested action (``ping`` / ``retire``).
* :mod:`~conda_distro.reports.status` — `status`: the static HTML status page.
* :mod:`~conda_distro.state.records` — retirement request records (``channel_state/retirements/``).

Nothing here reads a channel: CI can publish the status page from a plain checkout.
"""
