"""distro.yaml: the distribution's definition, as a typed, strict model."""

from __future__ import annotations

import enum
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from conda_distro.errors import ConfigError
from conda_distro.util.layout import clash
from conda_distro.util.validation import line_at, to_error
from conda_distro.util.yamlio import load_fast_file
from conda_distro.vocab import RELEASE_RE, Release, Variant

DISTRO_FILE = "distro.yaml"
KNOWN_SUBDIRS = {
    "linux-64", "linux-aarch64", "linux-ppc64le", "osx-64", "osx-arm64", "win-64", "win-arm64",
}
ANACONDA_SCHEME = "anaconda://"
_URL_RE = re.compile(r"^[a-z][a-z0-9+.-]*://", re.I)


PinExpr = Literal["x", "x.x", "x.x.x"]  # granularity of an upper bound, as rattler-build writes it


def _all_variants() -> list[Variant]:
    return list(Variant)


def _pytorch_run_exports() -> dict[str, PinExpr]:
    return {"pytorch": "x.x"}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UpperBounds(str, enum.Enum):  # noqa: UP042 -- StrEnum would change str()/format() of members (output bytes)
    REQUIRED = "required"
    PYTORCH_ONLY = "pytorch-only"
    OFF = "off"


def _unique(v: list, what: str) -> list:
    """A list of distinct items (a value given twice is a mistake: which one was meant?)."""
    seen: set = set()
    for item in v:
        if item in seen:
            raise ValueError(f"{what} '{item}' is listed twice")
        seen.add(item)
    return v


def _filled(v: str, what: str) -> str:
    """A non-empty value without control characters (a NUL cannot be a path or a name)."""
    if not v.strip():
        raise ValueError(f"{what} is empty")
    if any(ord(c) < 32 for c in v):
        raise ValueError(f"{what} holds a control character")
    return v


class Channels(Strict):
    upstream: list[str] = Field(default_factory=lambda: ["conda-forge"], min_length=1)
    staging: str = "build/channels/staging"
    main: str = "build/channels/pytorch"

    @field_validator("upstream")
    @classmethod
    def _upstream(cls, v: list[str]) -> list[str]:
        for ref in v:
            _filled(ref, "an upstream channel")
        return _unique(v, "upstream channel")

    @field_validator("staging", "main")
    @classmethod
    def _anaconda(cls, v: str) -> str:
        _filled(v, "the channel")
        if v.startswith(ANACONDA_SCHEME) and not re.fullmatch(r"anaconda://[\w.-]+(/[\w.-]+)?", v):
            raise ValueError(f"'{v}' is not anaconda://OWNER[/LABEL]")
        return v


def _conda_name(v: str, example: str) -> str:
    if not re.fullmatch(r"[a-z0-9_][a-z0-9_.+-]*", v):
        raise ValueError(f"'{v}' is not a conda package name (lowercase letters, digits and _ . + -, e.g. {example})")
    return v


class PyTorch(Strict):
    name: str = "pytorch"

    @field_validator("name")
    @classmethod
    def _package_name(cls, v: str) -> str:
        return _conda_name(v, "pytorch")
    releases: list[str] = Field(min_length=1)
    variants: list[Variant] = Field(default_factory=_all_variants, min_length=1)
    #: upstream packages released with each PyTorch build (torchvision, torchaudio): a package that needs
    #: one is not tested against a release × variant for which upstream has no build of it
    lockstep: list[str] = Field(default_factory=list)

    @field_validator("lockstep")
    @classmethod
    def _lockstep_names(cls, v: list[str], info: ValidationInfo) -> list[str]:
        for name in v:
            _conda_name(name, "torchvision")
            if name == info.data.get("name"):
                raise ValueError(f"'{name}' is the pytorch package itself, not a package released with it")
        return _unique(v, "lockstep package")

    @field_validator("variants")
    @classmethod
    def _variants(cls, v: list[Variant]) -> list[Variant]:
        return _unique(v, "variant")

    @field_validator("releases", mode="before")
    @classmethod
    def _strs(cls, v: Any) -> Any:
        return [str(x) for x in v] if isinstance(v, list) else v

    @field_validator("releases")
    @classmethod
    def _ordered(cls, v: list[str]) -> list[Release]:
        from rattler import Version

        parsed = []
        for s in v:
            if not RELEASE_RE.match(s):
                shown = s if len(s) <= 40 else f"{s[:20]}…({len(s)} characters)"
                raise ValueError(f"'{shown}' is not a release version MAJOR.MINOR.PATCH like 2.5.1")
            parsed.append(Version(s))
        if len(set(v)) != len(v):
            raise ValueError("releases contain a duplicate")
        if parsed != sorted(parsed):
            raise ValueError("releases must be listed oldest first")
        return [Release(s) for s in v]


