"""Static checks of the package and the test suite: declared imports, py.typed, ruff, mypy.

Settings live in pyproject.toml (``[tool.ruff]``, ``[tool.mypy]``). The package and tests/ are kept clean:
any finding fails the run (raised as StaticFindings with the count per rule), and so does a tool that
crashes or is missing.
"""

from __future__ import annotations

import ast
import collections
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "distro" / "conda_distro"
SANDBOX_DATA = PACKAGE / "sandbox" / "data"  # recipe sources built into sandbox packages, not our code
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
# imported only when a user asks for them, and a clear exit 2 when missing
OPTIONAL_IMPORTS = {"libmambapy": "solve --solver libmamba (tests/test_solve.py: missing is exit 2)"}


class StaticFindings(Exception):
    """ruff or mypy ran and reported findings (not: failed to run)."""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def third_party_imports() -> dict[str, set[str]]:
    """Top-level module -> the package files importing it (absolute imports that are not stdlib)."""
    found: dict[str, set[str]] = collections.defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        if SANDBOX_DATA in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top != "conda_distro":
                    found[top].add(str(path.relative_to(REPO)))
    return found


def test_every_third_party_import_is_declared():
    # (the `real` extra: what only `sandbox --real` imports, asked for by name when it is missing)
    declared = {_normal(Requirement(r).name) for r in [*PYPROJECT["project"]["dependencies"],
                                                       *PYPROJECT["project"]["optional-dependencies"]["real"]]}
    providers = importlib.metadata.packages_distributions()
    imports = third_party_imports()
    assert {"rattler", "rattler_build", "typer", "pydantic"} <= set(imports)  # the walk found the imports
    undeclared = {}
    for module, files in sorted(imports.items()):
        if module in OPTIONAL_IMPORTS:
            continue
        dists = {_normal(d) for d in providers.get(module, [])}
        if not dists & declared:
            undeclared[module] = (sorted(dists) or "no installed distribution", sorted(files))
    assert not undeclared, f"imported but not in [project].dependencies (or the real extra): {undeclared}"
    # and nothing is declared that the package does not import
    imported_dists = {_normal(d) for m in imports for d in providers.get(m, [])}
    assert declared <= imported_dists, f"declared but never imported: {sorted(declared - imported_dists)}"


def test_the_package_is_marked_typed():
    assert (PACKAGE / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["conda_distro"]


def test_the_test_extra_holds_the_static_checkers():
    extra = {_normal(Requirement(r).name) for r in PYPROJECT["project"]["optional-dependencies"]["test"]}
    assert {"ruff", "mypy"} <= extra
    assert PYPROJECT["tool"]["mypy"]["files"] == ["distro/conda_distro"]
    assert {"E", "F", "I", "B", "UP", "SIM"} <= set(PYPROJECT["tool"]["ruff"]["lint"]["select"])


def run_tool(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], cwd=REPO, capture_output=True, text=True, timeout=600)


def ruff(*paths: str) -> None:
    """Raise StaticFindings with the count per rule when ruff reports anything under ``paths``."""
    proc = run_tool("ruff", "check", "--no-cache", "--output-format", "concise", *paths)
    findings = re.findall(r"^\S+:\d+:\d+: ([A-Z]+\d+) ", proc.stdout, re.MULTILINE)
    assert proc.returncode in (0, 1) and bool(findings) is (proc.returncode == 1), proc.stdout + proc.stderr
    if findings:
        per_rule = collections.Counter(findings).most_common()
        raise StaticFindings(f"ruff: {len(findings)} findings {per_rule}\n{proc.stdout}")


def test_ruff_finds_nothing_in_the_tests():
    ruff("tests")


def test_ruff_finds_nothing_in_the_package():
    ruff("distro/conda_distro")


def test_ruff_finds_nothing_in_the_benchmarks():
    ruff("bench")


def test_every_benchmark_imports():
    """bench/ runs by hand and in the nightly workflow, not in this suite: each script must at least import
    against today's package (a function renamed in the package once broke bench_gate.py unseen)."""
    bench = REPO / "bench"
    names = sorted(p.stem for p in bench.glob("*.py"))
    code = "import importlib, sys; sys.path.insert(0, sys.argv[1]); [importlib.import_module(m) for m in sys.argv[2:]]"
    res = subprocess.run([sys.executable, "-c", code, str(bench), *names], capture_output=True, text=True, timeout=120)
    assert len(names) >= 10 and res.returncode == 0, res.stderr[-3000:]


def test_mypy_finds_nothing():
    proc = run_tool("mypy")  # files and strictness from [tool.mypy]
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    ran = re.fullmatch(r"Found \d+ errors? in \d+ files? \(checked \d+ source files?\)|Success: no issues found in \d+ source files?",
                       summary)
    assert proc.returncode in (0, 1) and ran, proc.stdout + proc.stderr
    if proc.returncode:
        per_code = collections.Counter(re.findall(r"  \[([a-z-]+)\]$", proc.stdout, re.MULTILINE)).most_common()
        raise StaticFindings(f"mypy: {summary} {per_code}\n{proc.stdout}")
