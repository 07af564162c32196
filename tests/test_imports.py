"""The package's imports flow one way (README, Architecture): no import circles, and no module reaching
into another module's ``_private`` names.

The graph is read from the source with the stdlib ``ast``: every ``import`` of a ``conda_distro`` module,
at module level or inside a function (a lazy import only hides a circle), and under
``typing.TYPE_CHECKING`` too. Importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` first,
so an import of a module is also an edge to each package above it (except the importer's own packages).
The cycle check is the stdlib's ``graphlib.TopologicalSorter``. The layer contract is the README's table of
layers (section Architecture), bottom to top: a module imports only from its own layer or a layer below.
"""

from __future__ import annotations

import ast
import graphlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import conda_distro

PACKAGE_DIR = Path(conda_distro.__file__).parent
SKIP = ("sandbox/data/",)  # the sandbox's upstream sources: data, not conda_distro modules


@dataclass
class ImportGraph:
    modules: dict[str, Path] = field(default_factory=dict)  # dotted name -> file
    edges: dict[str, dict[str, int]] = field(default_factory=dict)  # importer -> imported -> first line
    private: list[str] = field(default_factory=list)  # "importer:line imports _name from module"

    def cycle(self) -> list[str] | None:
        """One import circle (``[a, b, ..., a]``), or None."""
        try:
            graphlib.TopologicalSorter({m: set(self.edges.get(m, {})) for m in self.modules}).prepare()
        except graphlib.CycleError as exc:
            return list(exc.args[1])
        return None

    def folded(self) -> ImportGraph:
        """The graph with each subpackage of ``conda_distro`` folded into one node (imports inside it dropped)."""
        def node(module: str) -> str:
            return ".".join(module.split(".")[:2])
        out = ImportGraph()
        for m, path in self.modules.items():
            out.modules.setdefault(node(m), path)
        for importer, targets in self.edges.items():
            for target, line in targets.items():
                if node(importer) != node(target):
                    out.edges.setdefault(node(importer), {}).setdefault(node(target), line)
        return out

    def describe(self, cycle: list[str]) -> str:
        # CycleError lists the circle so that each node is imported by the next one
        steps = [f"{b} (line {self.edges[b][a]}) imports {a}" for a, b in zip(cycle, cycle[1:], strict=False)]
        return "; ".join(steps)


