"""The build/test engine: plan (pure data) -> executors behind small backends -> typed results.

* :mod:`.releases`   — which release × variant a package is tested against, and the release views
  (one-file pin channels) that force a test environment onto exactly that pytorch build.
* :mod:`.plan`       — :class:`BuildPlan`: what will be built, skipped and tested (``--dry-run`` prints it).
* :mod:`.backends`   — builders (rattler-build default, conda-build optional) behind one protocol.
* :mod:`.executor`   — runs a plan in dependency order, concurrently where independent.
* :mod:`.unit`       — one package, orchestrator side: prepare its worker, run it, finish (results).
* :mod:`.worker`     — the process that runs recipe code (builds, tests); it writes nothing outside its folder.
* :mod:`.sandbox`    — bubblewrap around the worker, and the fixed environment recipes are rendered in.
* :mod:`.intake`     — from a worker's private output folder into staging: only declared names.
"""
