"""Typed results of builds and tests, and the store that keeps them under the build folder.

The store (``build/results/``) is what `promote` reads: one JSON file per staging artifact with the
outcome of every (release, variant) test run against it. Files are written atomically.

Provenance (:mod:`conda_distro.state.provenance`): each artifact records the recipe folder it was built from,
that recipe's input hash and the commit holding it; each test records the recipe input hashes of the
artifact and of its distribution dependencies in the checkout that ran it, and that checkout's commit.
`check-pr` keeps a store of its own (``build/pr/<ref>/results/``), so a PR never replaces these.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError

from conda_distro.errors import DistroError
from conda_distro.state.document import StateDocument, StrictModel
from conda_distro.state.ledger import RECIPE_RE
from conda_distro.util.dates import utcnow
from conda_distro.util.jsonio import parse_json, read_json_text
from conda_distro.util.validation import to_error
from conda_distro.util.yamlio import load_fast
from conda_distro.vocab import RELEASE_RE, Target, Variant, artifact_name

SCHEMA_VERSION = 4  # 2: provenance (recipe, recipe_hash, commit; per test: recipes, commit); 3: per test: environment;
# 4: per test: environments (every test environment, in order). Older documents are read as they are: a
# field they lack is None (not recorded)
#: ``error``: the build was stopped at a limit (``timeout``, ``output limit``), not judged: built again next time
BuildStatus = Literal["built", "skipped-existing", "failed", "blocked", "error"]
#: ``error``: the test could not run for a reason of the infrastructure (the worker crashed or was killed,
#: a channel could not be read, the environment could not be set up though it solves): never counted as
#: passed or failed; the next build (or ``build --retry-errors``) runs it again
#: ``flaky``: it both passed and failed on the same inputs (a failure re-run by the confirmation runs of
#: ``policy.confirm_runs``, :mod:`conda_distro.engine.confirm`): never blocks, never counts as a pass
TestStatus = Literal["passed", "failed", "blocked", "error", "flaky"]
#: one run's outcome among a test's runs on the same inputs
Attempt = Literal["passed", "failed", "error"]
#: how many earlier outcomes per (release, variant) an artifact keeps, each against other distribution
#: packages: the reverse-dependency gate compares a dependent's run with a candidate to its run without
HISTORY = 6
#: the reason a passed test records when the package has no tests (rattler-build ran nothing): `neutral`
NO_TESTS = "the package has no tests"


_NAME = r"^[a-z0-9_][a-z0-9_.+-]*$"  # a conda package name
_SHA256 = r"^[0-9a-f]{64}$"
_COMMIT = r"^[0-9a-f]{7,64}$"  # a git commit id


def now() -> dt.datetime:
    return utcnow()


class BuildRecord(StrictModel):
    name: str
    version: str
    artifact: str | None = None  # "<subdir>/<filename>" relative to the staging channel
    sha256: str | None = None
    status: BuildStatus
    log: str | None = None  # path of the build log
    reason: str | None = None  # why failed / blocked
    variant: dict[str, str] = Field(default_factory=dict)  # variant keys used (e.g. {"pytorch": "2.5"})

    def to_dict(self) -> dict:
        """As commands print it (JSON): the fields that are set."""
        return self.model_dump(mode="json", exclude_none=True)


class TestRecord(StrictModel):
    name: str = Field(pattern=_NAME)
    artifact: str
    pytorch: str = Field(pattern=RELEASE_RE.pattern)
    variant: Variant
    status: TestStatus
    log: str | None = None
    reason: str | None = None
    date: dt.datetime = Field(default_factory=now)
    key: str | None = None  # hash of everything the outcome depended on; same key = no need to re-test
    cached: bool = False  # this run reused the stored outcome
    # provenance: recipe folder -> recipe input hash, for the artifact's recipe and its distribution
    # dependencies' recipes, in the checkout that ran the test; and that checkout's commit (None: the
    # recipes had uncommitted changes, or no git)
    recipes: dict[Annotated[str, Field(pattern=RECIPE_RE.pattern)], Annotated[str, Field(pattern=_SHA256)]] = \
        Field(default_factory=dict)
    commit: str | None = Field(default=None, pattern=_COMMIT)
    # the distribution packages (other than the artifact) the test environment held, as rattler-build
    # solved it: name -> "name-version-build" (the file name without extension); None: not recorded
    # (a result older than this field, or a test that did not run)
    against: dict[str, str] | None = None
    # every package of the test environment (other than the artifact), as rattler-build installed it: name ->
    # "name-version-build"; `watch` reuses this outcome while today's solve gives the same environment.
    # None: not recorded (an older result, a test that did not run)
    environment: dict[str, str] | None = None
    # every test environment rattler-build created, in the order of the package's tests (one per test; a
    # test with several environments has them in a row), each as ``environment``: `watch` reuses this
    # outcome while today's solve gives the same list. ``environment`` above is the first one only (a
    # package with several tests had only that recorded before). None: not recorded
    environments: list[dict[str, str]] | None = Field(default=None, max_length=50)
    # cuda tests: whether the machine that ran it had a working GPU (`nvidia-smi`); False = "cuda (no GPU)",
    # an install + import test under the __cuda override. None: a cpu test, not run, or not recorded
    gpu: bool | None = None
    # every run of this test on these inputs, in order ("passed" / "failed" / "error"): a failure is re-run
    # (``policy.confirm_runs``) before it counts; None: run once (it passed, or an older result)
    attempts: list[Attempt] | None = None
    # a run made with main's packages in place of this run's (the baseline side of a confirmation): not this
    # run's own outcome, never reused for it
    baseline: bool | None = None  # True: a baseline run

    @property
    def target(self) -> Target:
        return Target(self.pytorch, self.variant)

    def to_dict(self) -> dict:
        """As commands print it (JSON): the fields that are set, without the reuse key."""
        return self.model_dump(mode="json", exclude={"key", "environment", "environments"}, exclude_none=True)


class ArtifactResults(StateDocument):
    """Everything known about one staging artifact (one file in build/results/)."""

    SCHEMA_VERSION = SCHEMA_VERSION
    DOCUMENT = "results"

    schema_version: int = Field(default=SCHEMA_VERSION, ge=1, le=SCHEMA_VERSION)
    artifact: str = Field(pattern=r"^(noarch|[a-z]+-[a-z0-9]+)/[^/\\]+\.(conda|tar\.bz2)$")
    name: str = Field(pattern=_NAME)
    version: str = Field(min_length=1, pattern=r"^\S+$")
    sha256: str = Field(pattern=_SHA256)
    depends: list[str] = Field(default_factory=list)
    input_hash: str | None = None
    # provenance: the recipe folder (``recipes/<name>``) the artifact was built from, its recipe input
    # hash then, and the commit holding that recipe (None: uncommitted changes, or no git)
    recipe: str | None = Field(default=None, pattern=RECIPE_RE.pattern)
    recipe_hash: str | None = Field(default=None, pattern=_SHA256)
    commit: str | None = Field(default=None, pattern=_COMMIT)
    tests: list[TestRecord] = Field(default_factory=list)

    def latest(self) -> dict[Target, TestRecord]:
        """The artifact's own latest outcome per (release, variant). A baseline record (the run with main's
        packages in place of this run's) is never its own outcome: it is recorded *after* the run it
        confirms, so counting it would let a pass with other packages stand for this run's failure.
        Equal dates keep the order of recording (the later recorded wins)."""
        out: dict[Target, TestRecord] = {}
        for t in sorted((t for t in self.tests if not t.baseline), key=lambda t: t.date):
            out[t.target] = t
        return out

    def record(self, test: TestRecord) -> None:
        """Add ``test``: it replaces the outcome of the same (release, variant) against the same
        distribution packages; outcomes against other ones are kept (the newest :data:`HISTORY`)."""
        pair = (test.pytorch, test.variant)
        same = [t for t in self.tests if t.target == pair and t.against != test.against
                and t.against is not None]
        keep = sorted(same, key=lambda t: t.date)[-(HISTORY - 1):] if HISTORY > 1 else []
        self.tests = [t for t in self.tests if t.target != pair] + keep + [test]

    def runs(self, pytorch: str, variant: str) -> list[TestRecord]:
        """Every kept outcome for one (release, variant), oldest first."""
        return sorted((t for t in self.tests if t.target == (pytorch, variant)), key=lambda t: t.date)


def _hint(artifact: str) -> str:
    return f"delete it; `conda-distro build {artifact_name(artifact)}` re-tests the artifact"


def read_results(path: Path, artifact: str) -> ArtifactResults:
    """One results file, validated strictly (no coercion of types); a bad file is an error naming the
    file, the field and the line. ``FileNotFoundError`` passes through."""
    text = read_json_text(path, "results", error=DistroError, hint=_hint(artifact))
    data = parse_json(text, path, error=DistroError, hint=_hint(artifact))
    if not isinstance(data, dict):
        raise DistroError("corrupt results file: must be a JSON object", path=path, line=1, hint=_hint(artifact))
    ArtifactResults.check_version(data, path, hint="upgrade conda-distro, or delete the file: "
                                                   f"`conda-distro build {artifact_name(artifact)}` re-tests the artifact")
    try:
        res = ArtifactResults.model_validate_json(text, strict=True)
    except ValidationError as exc:
        try:
            doc = load_fast(text)
        except DistroError:
            doc = None
        err = to_error(exc, doc, path, root=ArtifactResults, error=DistroError, see=_hint(artifact))
        err.message = f"corrupt results file: {err.message}"
        raise err from None
    if res.artifact != artifact:
        raise DistroError(f"corrupt results file: it is about '{res.artifact}', its name says '{artifact}'",
                          path=path, field="artifact", hint=_hint(artifact))
    return res


class ResultsStore:
    """build/results/<subdir>__<filename>.json, one per artifact."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, artifact: str) -> Path:
        return self.folder / (artifact.replace("/", "__") + ".json")

    def path_of(self, artifact: str) -> Path:
        """The file holding ``artifact``'s results (whether or not it exists)."""
        return self._path(artifact)

    def get(self, artifact: str) -> ArtifactResults | None:
        try:
            return read_results(self._path(artifact), artifact)
        except FileNotFoundError:
            return None

    def put(self, results: ArtifactResults) -> None:
        results.write(self._path(results.artifact))

    def all(self) -> list[ArtifactResults]:
        if not self.folder.is_dir():
            return []
        return [r for p in sorted(self.folder.glob("*.json")) if (r := self.get(p.name[:-5].replace("__", "/")))]
