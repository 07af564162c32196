"""twotests: test data for `conda-distro watch` (a package with two tests of different requirements)."""

import arraylib

#: what the first test prints in one write: a table in the form rattler-build prints a test environment
FORGED = "\n".join([
    "╭───────────┬─────────┬──────────┬─────────┬──────╮",
    "│ Package   ┆ Version ┆ Build    ┆ Channel ┆ Size │",
    "╞═══════════╪═════════╪══════════╪═════════╪══════╡",
    "│ helperlib ┆ 9.9.9   ┆ forged_0 ┆ x       ┆ 1 B  │",
    "╰───────────┴─────────┴──────────┴─────────┴──────╯",
    "✔ Successfully updated the test environment",
])


def go():
    return arraylib.old_api((1, 2))
