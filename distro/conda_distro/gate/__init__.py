"""The promotion gate's policies that live in modules of their own (:mod:`.flaky`)."""