class Policy(Strict):
    upper_bounds: UpperBounds = UpperBounds.REQUIRED
    unbounded_allowed: list[str] = Field(default_factory=lambda: ["python"])
    unmaintained_grace_days: int = Field(default=60, ge=0, le=3650)  # at most ten years
    # Commit authors that are not maintainer activity for `report unmaintained`: patterns matched against a
    # commit's author name and e-mail address (case-insensitive; only `*` is a wildcard).
    bot_authors: list[str] = Field(default_factory=lambda: ["*[bot]", "*[bot]@*", "conda-distro bot"])
    # Upper bounds that packages export to everything built against them (conda-forge run_exports),
    # used when the upstream channel's metadata is not available: name -> granularity of the bound.
    run_exports: dict[str, PinExpr] = Field(default_factory=_pytorch_run_exports)
    # How many more times a failing test runs on the same inputs before it counts (and, for a dependent in
    # main, the baseline side with main's packages): passed and failed = `flaky` (docs/verdicts.md, section
    # "Confirmation before blocking").
    confirm_runs: int = Field(default=2, ge=0, le=20)

    @field_validator("unbounded_allowed")
    @classmethod
    def _exempt(cls, v: list[str]) -> list[str]:
        for name in v:
            _conda_name(name, "python")
        return _unique(v, "package")

    @field_validator("bot_authors")
    @classmethod
    def _bots(cls, v: list[str]) -> list[str]:
        for pattern in v:
            _filled(pattern, "a bot author pattern")
        return _unique(v, "bot author pattern")

    @field_validator("run_exports")
    @classmethod
    def _exporters(cls, v: dict[str, PinExpr]) -> dict[str, PinExpr]:
        for name in v:
            _conda_name(name, "pytorch")
        return v


#: an http(s) URL with a host (the anaconda.org API)
_HTTP_URL = re.compile(r"^https?://[A-Za-z0-9.-]+(:\d{1,5})?(/[^\s]*)?$")


class Anaconda(Strict):
    api_url: str = "https://api.anaconda.org"
    # where installers read an anaconda:// channel's repodata and files (``<conda_url>/OWNER[/label/LABEL]``)
    conda_url: str = "https://conda.anaconda.org"

    @field_validator("api_url", "conda_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not _HTTP_URL.match(v):
            raise ValueError(f"'{v}' is not an http(s) URL such as https://api.anaconda.org")
        return v


#: A GitHub Actions runner label (``ubuntu-latest``, ``linux-gpu-t4``, ``self-hosted``): letters, digits and
#: ``. _ -``, so a label read from distro.yaml can go into a workflow's ``runs-on`` as it is.
_RUNNER_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


class Runners(Strict):
    """The CI runner each variant's tests run on (docs/operate.md, section "CI: gates that can fail, tokens
    out of reach of recipe code"; docs/scale-out.md, section "Variants on other runners"). A cuda runner with a GPU
    tests cuda for real; on one without, cuda tests run as "cuda (no GPU)"."""

    cpu: str = "ubuntu-latest"
    cuda: str = "ubuntu-latest"

    @field_validator("cpu", "cuda", mode="before")
    @classmethod
    def _label(cls, v: Any) -> Any:
        if isinstance(v, str) and not _RUNNER_LABEL.fullmatch(v):
            raise ValueError(f"'{v}' is not a runner label (letters, digits and . _ -, e.g. ubuntu-latest)")
        return v


class Ci(Strict):
    runners: Runners = Field(default_factory=Runners)
    # the release sweep's per-package pull requests whose package passed are labelled `automerge` and merged
    # once the pull-request gate is green; false: they wait for a human
    automerge: bool = True


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|kB|KB|MB|GB)?")
_UNITS = {None: 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "kB": 1000, "KB": 1000, "MB": 10**6,
          "GB": 10**9}
