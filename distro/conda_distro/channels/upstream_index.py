"""What the upstream channels publish, as far as it can be read offline (local channel folders)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from conda_distro.config import DistroRepo
from conda_distro.errors import ChannelError
from conda_distro.util.jsonio import read_json


@dataclass
class UpstreamIndex:
    """Package names (and versions) published in the upstream channels that are local folders.

    Channel names (conda-forge) and URLs cannot be read offline: they are listed in ``unreadable``
    and every conclusion of the form "X is not upstream" is then withheld.
    """

    versions: dict[str, set[str]] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)  # name -> "<channel>/<subdir>/repodata.json"
    unreadable: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.unreadable

    def has(self, name: str) -> bool:
        return name in self.versions

    @classmethod
    def load(cls, distro: DistroRepo) -> UpstreamIndex:
        index = cls()
        for ref in distro.config.channels.upstream:
            if not distro.is_local_ref(ref):
                index.unreadable.append(ref)
                continue
            base = distro.resolve_local(ref)
            if not base.is_dir():
                index.unreadable.append(ref)
                continue
            for subdir in distro.subdirs:
                index._read(base / subdir / "repodata.json", f"{ref.rstrip('/')}/{subdir}/repodata.json")
        return index

    def _read(self, path: Path, label: str) -> None:
        try:
            data = read_json(path, "repodata", error=ChannelError,
                             hint="the channel's owner must re-index it (a sandbox world's upstream channel: make the world "
                                  "again, `conda-distro sandbox DIR --force`), or fix channels.upstream in distro.yaml")
        except FileNotFoundError:
            return
        except ChannelError as exc:
            exc.message = f"cannot read repodata: {exc.message}"
            raise
        if not isinstance(data, dict):
            raise ChannelError("repodata.json is not a JSON object", path=path)
        for key in ("packages", "packages.conda"):
            records = data.get(key) or {}
            if not isinstance(records, dict):
                raise ChannelError(f"repodata.json: '{key}' is not an object", path=path)
            for record in records.values():
                name = record.get("name") if isinstance(record, dict) else None
                if not name:
                    continue
                self.versions.setdefault(name, set())
                if record.get("version"):
                    self.versions[name].add(str(record["version"]))
                self.where.setdefault(name, label)
