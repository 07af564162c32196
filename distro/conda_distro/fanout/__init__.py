"""Fan-out of a build over CI runners by dependency level, and the fan-in to one verdict.

* :mod:`.plan` — the shards of a run (pure data: dependency levels, big levels split, deep graphs folded
  into the last stage); what the plan job prints as GitHub Actions matrices. No recipe code runs.
* :mod:`.bundle` — what one shard hands on (its staging artifacts, results, logs and report, with
  sha256s) and the checks every reader of a bundle makes (this run, this checkout's recipes, its own
  packages only).
* :mod:`.shard` — a shard job: take the bundles of earlier stages, build and test its own packages as the
  single-machine build would, write its bundle.
* :mod:`.sweep` — the release sweep fanned out: its jobs run the sweep itself, with the build swapped for
  the shards' plan, one shard's build, or the merged bundles.
* :mod:`.fanin` — the fan-in: merge the checked bundles into staging and the results store, one report;
  the PR gate, promote and the reports read that, nothing is built.
"""