def _module_name(path: Path, base: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(base).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def build_graph(package_dir: Path) -> ImportGraph:
    graph = ImportGraph()
    base = package_dir.parent
    files = [p for p in sorted(package_dir.rglob("*.py")) if not any(s in p.relative_to(package_dir).as_posix() for s in SKIP)]
    kinds: dict[str, bool] = {}
    for path in files:
        name, is_package = _module_name(path, base)
        graph.modules[name] = path
        kinds[name] = is_package
    for name, path in graph.modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        module_aliases: dict[str, str] = {}  # local name -> conda_distro module (import x as y / from p import mod)
        for node in ast.walk(tree):
            targets: list[tuple[str, str | None]] = []  # (module, name imported from it or None)
            if isinstance(node, ast.Import):
                for alias in node.names:
                    targets.append((alias.name, None))
                    if alias.asname and alias.name in graph.modules:
                        module_aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                source = _absolute(name, kinds[name], node)
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    if submodule in graph.modules:
                        targets.append((submodule, None))
                        module_aliases[alias.asname or alias.name] = submodule
                    else:
                        targets.append((source, alias.name))
            for target, imported in targets:
                if target not in graph.modules:
                    continue
                _add_edges(graph, name, target, node.lineno)
                if imported and imported.startswith("_") and not imported.startswith("__") and target != name:
                    graph.private.append(f"{name}:{node.lineno} imports {imported} from {target}")
        for node in ast.walk(tree):  # mod._private, where mod is an imported conda_distro module
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in module_aliases and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                graph.private.append(f"{name}:{node.lineno} uses {node.attr} of {module_aliases[node.value.id]}")
    return graph


def _add_edges(graph: ImportGraph, importer: str, target: str, line: int) -> None:
    parts = target.split(".")
    for i in range(2, len(parts) + 1):  # the target and each package above it (not `conda_distro` itself)
        imported = ".".join(parts[:i])
        if imported in graph.modules and imported != importer and not importer.startswith(imported + "."):
            graph.edges.setdefault(importer, {}).setdefault(imported, line)


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return build_graph(PACKAGE_DIR)


def test_the_graph_sees_the_package(graph):
    # the walk must find the modules and their imports, or the checks below would pass on nothing
    assert {"conda_distro.engine.plan", "conda_distro.lint", "conda_distro.proposal.load", "conda_distro.cli.app"} \
        <= set(graph.modules)
    assert graph.edges["conda_distro.engine.plan"]["conda_distro.engine.releases"]
    assert "conda_distro.lint" in graph.edges["conda_distro.checkpr.check"]


def test_imports_have_no_circles(graph):
    cycle = graph.cycle()
    assert cycle is None, f"import circle: {graph.describe(cycle)}"


def test_packages_have_no_circles_either(graph):
    """Folders flow one way too: a subpackage (engine/, sweep/, reports/, ...) taken as one node and each
    top-level module as another, no two import each other, however indirectly (a circle only through
    a folder's different files would leave the README's picture wrong)."""
    cycle = graph.folded().cycle()
    assert cycle is None, f"package circle: {' <- '.join(cycle)}"


def test_no_module_imports_another_modules_private_names(graph):
    assert graph.private == []


def make_package(root: Path, files: dict[str, str]) -> Path:
    """A ``conda_distro`` package under ``root`` with these files (relative path -> text)."""
    pkg = root / "conda_distro"
    for rel, text in {"__init__.py": "", **files}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return pkg


def test_the_checks_fail_on_a_circle_and_on_a_private_import(tmp_path):
    pkg = make_package(tmp_path, {
        "a.py": "from conda_distro.b import thing\n",
        "b.py": "def f():\n    from conda_distro.sub.c import _helper\n",  # lazy: still a circle
        "sub/__init__.py": "",
        "sub/c.py": "import conda_distro.a as a_mod\n\nx = a_mod._hidden\n"})
    graph = build_graph(pkg)
    assert set(graph.cycle() or []) == {"conda_distro.a", "conda_distro.b", "conda_distro.sub.c"}
    assert graph.private == ["conda_distro.b:2 imports _helper from conda_distro.sub.c",
                             "conda_distro.sub.c:3 uses _hidden of conda_distro.a"]
    (pkg / "b.py").write_text("thing = 1\n")
    assert build_graph(pkg).cycle() is None


def test_a_circle_between_folders_counts(tmp_path):
    # low/a imports top, top imports low/b: no module circle, but the folder low/ and top import each other
    pkg = make_package(tmp_path, {"top.py": "from conda_distro.low.b import B\n", "low/__init__.py": "",
                                  "low/a.py": "from conda_distro.top import B\n", "low/b.py": "B = 1\n"})
    graph = build_graph(pkg)
    assert graph.cycle() is None
    assert set(graph.folded().cycle() or []) == {"conda_distro.top", "conda_distro.low"}
    (pkg / "low" / "a.py").write_text("A = 1\n")
    assert build_graph(pkg).folded().cycle() is None


def test_a_circle_through_a_package_init_counts(tmp_path):
    # x imports sub.d, which runs sub/__init__.py first, which imports x
    pkg = make_package(tmp_path, {"x.py": "from conda_distro.sub.d import D\n",
                                  "sub/__init__.py": "from conda_distro import x\n", "sub/d.py": "D = 1\n"})
    assert set(build_graph(pkg).cycle() or []) == {"conda_distro.x", "conda_distro.sub"}
    (pkg / "sub" / "__init__.py").write_text("")
    assert build_graph(pkg).cycle() is None


README = Path(__file__).resolve().parent.parent / "README.md"


def readme_layers(text: str) -> list[list[str]]:
    """The README's layers, bottom to top: each a list of places, ``errors.py`` (a module) or ``util/`` (a
    room), from the rows ``| N | `place`, ... | ... |`` of the table under "Layers, bottom to top"."""
    section = text.split("## Architecture\n", 1)[1].split("\n## ", 1)[0]
    after = section.split("Layers, bottom to top", 1)[1]
    table = after[after.index("\n|"):].split("\n\n", 1)[0]  # the table: from its first row to a blank line
    layers = []
    for line in table.splitlines():
        row = re.match(r"\| *(\d+) *\|([^|]*)\|", line)
        if row:
            assert int(row.group(1)) == len(layers) + 1, f"README's layers out of order at: {line}"
            layers.append(re.findall(r"`([\w/]+(?:\.py|/))`", row.group(2)))
    return layers


def layer_of(layers: list[list[str]], module: str) -> int | None:
    """The index of the layer holding ``module`` (a dotted name under ``conda_distro``), or None."""
    rel = module.split(".")[1:] or ["__init__"]
    for i, places in enumerate(layers):
        for place in places:
            if (place.endswith("/") and rel[0] == place[:-1]) or place == "/".join(rel) + ".py":
                return i
    return None


def upward_imports(graph: ImportGraph, layers: list[list[str]]) -> list[str]:
    """Every import against the layers: an importer below what it imports, or a module in no layer."""
    out = [f"{m} is in no layer of the README's table" for m in graph.modules if layer_of(layers, m) is None]
    for importer, targets in graph.edges.items():
        low = layer_of(layers, importer)
        for target, line in targets.items():
            high = layer_of(layers, target)
            if low is not None and high is not None and high > low:
                out.append(f"{importer}:{line} (layer {low + 1}) imports {target} (layer {high + 1})")
    return sorted(out)


def test_imports_flow_down_the_readmes_layers(graph):
    layers = readme_layers(README.read_text(encoding="utf-8"))
    assert len(layers) >= 8 and ["util/"] in layers  # the table was found, not an empty picture
    assert upward_imports(graph, layers) == []


def test_the_layer_check_fails_on_an_arrow_up(tmp_path):
    # the old arrow: the retirement (a gate module) importing the reports above it
    layers = [["errors.py", "__init__.py"], ["state/"], ["gate/", "retire.py"], ["reports/"], ["cli/"]]
    pkg = make_package(tmp_path, {
        "errors.py": "", "state/__init__.py": "", "state/records.py": "from conda_distro import errors\n",
        "gate/__init__.py": "", "reports/__init__.py": "", "cli/__init__.py": "from conda_distro import retire\n",
        "reports/facts.py": "from conda_distro.state.records import x\n",
        "retire.py": "from conda_distro.state.records import x\nfrom conda_distro.reports.facts import gather\n"})
    assert upward_imports(build_graph(pkg), layers) == [
        "conda_distro.retire:2 (layer 3) imports conda_distro.reports (layer 4)",
        "conda_distro.retire:2 (layer 3) imports conda_distro.reports.facts (layer 4)"]
    (pkg / "retire.py").write_text("from conda_distro.state.records import x\n")
    assert upward_imports(build_graph(pkg), layers) == []
    (pkg / "stray.py").write_text("")  # a module nobody placed is refused too
    assert upward_imports(build_graph(pkg), layers) == ["conda_distro.stray is in no layer of the README's table"]


def test_the_readme_layers_are_read_as_written():
    text = ("## Architecture\nLayers, bottom to top:\n\n| layer | places | job |\n|---|---|---|\n"
            "| 1 | `errors.py`, `__init__.py` | errors |\n| 2 | `util/` | tools |\n\nafter\n## Next\n")
    layers = readme_layers(text)
    assert layers == [["errors.py", "__init__.py"], ["util/"]]
    assert layer_of(layers, "conda_distro") == 0 and layer_of(layers, "conda_distro.util.fsutil") == 1
    assert layer_of(layers, "conda_distro.errors") == 0 and layer_of(layers, "conda_distro.utility") is None


def test_readme_lists_every_module(graph):
    """The README's architecture table names every module of the package (cli/ as ``cli/*.py``)."""
    import re as _re

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Architecture\n", 1)[1].split("\n## ", 1)[0]
    listed = set(_re.findall(r"`([\w/]+\.py)`", section))
    modules = {p.relative_to(PACKAGE_DIR).as_posix() for p in graph.modules.values()}
    missing = sorted(m for m in modules if m not in listed and not (m.startswith("cli/") and "cli/*.py" in section))
    assert not missing, f"README's architecture section does not list: {missing}"
    stale = sorted(m for m in listed if m not in modules and "*" not in m and not m.startswith("tests/"))
    assert not stale, f"README's architecture section lists modules that do not exist: {stale}"
