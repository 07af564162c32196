"""Dates given on the command line (``--as-of``): one parser for the reports, lint and retire."""

from __future__ import annotations

import datetime as dt

from conda_distro.errors import UsageError

#: the earliest ``--as-of`` (dates before it are typos: PyTorch, git's dates and the ledger are all later)
EARLIEST = dt.date(2000, 1, 1)


def parse_as_of(text: str | None, today: dt.date | None = None) -> dt.date:
    """``--as-of YYYY-MM-DD``; today (UTC) when not given."""
    if text is None:
        return today or dt.datetime.now(dt.UTC).date()
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
