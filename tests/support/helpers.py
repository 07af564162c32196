"""Small helpers shared by the test modules (import them: ``from helpers import run_cli``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from conda_distro.cli import main


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``conda-distro ARGV`` in-process; return (exit code, stdout, stderr) of that call only."""
    capsys.readouterr()
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def run_cli_at(capsys, root: Path, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, *args, "--root", str(root))


def run_json_at(capsys, root: Path, *args: str) -> tuple[int, dict]:
    code, out, err = run_cli_at(capsys, root, *args, "--format", "json")
    assert out.strip(), f"no JSON on stdout (exit {code}); stderr:\n{err}"
    return code, json.loads(out)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def upstream_pytorch_builds(root: Path) -> dict[tuple[str, str], str]:
    """(release, cpu|cuda) -> build string of the world's upstream pytorch packages (cuda builds depend on __cuda)."""
    out = {}
    for rd in (root / "upstream").glob("*/repodata.json"):
        data = json.loads(rd.read_text())
        for rec in {**data.get("packages", {}), **data.get("packages.conda", {})}.values():
            if rec["name"] == "pytorch":
                cuda = any(d.split()[0] == "__cuda" for d in rec.get("depends", []))
                out[(rec["version"], "cuda" if cuda else "cpu")] = rec["build"]
    return out


def with_provenance(root: Path, res, *, commit: str | None = None):
    """Hand-written results (``ArtifactResults``) with the provenance a build in ``root`` records: the
    recipe folder ``recipes/<name>`` (a placeholder recipe is written when the folder is missing), its
    recipe input hash, on the artifact and on every test."""
    from conda_distro.state.provenance import recipe_digest
    from support.repos import clean_recipe_text

    folder = root / "recipes" / res.name
    if not folder.is_dir():
        folder.mkdir(parents=True)
        (folder / "recipe.yaml").write_text(clean_recipe_text(res.name, version=res.version))
    rel, digest = f"recipes/{res.name}", recipe_digest(folder)
    tests = [t.model_copy(update={"recipes": {rel: digest}, "commit": commit}) for t in res.tests]
    return res.model_copy(update={"recipe": rel, "recipe_hash": digest, "commit": commit, "tests": tests})


def recorded_env(res, files):
    """Hand-written results whose every test records the environment a build would: each distribution
    dependency, direct or not (a name among ``files``, ChannelFiles), as the newest file of that name."""
    from rattler import Version

    from conda_distro.channels.depends import parse_dep
    from conda_distro.gate.revdeps import ident

    newest = {}
    for f in files:
        if f.name not in newest or Version(f.version) > Version(newest[f.name].version):
            newest[f.name] = f
    def deps_of(depends):
        return [d.name for d in (parse_dep(t) for t in depends) if d is not None and d.name in newest]

    todo, seen = deps_of(res.depends), set()
    while todo:  # the environment holds the dependencies' dependencies too
        n = todo.pop()
        if n not in seen and n != res.name:
            seen.add(n)
            todo += deps_of(newest[n].depends)
    against = {n: ident(newest[n]) for n in sorted(seen)}
    return res.model_copy(update={"tests": [t.model_copy(update={"against": dict(against)}) for t in res.tests]})
