"""An anaconda.org channel (``anaconda://OWNER[/LABEL]``), driven through anaconda-client's own API.

Promotion is ``anaconda copy`` semantics: a server-side copy of a file from the staging owner/label to
the main owner/label (``Binstar.copy``), after which the sha256 the server reports is checked.
Retirement adds the ``broken`` label and removes the main label (what conda-forge does).

The token comes from ``ANACONDA_API_TOKEN`` (read by :func:`conda_distro.channels.open_channel`, never
at import). It is never printed: every error message that leaves this module goes through
:func:`mask_secret`, and ``repr`` of the channel does not show it.
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

from conda_distro.channels.base import Channel, ChannelFile, Progress, no_progress, split_artifact
from conda_distro.channels.locking import channel_lock
from conda_distro.config import ANACONDA_SCHEME
from conda_distro.errors import ChannelError

BROKEN_LABEL = "broken"
TOKEN_ENV = "ANACONDA_API_TOKEN"
API_URL_ENV = "ANACONDA_API_URL"
_REF_RE = re.compile(r"^anaconda://([\w.-]+)(?:/([\w.-]+))?/?$")
T = TypeVar("T")


@dataclass(frozen=True)
class AnacondaRef:
    owner: str
    label: str = "main"

    def __str__(self) -> str:
        return f"{ANACONDA_SCHEME}{self.owner}/{self.label}"


def parse_anaconda_ref(ref: str) -> AnacondaRef:
    m = _REF_RE.match(ref)
    if not m:
        raise ChannelError(f"'{ref}' is not anaconda://OWNER[/LABEL]", field="channels",
                           hint="e.g. anaconda://pytorch-distro/staging")
    return AnacondaRef(m.group(1), m.group(2) or "main")


def mask_secret(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``***``."""
    return text.replace(secret, "***") if secret else text


def _file_from_api(doc: Mapping[str, Any]) -> ChannelFile:
    """A file dict of the anaconda.org API (``basename`` is ``<subdir>/<filename>`` for conda files)."""
    attrs = doc.get("attrs") or {}
    subdir, filename = split_artifact(str(doc["basename"]))
    full = str(doc.get("full_name") or "").split("/")
    name = attrs.get("name") or (full[1] if len(full) >= 2 else filename.rsplit("-", 2)[0])
    build = attrs.get("build") or filename.rsplit("-", 1)[-1].split(".")[0]
    return ChannelFile(
        subdir=str(attrs.get("subdir") or subdir), filename=filename, name=str(name),
        version=str(doc.get("version") or attrs.get("version")), build=str(build),
        build_number=int(attrs.get("build_number") or 0), sha256=str(doc.get("sha256") or attrs.get("sha256") or ""),
        depends=tuple(str(d) for d in attrs.get("depends") or ()), size=doc.get("size"),
    )


def _reported_sha256(copied: Any, artifact: str) -> str | None:
    docs = copied if isinstance(copied, list) else [copied]
    for d in docs:
        if isinstance(d, dict) and d.get("basename") == artifact and d.get("sha256"):
            return str(d["sha256"])
    return None


