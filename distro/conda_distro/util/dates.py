"""The tool's clock, and dates given on the command line (``--as-of``): one parser for the reports, lint
and retire.

:func:`utcnow` is the one clock behind every date the tool records or compares with: test results, the
ledger's promotions and retirements, the excuses' days waiting, the expiry of hints, the reports' default
day. TEST HOOK ONLY: ``CONDA_DISTRO_TEST_TODAY=YYYY-MM-DD`` moves that clock to the given day, keeping the
time of day, so that ``bench/bench_lifecycle.py`` can play months of a channel in minutes (it moves git's
dates with ``GIT_AUTHOR_DATE``/``GIT_COMMITTER_DATE`` alike). Nothing else reads the variable; unset, the
clock is the system's.
"""

from __future__ import annotations

import datetime as dt
import os

from conda_distro.errors import UsageError

TEST_TODAY_ENV = "CONDA_DISTRO_TEST_TODAY"

#: the earliest ``--as-of`` (dates before it are typos: PyTorch, git's dates and the ledger are all later)
EARLIEST = dt.date(2000, 1, 1)


def utcnow() -> dt.datetime:
    """Now, in UTC, whole seconds (``$CONDA_DISTRO_TEST_TODAY``, when set, names the day: see above)."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    day = os.environ.get(TEST_TODAY_ENV)
    if not day:
        return now
    try:
        return dt.datetime.combine(dt.date.fromisoformat(day.strip()), now.timetz())
    except ValueError:
        raise UsageError(f"{TEST_TODAY_ENV}={day!r} is not a date", field=TEST_TODAY_ENV,
                         hint="a test hook: write the day as YYYY-MM-DD, or unset it") from None


def parse_as_of(text: str | None, today: dt.date | None = None) -> dt.date:
    """``--as-of YYYY-MM-DD``; today (UTC) when not given."""
    if text is None:
        return today or utcnow().date()
    try:
        day = dt.date.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"'{text}' is not a date", field="--as-of",
                         hint="write the date as YYYY-MM-DD, e.g. --as-of 2025-06-01") from None
    if day < EARLIEST:
        raise UsageError(f"'{text}' is before {EARLIEST.isoformat()}, earlier than anything this tool reports on",
                         field="--as-of", hint="give a date of this century, e.g. --as-of 2025-06-01")
    if day >= dt.date.max:  # the report looks at everything before the end of that day
        raise UsageError(f"'{text}' is past the last date this tool can report on", field="--as-of",
                         hint=f"give a date before {dt.date.max.isoformat()}")
    return day
