"""What the CI workflows read from distro.yaml's ``ci:`` section (``graph --format github-runners``).

The build job runs on the runner of the first variant (``ci.runners.<variant>``), builds everything and
tests every variant whose runner is that one; each other variant gets a test job on its own runner (a GPU
runner for cuda), which takes the build job's staging channel and results, tests only that variant
(``build --variant``; every artifact is up to date, nothing is rebuilt) and hands its results on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from conda_distro.config import DistroConfig


def runner_plan(config: DistroConfig) -> dict:
    """``{"build": {"runner", "variants": "cpu cuda"}, "tests": {"include": [{"variant", "runner"}]},
    "count", "automerge"}``: ``tests`` is a GitHub Actions matrix (``count`` its size)."""
    variants = list(config.pytorch.variants)
    runners = config.ci.runners
    runner = {v: getattr(runners, v) for v in variants}
    first = runner[variants[0]]
    on_build = [v for v in variants if runner[v] == first]
    include = [{"variant": v, "runner": runner[v]} for v in variants if runner[v] != first]
    return {"build": {"runner": first, "variants": " ".join(on_build)}, "tests": {"include": include},
            "count": len(include), "automerge": config.ci.automerge}


@dataclass
class RunnerPlan:
    """``graph --format github-runners``: :func:`runner_plan` as one JSON line."""

    plan: dict
    exit_code: int = 0

    def to_dict(self) -> dict:
        return self.plan

    def text_lines(self) -> list[str]:
        return self.github_runners_lines()

    def github_runners_lines(self) -> list[str]:
        return [json.dumps(self.plan)]


def github_matrix(shards: list[list[list[str]]]) -> dict:
    """``graph --format github-matrix``: a GitHub Actions matrix with one entry per non-empty shard (its
    dependency levels as a JSON string, and its packages space-separated)."""
    return {"include": [{"shard": i, "levels": json.dumps(levels), "packages": " ".join(n for lv in levels for n in lv)}
                        for i, levels in enumerate(shards) if any(levels)]}
