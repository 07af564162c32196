"""What the orchestrator and the runner tell each other: the runner's job (a JSON file it reads) and its
report (JSON lines on a private descriptor only it holds).

Two kinds of job, each run in a sandbox of its own: a **build** job (one per package: build its variants
into the sandbox's output folder, no tests) and a **test** job (one per artifact × release × variant:
run the package's tests against that release). The report is a stream of :data:`Message` objects, one
JSON object a line: ``log`` lines (what rattler-build streams while it works), ``begin`` (the next
variant's build starts), ``built`` (a build's outcome), ``tested`` (the test's outcome, rattler-build's
``TestResult.success``) and ``done``. Only the runner writes there; recipe code cannot reach the
descriptor (:mod:`.worker`). The runner imports this module at every start (once per sandbox): it
stays small.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from conda_distro.engine.backends import VariantSpec

if TYPE_CHECKING:
    from conda_distro.recipe.render import RenderSettings

#: the longest log line the runner sends (a longer one is cut): the report stream stays line-bounded
MAX_LINE = 64 << 10


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BuildPhaseJob(_Model):
    """Build these variants of the recipe into ``out_dir`` (paths as the sandbox shows them)."""

    recipe: str
    variant_config: dict[str, Any]  # RenderSettings as data (see :meth:`make`, :meth:`settings`)
    engine: str
    out_dir: str
    channels: list[str]  # staging first, then upstream
    variants: list[VariantSpec]

    @staticmethod
    def settings_data(settings: RenderSettings) -> dict[str, Any]:
        return {"variants": [[k, list(v)] for k, v in settings.variants], "zip_keys": [list(z) for z in settings.zip_keys],
                "target_platform": settings.target_platform}

    def settings(self) -> RenderSettings:
        from conda_distro.recipe.render import RenderSettings  # (the runner imports the renderer only to build)

        d = self.variant_config
        return RenderSettings(tuple((str(k), tuple(v)) for k, v in d["variants"]),
                              tuple(tuple(z) for z in d["zip_keys"]), d["target_platform"])


class TestPhaseJob(_Model):
    """Run the tests of one package file against ``channels`` (the release view first)."""

    __test__ = False  # not a pytest class

    engine: str
    artifact: str
    channels: list[str]
    cuda: str  # CONDA_OVERRIDE_CUDA: "" for a cpu test


class LogMsg(_Model):
    kind: Literal["log"] = "log"
    line: str


class BeginMsg(_Model):
    kind: Literal["begin"] = "begin"
    index: int  # of the variant in the job (its build log and its time limit start now)


class BuiltMsg(_Model):
    kind: Literal["built"] = "built"
    artifact: str
    ok: bool
    message: str | None = None
    produced: str | None = None  # the built file, relative to the output folder


class TestedMsg(_Model):
    __test__ = False

    kind: Literal["tested"] = "tested"
    ok: bool  # every test of the package passed (rattler-build's TestResult.success)
    error: bool = False  # could not run (infrastructure), neither passed nor failed
    message: str | None = None
    env: dict[str, str] = Field(default_factory=dict)  # the test environment: name -> "name-version-build"
    envs: list[dict[str, str]] = Field(default_factory=list, max_length=50)  # every test environment, in order
    no_tests: bool = False  # the package has no tests (rattler-build ran nothing)
    env_failed: bool = False  # a test environment could not be set up before any script ran
    missing: list[str] = Field(default_factory=list, max_length=50)  # what its solver found no candidates for

    @model_validator(mode="after")
    def _one_outcome(self) -> TestedMsg:
        """A pass says nothing else: a message that passes while carrying an error or a failure's words is
        refused (the run then has no verdict and is recorded as an infrastructure error, never a pass)."""
        if self.ok and (self.error or (self.message is not None and not self.no_tests)):
            raise ValueError("a passing outcome carries an error or a failure's message")
        return self


class DoneMsg(_Model):
    kind: Literal["done"] = "done"


Message = Annotated[LogMsg | BeginMsg | BuiltMsg | TestedMsg | DoneMsg, Field(discriminator="kind")]


class Envelope(_Model):
    msg: Message
