"""The build/test engine: plan (pure data) -> executors behind small backends -> typed results.

* :mod:`.releases`   — which release × variant a package is tested against, and the release views
  (one-file pin channels) that force a test environment onto exactly that pytorch build.
* :mod:`.plan`       — :class:`BuildPlan`: what will be built, skipped and tested (``--dry-run`` prints it).
* :mod:`.backends`   — builders (rattler-build default, conda-build optional) behind one protocol.
* :mod:`.executor`   — runs a plan in dependency order, concurrently where independent.
* :mod:`.unit`       — one package, orchestrator side: prepare it, run its phases, finish (results).
* :mod:`.phases`     — its sandboxed phases: one build sandbox per package, one test sandbox per test.
* :mod:`.worker`     — the runner: the process that runs recipe code (builds, tests), non-dumpable,
  reporting on a private pipe (:mod:`.jobs`: what it is told and what it reports).
* :mod:`.sandbox`    — what a bubblewrap sandbox shows; :mod:`.supervise` runs one and watches it
  (limits from :mod:`.limits`, capped streamed logs).
* :mod:`.sources`    — url sources fetched into a content-addressed cache before a build.
* :mod:`.intake`     — from a build's output folder into staging: sealed, only declared names.
"""