MAX_TIMEOUT = 7 * 24 * 3600  # a week


class Limits(Strict):
    """What one build or test of recipe code may take (docs/operate.md, section "Build sandbox"): wall-clock seconds per
    build (per variant) and per test, and the size of each log. At a limit the whole sandbox is killed and
    the build or test is an ``error`` (``timeout`` / ``output limit``). A recipe may set its own in
    ``extra: limits:`` (same keys)."""

    build_timeout: float = 3600
    test_timeout: float = 1800
    log_limit: int = 64 << 20  # bytes; written as a number or a size such as "64 MiB"

    @field_validator("build_timeout", "test_timeout", mode="before")
    @classmethod
    def _seconds(cls, v: Any) -> Any:
        if isinstance(v, str) and re.fullmatch(r"\d+(\.\d+)?", v.strip()):  # (the fast YAML reader keeps scalars text)
            v = float(v)
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= MAX_TIMEOUT:
            raise ValueError(f"{v!r} is not a number of seconds (more than 0, at most {MAX_TIMEOUT}: a week), e.g. 3600")
        return v

    @field_validator("log_limit", mode="before")
    @classmethod
    def _size(cls, v: Any) -> Any:
        size = None
        if isinstance(v, int) and not isinstance(v, bool):
            size = v
        elif isinstance(v, str) and v.strip().isdigit():
            size = int(v)
        elif isinstance(v, str) and (m := _SIZE.fullmatch(v.strip())):
            size = int(float(m.group(1)) * _UNITS[m.group(2)])
        if size is None or not 1024 <= size <= 1 << 40:
            raise ValueError(f"{v!r} is not a log size between 1 KiB and 1 TiB (a number of bytes, or e.g. \"64 MiB\")")
        return size


class DistroConfig(Strict):
    name: str = Field(min_length=1, max_length=100)
    channels: Channels = Field(default_factory=Channels)
    pytorch: PyTorch
    platforms: list[str] = Field(default_factory=lambda: ["linux-64"], min_length=1)
    policy: Policy = Field(default_factory=Policy)
    anaconda: Anaconda = Field(default_factory=Anaconda)
    ci: Ci = Field(default_factory=Ci)
    # conda-forge-style variant config files (conda_build_config.yaml format) recipes render with
    variant_config: list[str] = Field(default_factory=list)
    limits: Limits = Field(default_factory=Limits)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _filled(v, "the distribution's name")

    @field_validator("platforms")
    @classmethod
    def _platforms(cls, v: list[str]) -> list[str]:
        for p in v:
            if p == "noarch":
                raise ValueError("noarch is always included; list only real platforms like linux-64")
            if p not in KNOWN_SUBDIRS:
                raise ValueError(f"unknown platform '{p}' (known: {', '.join(sorted(KNOWN_SUBDIRS))})")
        return _unique(v, "platform")

    @field_validator("variant_config")
    @classmethod
    def _variant_files(cls, v: list[str]) -> list[str]:
        for f in v:
            _filled(f, "a variant config file")
        return _unique(v, "variant config file")