class AnacondaChannel:
    """One label of one anaconda.org owner."""

    def __init__(self, owner: str, label: str = "main", *, api_url: str, token: str | None,
                 lock_dir: Path | None = None, ref: str | None = None) -> None:
        self.owner = owner
        self.label = label
        self.api_url = api_url
        self._token = token
        self.lock_dir = lock_dir
        self.ref = ref or str(AnacondaRef(owner, label))
        self._api: Any = None

    def __repr__(self) -> str:  # never the token
        return f"AnacondaChannel(owner={self.owner!r}, label={self.label!r}, api_url={self.api_url!r})"

    def describe(self) -> str:
        return f"anaconda.org {self.owner}/{self.label} ({self.api_url})"

    @property
    def api(self) -> Any:
        if self._api is None:
            from binstar_client import Binstar

            self._api = Binstar(token=self._token, domain=self.api_url)
        return self._api

    def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one API call; turn every client/network error into a ChannelError with the token masked."""
        import requests
        from binstar_client import errors

        try:
            return fn(*args, **kwargs)
        except errors.Unauthorized as exc:
            raise self._error(what, exc, f"set {TOKEN_ENV} to a token with write access to '{self.owner}'") from None
        except errors.Conflict:
            raise self._error(what, "the destination already has this file (HTTP 409); a file is never overwritten",
                              "retire the file in main first if it really must be replaced") from None
        except errors.NotFound as exc:
            raise self._error(what, exc, "check the owner, label and that the file exists there") from None
        except (errors.BinstarError, requests.RequestException) as exc:
            raise self._error(what, exc, f"check {API_URL_ENV} / distro.yaml anaconda.api_url and the network") from None

    def _error(self, what: str, exc: BaseException | str, hint: str) -> ChannelError:
        detail = exc if isinstance(exc, str) else getattr(exc, "message", None) or str(exc) or type(exc).__name__
        msg = mask_secret(f"{what} on {self.describe()} failed: {detail}", self._token)
        return ChannelError(msg, field="channels", hint=mask_secret(hint, self._token))

    def _require_token(self) -> None:
        if not self._token:
            raise ChannelError(f"writing to {self.describe()} needs a token", field=TOKEN_ENV,
                               hint=f"export {TOKEN_ENV}=<an anaconda.org API token with write access>")

    # -- reading --------------------------------------------------------------------------------

    def list_files(self) -> dict[str, ChannelFile]:
        info = self._call(f"listing label '{self.label}'", self._show_label)
        try:
            files = [_file_from_api(doc) for doc in info.get("files") or ()]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self._error(f"listing label '{self.label}'", f"unexpected file record from the server ({exc!r})",
                              f"is {API_URL_ENV} an anaconda.org API URL?") from None
        return {f.artifact: f for f in files}

    def _show_label(self) -> dict[str, Any]:
        from binstar_client import errors

        try:
            return self.api.show_channel(self.label, self.owner)
        except errors.NotFound:
            return {"files": []}  # a label with no files yet

    # -- writing --------------------------------------------------------------------------------

    def lock(self, timeout: float) -> AbstractContextManager[None]:
        """anaconda.org has no lock of its own: serialise the writers on this machine."""
        if self.lock_dir is None:
            return nullcontext()
        name = f"anaconda-{self.owner}-{self.label}.lock"
        return channel_lock(self.lock_dir / name, timeout, f"channel {self.ref}")

    def check_source(self, source: Channel) -> None:
        if not isinstance(source, AnacondaChannel):
            raise ChannelError(
                f"cannot copy from {source.describe()} into {self.describe()}: promotion to anaconda.org is a "
                "server-side copy", field="channels.staging",
                hint="use an anaconda://OWNER/LABEL staging channel (upload builds there with "
                     "`anaconda upload --label staging`) or a local main channel")
        self._require_token()

    def recover(self, source: Channel, keep: set[str], progress: Progress = no_progress) -> None:
        """A server-side copy is atomic: nothing is left half-done."""

    def receive(self, source: Channel, files: Sequence[ChannelFile], progress: Progress = no_progress) -> None:
        self.check_source(source)
        assert isinstance(source, AnacondaChannel)
        unreported = []
        for f in files:
            copied = self._call(
                f"copying {f.artifact}", self.api.copy, source.owner, f.name, f.version, basename=f.artifact,
                to_owner=self.owner, from_label=source.label, to_label=self.label)
            reported = _reported_sha256(copied, f.artifact)
            if reported is None:
                unreported.append(f)
            else:
                self._check_sha256(f, reported)
        if unreported:  # the copy response did not say: ask the label listing
            listed = self.list_files()
            for f in unreported:
                self._check_sha256(f, listed[f.artifact].sha256 if f.artifact in listed else "nothing")
        progress(f"copied {len(files)} file(s) to {self.describe()}")

    @staticmethod
    def _check_sha256(f: ChannelFile, reported: str) -> None:
        if reported != f.sha256:
            raise ChannelError(
                f"after copying {f.artifact} the server reports sha256 {reported}, expected {f.sha256}",
                field="channels.main", hint="check the file on anaconda.org and retire it if it is wrong")

    def publish(self, progress: Progress = no_progress) -> None:
        """anaconda.org re-indexes by itself."""

    def withdraw(self, files: Sequence[ChannelFile], progress: Progress = no_progress) -> list[str]:
        self._require_token()
        out = []
        for f in files:
            what = f"retiring {f.artifact}"
            self._call(what, self.api.add_channel, BROKEN_LABEL, self.owner, f.name, f.version, filename=f.artifact)
            self._call(what, self.api.remove_channel, self.label, self.owner, f.name, f.version, filename=f.artifact)
            out.append(f"{self.owner}/label/{BROKEN_LABEL}/{f.artifact}")
        progress(f"labelled {len(out)} file(s) '{BROKEN_LABEL}' and removed them from '{self.label}'")
        return out
