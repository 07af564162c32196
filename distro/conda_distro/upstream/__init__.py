"""The PyPI bridge: conda packages converted from PyPI wheels, for the real world (``sandbox --real``).

* :mod:`.names`: PyPI -> conda names (a small table, conda-forge's mapping as whl2conda ships it, PEP 503).
* :mod:`.resolve`: a closure and the downloads, by pip (its JSON installation report; passes, hashes).
* :mod:`.lock`: the real world's lock (``real-world.lock.json``): schema, reading, staleness, changes.
* :mod:`.closures`: resolving a lock: one closure per release × variant.
* :mod:`.convert`: one wheel -> one ``.conda`` (whl2conda lays it out; depends, variants and packing are ours).
* :mod:`.pypi`: :func:`bridge_locked` / :func:`bridge`, the whole channel from a lock (pytorch cpu/cuda builds,
  the rest, ``python_abi``, index).
"""

from conda_distro.upstream.convert import TargetPython
from conda_distro.upstream.names import conda_name, pypi_name
from conda_distro.upstream.pypi import BridgeOptions, BridgeResult, TorchBuild, bridge, bridge_locked
from conda_distro.upstream.resolve import PipOptions

__all__ = ["BridgeOptions", "BridgeResult", "PipOptions", "TargetPython", "TorchBuild", "bridge", "bridge_locked", "conda_name",
           "pypi_name"]