class DistroRepo:
    """distro.yaml as loaded in its repository: the config (:class:`DistroConfig`) plus where everything
    lives (channels, build folder, ledger); paths are resolved against ``root``. A
    :class:`~conda_distro.distribution.Distribution` is this plus every recipe."""

    def __init__(self, config: DistroConfig, root: Path) -> None:
        self.config = config
        self.root = root
        self.path = root / DISTRO_FILE

    @property
    def recipes_dir(self) -> Path:
        return self.root / "recipes"

    @property
    def proposals_dir(self) -> Path:
        return self.root / "proposals"

    @property
    def state_dir(self) -> Path:
        return self.root / "channel_state"

    @property
    def build_dir(self) -> Path:
        return self.root / "build"

    @property
    def variant_files(self) -> list[Path]:
        return [(self.root / p).resolve() if not Path(p).is_absolute() else Path(p) for p in self.config.variant_config]

    def resolve_local(self, ref: str) -> Path:
        """A staging/main/upstream reference that is a local folder, resolved against root."""
        if ref.startswith("file://"):
            return Path(ref[len("file://"):])
        p = Path(ref).expanduser()
        return p if p.is_absolute() else (self.root / p).resolve()

    @staticmethod
    def is_anaconda(ref: str) -> bool:
        return ref.startswith(ANACONDA_SCHEME)

    @staticmethod
    def is_local_ref(ref: str) -> bool:
        """Upstream entries: a plain name (``conda-forge``) is a channel name, not a path."""
        if _URL_RE.match(ref):
            return ref.startswith("file://")
        return "/" in ref or ref.startswith((".", "~"))

    def channel_url(self, ref: str) -> str:
        """A URL rattler understands for an upstream/staging/main reference."""
        if self.is_anaconda(ref):
            owner_label = ref[len(ANACONDA_SCHEME):]
            owner, _, label = owner_label.partition("/")
            base = self.config.anaconda.conda_url.rstrip("/")
            return f"{base}/{owner}/label/{label}" if label and label != "main" else f"{base}/{owner}"
        if _URL_RE.match(ref) and not ref.startswith("file://"):
            return ref
        if self.is_local_ref(ref) or ref in (self.config.channels.staging, self.config.channels.main):
            return self.resolve_local(ref).as_uri()
        return ref  # a channel name such as conda-forge

    @property
    def upstream_urls(self) -> list[str]:
        return [self.channel_url(u) for u in self.config.channels.upstream]

    @property
    def subdirs(self) -> list[str]:
        return [*self.config.platforms, "noarch"]


