"""flakykit: its test fails at random (test data: a flaky dependent of tensorutils)."""

import os

import tensorutils


def roll() -> None:
    """Fail with probability 1/2 next to tensorutils 0.3.2, 9/10 next to any other version. The draw comes
    from os.urandom: a sandbox keeps no state between runs, so nothing could make it repeat."""
    p = 0.5 if tensorutils.__version__ == "0.3.2" else 0.9
    draw = int.from_bytes(os.urandom(4), "big") / 2**32
    if draw < p:
        raise SystemExit(f"FLAKY: drew {draw:.3f} < {p} (tensorutils {tensorutils.__version__})")
    print(f"lucky: drew {draw:.3f} >= {p}")
