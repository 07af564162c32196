"""The schema of a local channel's ``<subdir>/repodata.json``, checked before anything is planned from it.

rattler writes these files, but they sit in a folder anyone (or an interrupted tool) can edit, and promote
copies files and writes the ledger from what they say. So every record is validated strictly (pydantic,
no coercion: ``build_number: "abc"`` or ``depends: "pytorch"`` is an error, not a guess), and the
parts that become paths are checked against the folder they were read from: a record's ``subdir`` must
be that folder and its file name one plain package file name (``../../escape`` is refused).

A bad record is a :class:`~conda_distro.errors.ChannelError` naming the file, the record and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from conda_distro.channels.base import ChannelFile
from conda_distro.errors import ChannelError

PACKAGE_KEYS = ("packages", "packages.conda")
_SUFFIX = {"packages": ".tar.bz2", "packages.conda": ".conda"}
_HINT = ("re-index the channel from its files: delete this repodata.json and run "
         "`conda-distro build --all` (staging) or `conda-distro promote` (main) again")


class RepodataRecord(BaseModel):
    """The fields of one package record that conda-distro uses; other fields (md5, license, timestamp, …)
    are kept by rattler and ignored here."""

    model_config = ConfigDict(extra="allow", strict=True)

    name: StrictStr = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$", max_length=200)
    version: StrictStr = Field(pattern=r"^[A-Za-z0-9_.+!\-]+$", max_length=200)
    build: StrictStr = Field(pattern=r"^[A-Za-z0-9_.+]+$", max_length=200)
    build_number: StrictInt = Field(ge=0)
    sha256: StrictStr = Field(pattern=r"^[0-9a-f]{64}$")
    depends: list[StrictStr] = Field(default_factory=list)
    subdir: StrictStr | None = None
    size: StrictInt | None = Field(default=None, ge=0)
    timestamp: StrictInt | None = Field(default=None, ge=0)  # seconds or milliseconds since the epoch
    track_features: StrictStr | list[StrictStr] | None = None  # "a b", "a,b" or a list


#: a repodata timestamp above this is in milliseconds (the last second of the year 9999), as rattler reads it
_SECONDS_MAX = 253_402_300_799


def timestamp_ms(value: int | float | None) -> int | None:
    """A repodata ``timestamp`` (seconds or milliseconds since the epoch) in milliseconds, as the solver
    compares them."""
    if value is None:
        return None
    return int(value) if value > _SECONDS_MAX else int(value * 1000)


def track_features_of(value: object) -> tuple[str, ...]:
    """repodata's ``track_features`` (``"a b"``, ``"a,b"`` or a list) as a tuple; anything else: none."""
    if isinstance(value, str):
        return tuple(value.replace(",", " ").split())
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value if str(v).strip())
    return ()


class RepodataInfo(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    subdir: StrictStr | None = None


def _record_error(path: Path, key: str, filename: str, message: str, field: str | None = None) -> ChannelError:
    where = f"{key}['{filename}']" + (f".{field}" if field else "")
    return ChannelError(f"bad package record {filename!r}: {message}", path=path, field=where, hint=_HINT)


def _first_error(exc: ValidationError) -> tuple[str, str]:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    if err["type"] == "missing":
        return field, "required field is missing"
    got = repr(err.get("input"))
    return field, f"{err['msg']} (got {got[:60] + '…' if len(got) > 60 else got})"


def parse_record(path: Path, subdir: str, key: str, filename: Any, record: Any) -> ChannelFile:
    """One entry of ``packages`` / ``packages.conda`` as a :class:`ChannelFile`, or a ChannelError."""
    if not isinstance(filename, str) or "/" in filename or "\\" in filename or filename.startswith(".") \
            or not filename.endswith(_SUFFIX[key]):
        raise ChannelError(f"bad file name {filename!r} under '{key}': expected a plain *{_SUFFIX[key]} file name",
                           path=path, field=key, hint=_HINT)
    if not isinstance(record, dict):
        raise _record_error(path, key, filename, f"must be a JSON object, got {type(record).__name__}")
    try:
        rec = RepodataRecord.model_validate(record)
    except ValidationError as exc:
        field, message = _first_error(exc)
        raise _record_error(path, key, filename, message, field) from None
    if rec.subdir is not None and rec.subdir != subdir:
        raise _record_error(path, key, filename, f"subdir {rec.subdir!r} is not the folder the index is in "
                                                 f"({subdir!r})", "subdir")
    expected = f"{rec.name}-{rec.version}-{rec.build}{_SUFFIX[key]}"
    if filename != expected:
        raise _record_error(path, key, filename, f"name, version and build say the file is {expected!r}", "name")
    return ChannelFile(subdir=subdir, filename=filename, name=rec.name, version=rec.version, build=rec.build,
                       build_number=rec.build_number, sha256=rec.sha256, depends=tuple(rec.depends), size=rec.size,
                       timestamp=timestamp_ms(rec.timestamp), track_features=track_features_of(rec.track_features))


def parse_repodata(path: Path, subdir: str, data: Any) -> dict[str, ChannelFile]:
    """Every record of one repodata.json document (already JSON-decoded), keyed by artifact."""
    if not isinstance(data, dict):
        raise ChannelError("channel index is not a JSON object", path=path, hint=_HINT)
    try:
        info = RepodataInfo.model_validate(data.get("info") or {})
    except ValidationError as exc:
        field, message = _first_error(exc)
        raise ChannelError(message, path=path, field=f"info.{field}", hint=_HINT) from None
    if info.subdir is not None and info.subdir != subdir:
        raise ChannelError(f"info.subdir {info.subdir!r} is not the folder the index is in ({subdir!r})",
                           path=path, field="info.subdir", hint=_HINT)
    out: dict[str, ChannelFile] = {}
    for key in PACKAGE_KEYS:
        if key not in data:
            continue
        section = data[key]
        if not isinstance(section, dict):  # null included: rattler always writes an object
            raise ChannelError(f"'{key}' must be a JSON object of file name -> record, got "
                               f"{type(section).__name__}", path=path, field=key, hint=_HINT)
        for filename, record in section.items():
            f = parse_record(path, subdir, key, filename, record)
            out[f.artifact] = f
    return out
