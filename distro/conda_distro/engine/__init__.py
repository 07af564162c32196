"""The build/test engine: plan (pure data) -> executors behind small backends -> typed results.

* :mod:`.releases`   — which release × variant a package is tested against, and the release views
  (one-file pin channels) that force a test environment onto exactly that pytorch build.
* :mod:`.plan`       — :class:`BuildPlan`: what will be built, skipped and tested (``--dry-run`` prints it).
* :mod:`.backends`   — builders (rattler-build default, conda-build optional) behind one protocol.
* :mod:`.executor`   — runs a plan in dependency order, concurrently where independent.
"""