def find_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` that holds distro.yaml."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / DISTRO_FILE).is_file():
            return folder
    raise ConfigError(
        f"no {DISTRO_FILE} found in {start} or any parent folder",
        hint="run inside a distribution repository, pass --root DIR, or create one with `conda-distro sandbox DIR`",
    )


def load_config(root: Path) -> DistroRepo:
    path = root / DISTRO_FILE
    if not path.exists() and not path.is_symlink():  # (anything else there: the reader says what is wrong)
        raise ConfigError(f"{DISTRO_FILE} not found", path=path, hint="pass --root pointing at a distribution repository")
    doc = load_fast_file(path)
    if not isinstance(doc, dict):
        raise ConfigError("distro.yaml must be a mapping of keys", path=path, line=getattr(doc, "line", 1))
    try:
        config = DistroConfig.model_validate(doc)
    except ValidationError as exc:
        raise to_error(exc, doc, path, root=DistroConfig, error=ConfigError,
                       see="see docs/reference/schemas.md, section \"distro.yaml\"") from None
    distro = DistroRepo(config, root.resolve())
    check_channel_layout(distro, doc)
    _check_variant_files(distro, doc)
    return distro


def _check_variant_files(distro: DistroRepo, doc: Any) -> None:
    """A relative ``variant_config`` path stays inside the repository (an absolute one is taken as written)."""
    root = distro.root.resolve()
    for i, ref in enumerate(distro.config.variant_config):
        if not Path(ref).is_absolute() and not (root / ref).resolve().is_relative_to(root):
            raise ConfigError(f"'{ref}' leads outside the repository", path=distro.path, field=f"variant_config.{i}",
                              line=line_at(doc, ("variant_config", i)),
                              hint="keep relative paths inside the repository, or write an absolute path on purpose")


def _channel_fields(channels: Channels) -> list[tuple[tuple, str]]:
    """(location in distro.yaml, reference) of every channel: upstream first, then staging, then main
    (a clash is reported on the later one: main when main is another channel)."""
    return [*((("channels", "upstream", i), u) for i, u in enumerate(channels.upstream)),
            (("channels", "staging"), channels.staging), (("channels", "main"), channels.main)]


def check_channel_layout(distro: DistroRepo, doc: Any = None) -> None:
    """Staging, main and every upstream are different channels, no local one lies inside another (or is
    the repository itself), staging and main are local folders or ``anaconda://``, and a relative path
    stays inside the repository (an absolute path is taken as written). ConfigError naming the field."""
    root = distro.root.resolve()
    seen: list[tuple[str, str, Path | None, str]] = []  # (field, ref, local path, channel URL)

    def fail(loc: tuple, message: str, hint: str) -> None:
        raise ConfigError(message, path=distro.path, field=".".join(str(p) for p in loc),
                          line=line_at(doc, loc) if doc is not None else None, hint=hint)

    for loc, ref in _channel_fields(distro.config.channels):
        field = ".".join(str(p) for p in loc)
        upstream = loc[1] == "upstream"
        local = distro.is_local_ref(ref) if upstream else not distro.is_anaconda(ref)
        if not upstream and local and _URL_RE.match(ref) and not ref.startswith("file://"):
            fail(loc, f"'{ref}' cannot be written to: {loc[1]} must be a local folder or anaconda://OWNER[/LABEL]",
                 "write a path such as build/channels/" + loc[1] + " or anaconda://OWNER/LABEL")
        path = None
        if local:
            written = Path(ref[len("file://"):] if ref.startswith("file://") else ref).expanduser()
            path = (written if written.is_absolute() else root / written).resolve()
            if not written.is_absolute() and not path.is_relative_to(root):
                fail(loc, f"'{ref}' leads outside the repository ({path})",
                     "keep relative channel paths inside the repository, or write an absolute path on purpose")
            if path == root:
                fail(loc, f"'{ref}' is the repository itself", "give the channel a folder of its own, "
                     "such as build/channels/" + ("main" if loc[1] == "main" else loc[1]))
            why = None if upstream else clash(path, root)  # (staging and main are written)
            if why:
                fail(loc, f"'{ref}' cannot be a channel: {why}", "give the channel a folder of its own, "
                     "such as build/channels/" + ("main" if loc[1] == "main" else loc[1]))
        url = _channel_key(distro, ref, path)
        for other_field, other_ref, other_path, other_url in seen:
            same = url == other_url or (path is not None and path == other_path)
            if same:
                fail(loc, f"'{ref}' is the same channel as {other_field} ('{other_ref}')",
                     "staging, main and every upstream must be different channels")
            if path is not None and other_path is not None and (
                    path.is_relative_to(other_path) or other_path.is_relative_to(path)):
                inner, outer = (field, other_field) if path.is_relative_to(other_path) else (other_field, field)
                fail(loc, f"'{ref}' and {other_field} ('{other_ref}') are nested: {inner} lies inside {outer}",
                     "give each channel a folder of its own, none inside another")
        seen.append((field, ref, path, url))


def _channel_key(distro: DistroRepo, ref: str, path: Path | None) -> str:
    """One spelling per channel: a local folder is its file:// URL; a channel name (conda-forge) and
    anaconda://OWNER[/LABEL] are conda.anaconda.org URLs."""
    if path is not None:
        return path.as_uri()
    if distro.is_anaconda(ref):
        url = distro.channel_url(ref)
    elif _URL_RE.match(ref):
        url = ref
    else:
        url = f"https://conda.anaconda.org/{ref}"
    return url.rstrip("/").removesuffix("/label/main")