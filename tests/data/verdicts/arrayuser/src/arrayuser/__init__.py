"""arrayuser: calls arraylib.old_api (test data for `conda-distro watch`)."""

import arraylib
import helperlib


def go():
    return helperlib.identity(arraylib.old_api((1, 2, 3)))
