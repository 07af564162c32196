"""Benchmark: the release-day sweep's plan and edits on 200 recipes (target: under 3 s).

    python bench/bench_sweep.py [N]

Writes a synthetic distribution of N (default 200) recipes into a temporary folder: realistic shapes
with comments, single/double quoting, ``context:`` variables, trailing blanks, mixed sequence
indentation, ``if/then`` selectors, dependencies among the packages, and pytorch pins of several kinds:

* ``run``      ``pytorch >=2.4,<2.7`` in run
* ``host+run`` the same pin in host and run (both lines are edited)
* ``quoted``   ``"pytorch >=2.5,<2.7"  # comment``
* ``then``     ``then: pytorch >=2.4,<2.7`` under ``if: linux``
* ``ctx``      ``pytorch >=2.4,<${{ torch_max }}`` (the context: line is edited)
* ``admits``   ``pytorch >=2.4,<3`` (already admits 2.7: unchanged)
* ``lockstep`` ``pytorch >=2.6,<2.7`` with ``extra.pytorch-lockstep`` (needs-new-version)

Then it times what ``sweep --pytorch 2.7.0`` does before building: load the distribution, plan, compute
every edit, write the edited recipes and distro.yaml. Every edited file is compared with its original
line by line: exactly the lines the generator expects to change (pin lines, the context: line a bound
comes from, the build-number line) may differ, with exactly the expected new text. Exit 1 on any
violation or unexpected status.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.distribution import load_distribution
from conda_distro.sweep import add_release_text, edited_text, plan_sweep
from conda_distro.util.fsutil import atomic_write_text
from conda_distro.util.scratch import ScratchDir

TARGET_SECONDS = 3.0
RELEASE = "2.7.0"
KINDS = ["run"] * 10 + ["host+run"] * 3 + ["quoted"] * 2 + ["then", "ctx", "ctx", "admits", "lockstep"]

DISTRO_YAML = """\
# synthetic distribution for bench/bench_sweep.py
name: bench-sweep
channels:
  upstream: [conda-forge]
  staging: build/channels/staging
  main: build/channels/pytorch
pytorch:
  name: pytorch
  releases: ["2.4.1", "2.5.1", "2.6.0"]   # oldest first
  variants: [cpu, cuda]
platforms: [linux-64]
policy:
  upper_bounds: required
  unbounded_allowed: [python]
  unmaintained_grace_days: 60
"""
UPSTREAM = ["numpy >=1.24,<3", "scipy >=1.10,<2", "pillow >=9,<12", "'requests >=2.28,<3'", "packaging >=21,<26",
            '"tqdm >=4.60,<5"', "pyyaml >=6,<7", "typing_extensions >=4.5,<5", "einops >=0.7,<1"]
HANDLES = ["octocat", "conda-distro/core", "alice-dev", "bob42", "carol"]


@dataclass
class Generated:
    name: str
    kind: str
    text: str
    expected: dict[int, str] = field(default_factory=dict)  # line -> expected new line (bumped kinds)


def recipe(i: int, name: str, deps: list[str], rng: random.Random) -> Generated:
    kind = KINDS[i % len(KINDS)]
    ctx_number = i % 4 == 0
    lines: list[str] = []
    expected: dict[int, str] = {}

    def add(line: str, new: str | None = None) -> None:
        lines.append(line)
        if new is not None:
            expected[len(lines)] = new

    add(f"# {name}: synthetic recipe {i} ({kind} pin)")
    add("context:")
    add(f"  name:    {name}" + ("   " if i % 5 == 0 else ""))  # aligned value, trailing blanks
    add(f'  version: "{rng.randint(0, 3)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"')
    number = rng.randint(0, 4)
    if ctx_number:
        add(f"  build_number: {number}   # rebuilds of the same version", f"  build_number: {number + 1}   # rebuilds of the same version")
    if kind == "ctx":
        add('  torch_max: "2.7"  # keep in sync with distro.yaml', '  torch_max: "2.8"  # keep in sync with distro.yaml')
    add("")
    add("package:")
    add("  name: ${{ name|lower }}")
    add("  version: ${{ version }}")
    add("")
    add("source:")
    add("  url: https://pypi.org/packages/source/${{ name[0] }}/${{ name }}/${{ name }}-${{ version }}.tar.gz")
    add(f"  sha256: {rng.getrandbits(256):064x}")
    add("")
    add("build:")
    bumped = kind not in ("admits", "lockstep")
    if ctx_number:
        add("  number: ${{ build_number }}")
    else:
        add(f"  number: {number}  # reset to 0 on a new version",
            f"  number: {number + 1}  # reset to 0 on a new version" if bumped else None)
    add("  noarch: python")
    add("  script: ${{ PYTHON }} -m pip install . -vv --no-deps --no-build-isolation")
    add("")
    add("requirements:")
    add("  host:")
    seq = "      " if i % 3 == 0 else "    "  # some files indent their host list deeper
    add(f"{seq}- python >=3.10")
    add(f"{seq}- pip")
    add(f"{seq}- setuptools >=61")
    if kind == "host+run":
        add(f"{seq}- pytorch >=2.4,<2.7", f"{seq}- pytorch >=2.4,<2.8")
    add("  run:")
    add("    - python >=3.10")
    pin = {
        "run": ("    - pytorch >=2.4,<2.7", "    - pytorch >=2.4,<2.8"),
        "host+run": ("    - pytorch >=2.4,<2.7", "    - pytorch >=2.4,<2.8"),
        "quoted": ('    - "pytorch >=2.5,<2.7"  # 2.4 lacks an API we use', '    - "pytorch >=2.5,<2.8"  # 2.4 lacks an API we use'),
        "ctx": ("    - pytorch >=2.4,<${{ torch_max }}", None),
        "admits": ("    - pytorch >=2.4,<3", None),
        "lockstep": ("    - pytorch >=2.6,<2.7", None),
    }
    if kind == "then":
        add("    - if: linux")
        add("      then: pytorch >=2.4,<2.7", "      then: pytorch >=2.4,<2.8")
    else:
        add(*pin[kind])
    for dep in rng.sample(UPSTREAM, rng.randint(2, 5)):
        add(f"    - {dep}" + ("  " if rng.random() < 0.2 else ""))
    for d in deps:
        add(f"    - {d} >=0,<100")
    add("")
    add("tests:")
    add("  - python:")
    add("      imports:")
    add(f"        - {name.replace('-', '_')}")
    add("  - script:")
    add(f"      - python -c \"import torch, {name.replace('-', '_')}; print(torch.__version__)\"")
    add("")
    add("about:")
    add(f"  homepage: https://github.com/bench/{name}")
    add(f"  summary: '{name}: a synthetic ecosystem package'")
    add("  license: BSD-3-Clause")
    add("  license_file: LICENSE")
    add("")
    add("extra:")
    add("  recipe-maintainers:")
    for h in rng.sample(HANDLES, rng.randint(1, 2)):
        add(f"    - {h}")
    if kind == "lockstep":
        add("  pytorch-lockstep: true")
    if not bumped:
        expected.clear()
    return Generated(name, kind, "\n".join(lines) + "\n", expected)


def generate(root: Path, n: int) -> dict[str, Generated]:
    rng = random.Random(20250707)
    (root / "distro.yaml").write_text(DISTRO_YAML)
    out: dict[str, Generated] = {}
    names: list[str] = []
    for i in range(n):
        name = f"torch-pkg{i:03d}"
        deps = rng.sample(names[-30:], min(len(names[-30:]), rng.randint(0, 3))) if names else []
        g = recipe(i, name, deps, rng)
        folder = root / "recipes" / name
        folder.mkdir(parents=True)
        (folder / "recipe.yaml").write_text(g.text)
        out[name] = g
        names.append(name)
    return out


def main(argv: list[str]) -> int:
    n = int(argv[1]) if len(argv) > 1 else 200
    with ScratchDir("conda-distro-bench-sweep-") as tmp:
        root = Path(tmp)
        generated = generate(root, n)

        t0 = time.perf_counter()
        dist = load_distribution(root)
        t1 = time.perf_counter()
        plan = plan_sweep(dist, RELEASE)
        t2 = time.perf_counter()
        pytorch = dist.config.pytorch.name
        texts = {d.name: edited_text(dist.recipes[d.name], d, pytorch, RELEASE)
                 for d in plan.decisions if d.status == "bumped"}
        distro_text = add_release_text(dist.distro, RELEASE)
        t3 = time.perf_counter()
        atomic_write_text(dist.distro.path, distro_text)
        for name, text in texts.items():
            atomic_write_text(dist.recipes[name].path, text)
        t4 = time.perf_counter()

        violations: list[str] = []
        statuses = {d.name: d.status for d in plan.decisions}
        for name, g in generated.items():
            want = {"admits": "unchanged", "lockstep": "needs-new-version"}.get(g.kind, "bumped")
            if statuses.get(name) != want:
                violations.append(f"{name} ({g.kind}): status {statuses.get(name)}, expected {want}")
        checked = 0
        for name, g in generated.items():
            after = (root / "recipes" / name / "recipe.yaml").read_text()
            if not g.expected:
                if after != g.text:
                    violations.append(f"{name}: changed although it needs no edit")
                continue
            a, b = g.text.split("\n"), after.split("\n")
            checked += 1
            if len(a) != len(b):
                violations.append(f"{name}: {len(a)} lines became {len(b)}")
                continue
            diff = {i + 1: y for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y}
            if diff != g.expected:
                violations.append(f"{name} ({g.kind}): changed lines {diff}, expected {g.expected}")
        d_before, d_after = DISTRO_YAML.split("\n"), (root / "distro.yaml").read_text().split("\n")
        d_diff = [(x, y) for x, y in zip(d_before, d_after, strict=False) if x != y]
        if len(d_before) != len(d_after) or d_diff != [('  releases: ["2.4.1", "2.5.1", "2.6.0"]   # oldest first',
                                                        '  releases: ["2.4.1", "2.5.1", "2.6.0", "2.7.0"]   # oldest first')]:
            violations.append(f"distro.yaml: unexpected change {d_diff}")

    total = t4 - t0
    kinds = {k: sum(g.kind == k for g in generated.values()) for k in dict.fromkeys(KINDS)}
    print(f"sweep plan + edits, {n} recipes ({', '.join(f'{k} {v}' for k, v in kinds.items())}), release {RELEASE}")
    print(f"  load distribution  {t1 - t0:7.3f} s")
    print(f"  plan               {t2 - t1:7.3f} s   ({sum(s == 'bumped' for s in statuses.values())} bumped, "
          f"{sum(s == 'unchanged' for s in statuses.values())} unchanged, "
          f"{sum(s == 'needs-new-version' for s in statuses.values())} needs-new-version)")
    print(f"  compute edits      {t3 - t2:7.3f} s   ({len(texts)} recipes + distro.yaml, each parsed back to verify)")
    print(f"  write files        {t4 - t3:7.3f} s")
    print(f"  total              {total:7.3f} s   = {total / TARGET_SECONDS:.2f} x the {TARGET_SECONDS:.0f} s target "
          f"({'OK' if total <= TARGET_SECONDS else 'OVER'})")
    print(f"  line-by-line check: {checked} edited recipes + distro.yaml, {len(violations)} violation(s)")
    for v in violations[:20]:
        print(f"    {v}")
    return 1 if violations or total > TARGET_SECONDS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
