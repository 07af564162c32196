"""An anaconda.org channel (``anaconda://OWNER[/LABEL]``), driven through anaconda-client's own API.

Promotion is ``anaconda copy`` semantics: a server-side copy of a file from the staging owner/label to
the main owner/label (``Binstar.copy``), after which the sha256 the server reports is checked.
Retirement adds the ``broken`` label and removes the main label (what conda-forge does).
Builds reach an anaconda.org staging label through :meth:`AnacondaChannel.upload` (``anaconda upload``
semantics: idempotent for identical files, never overwriting a different one).

The token comes from ``ANACONDA_API_TOKEN`` (read by :func:`conda_distro.channels.open_channel`, never
at import), stripped and checked by :mod:`conda_distro.util.secret` and held as a :class:`~conda_distro.util.secret.Secret`.
It is never printed: every API call goes through :meth:`AnacondaChannel._call`, which turns *any* exception
of anaconda-client, requests or the HTTP stack into a ChannelError whose text has the token masked in
every form (``from None``: no chained traceback), and ``repr`` of the channel does not show it.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from conda_distro.channels.base import Channel, ChannelAudit, ChannelFile, FileProblem, Progress, no_progress, split_artifact
from conda_distro.channels.local import sha256_of
from conda_distro.channels.repodata import timestamp_ms, track_features_of
from conda_distro.config import ANACONDA_SCHEME
from conda_distro.errors import ChannelError, DistroError
from conda_distro.state.locks import Deadline, main_lock
from conda_distro.util.rattler_env import index_channel
from conda_distro.util.secret import Secret, as_secret, mask

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


def mask_secret(text: str, secret: Secret | None) -> str:
    """``text`` with every form of ``secret`` (and of every registered secret) replaced by ``***``."""
    return mask(text, secret)


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
        timestamp=timestamp_ms(ts) if isinstance(ts := attrs.get("timestamp"), int | float) and ts >= 0 else None,
        track_features=track_features_of(attrs.get("track_features")),
    )


def _reported_sha256(copied: Any, artifact: str) -> str | None:
    docs = copied if isinstance(copied, list) else [copied]
    for d in docs:
        if isinstance(d, dict) and d.get("basename") == artifact and d.get("sha256"):
            return str(d["sha256"])
    return None


class AnacondaChannel:
    """One label of one anaconda.org owner."""

    def __init__(self, owner: str, label: str = "main", *, api_url: str, token: Secret | str | None,
                 lock_dir: Path | None = None, ref: str | None = None) -> None:
        self.owner = owner
        self.label = label
        self.api_url = api_url
        self._token = as_secret(token, TOKEN_ENV)
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

            self._api = Binstar(token=self._token.reveal() if self._token else None, domain=self.api_url)
        return self._api

    def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one API call; turn every error it raises into a ChannelError with the token masked and no
        chained traceback (anaconda-client, requests and http.client errors can all quote the header)."""
        from binstar_client import errors

        try:
            return fn(*args, **kwargs)
        except DistroError as exc:  # ours, raised inside a helper: already clean, but mask it anyway
            raise self._error(what, exc.message, exc.hint or "") from None
        except errors.Unauthorized as exc:
            raise self._error(what, exc, f"set {TOKEN_ENV} to a token with write access to '{self.owner}'") from None
        except errors.Conflict:
            raise self._error(what, "the destination already has this file (HTTP 409); a file is never overwritten",
                              "retire the file in main first if it really must be replaced") from None
        except errors.NotFound as exc:
            raise self._error(what, exc, "check the owner, label and that the file exists there") from None
        except Exception as exc:  # noqa: BLE001 - BinstarError, requests, http.client, bad JSON, ...
            raise self._error(what, exc, f"check {API_URL_ENV} / distro.yaml anaconda.api_url and the network") from None

    def _error(self, what: str, exc: BaseException | str, hint: str) -> ChannelError:
        if isinstance(exc, str):
            detail = exc
        else:
            detail = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            if not isinstance(exc, DistroError) and type(exc).__module__.split(".")[0] not in ("binstar_client",):
                detail = f"{type(exc).__name__}: {detail}"
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
        """The label's listing. A 404 means "no files in that label yet" only when the owner's label list
        answers (200, a JSON object): otherwise the URL is not an anaconda.org API, or the owner does not
        exist, and reading it as an empty channel would let promote "succeed" against nothing."""
        from binstar_client import errors

        try:
            info = self.api.show_channel(self.label, self.owner)
        except errors.NotFound:
            try:
                labels = self.api.list_channels(self.owner)
            except errors.NotFound:
                raise ChannelError(
                    f"the server answers 404 for owner '{self.owner}' as well as for its label '{self.label}'",
                    hint=f"check {API_URL_ENV} / distro.yaml anaconda.api_url (an anaconda.org API such as "
                         f"https://api.anaconda.org) and the owner in channels") from None
            if not isinstance(labels, dict):
                raise ChannelError(f"the owner's label list is not a JSON object but {type(labels).__name__}",
                                   hint=f"is {API_URL_ENV} an anaconda.org API URL?") from None
            return {"files": []}  # the owner exists; the label has no files yet
        if not isinstance(info, dict):
            raise ChannelError(f"the label listing is not a JSON object but {type(info).__name__}",
                               hint=f"is {API_URL_ENV} an anaconda.org API URL?")
        return info

    def audit(self, workdir: Path) -> ChannelAudit:
        """Download every file the label lists through the API (``$ANACONDA_API_URL``, the same server
        promote writes to) into a fresh local mirror under ``workdir``, check each against the sha256 the
        label lists, and index the mirror: installers then read exactly the bytes that were checked. A file
        that does not match is reported and left out of the mirror (rattler's indexer cannot read junk)."""
        listed = self.list_files()
        mirror = workdir / f"anaconda-{self.owner}-{self.label}"
        problems = []
        for artifact, f in sorted(listed.items()):
            target = mirror / f.subdir / f.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            actual = self._call(f"downloading {artifact}", self._download, f, target)
            if actual is None:
                problems.append(FileProblem(artifact, "file-missing", "the label lists it but the server has no file"))
            elif actual != f.sha256:
                problems.append(FileProblem(artifact, "file-sha256-differs",
                                            f"label sha256 {f.sha256[:12] or '(none)'}…, downloaded file {actual[:12]}…"))
            if actual != f.sha256:
                target.unlink(missing_ok=True)
        try:
            index_channel(mirror, subdirs=sorted({f.subdir for f in listed.values()} - {"noarch"}))
        except Exception as exc:  # noqa: BLE001 - rattler's indexer raises (and panics) on unreadable archives
            raise ChannelError(mask(f"indexing the downloaded copy of {self.describe()} failed: {exc}", self._token),
                               field="channels.main", hint="a file on the label is not a readable conda package; "
                               "retire it") from None
        return ChannelAudit(mirror.as_uri(), problems)

    def _download(self, f: ChannelFile, target: Path) -> str | None:
        """Write the server's bytes of ``f`` to ``target``; their sha256, or None if the server has none."""
        import hashlib

        from binstar_client import errors

        try:
            res = self.api.download(self.owner, f.name, f.version, f.artifact)
        except errors.NotFound:
            return None
        if res is None or res.status_code != 200:
            return None
        h = hashlib.sha256()
        with open(target, "wb") as out:
            for chunk in res.iter_content(1 << 20):
                h.update(chunk)
                out.write(chunk)
        return h.hexdigest()

    # -- writing --------------------------------------------------------------------------------

    def lock(self, timeout: float | Deadline) -> AbstractContextManager[None]:
        """anaconda.org has no lock of its own: serialise the writers on this machine."""
        if self.lock_dir is None:
            return nullcontext()
        name = f"anaconda-{self.owner}-{self.label}.lock"
        return main_lock(self.lock_dir / name, timeout, f"channel {self.ref}")

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

    def upload(self, files: Sequence[Path], progress: Progress = no_progress) -> list[ChannelFile]:
        """Upload local ``.conda`` (or ``.tar.bz2``) files to this owner and label, the way
        ``anaconda upload -u OWNER --label LABEL`` does (same ``binstar_client`` calls and attrs).

        A file the owner already has with the same sha256 is not sent again (it only gets this label if
        it lacks it); one with a different sha256 is a ChannelError: nothing is ever overwritten. All
        files are checked against the server before anything is written. Returns the ChannelFiles of
        ``files`` as the label now lists them, each checked against the local sha256.
        """
        self._require_token()
        from binstar_client.inspect_package.conda import inspect_conda_package

        metas: list[tuple[Path, str, dict[str, Any], dict[str, Any], dict[str, Any]]] = []
        for path in files:
            path = Path(path)
            if not path.is_file() or not path.name.endswith((".conda", ".tar.bz2")):
                raise ChannelError(f"cannot upload {path}: not a .conda/.tar.bz2 file", path=path,
                                   field="channels.staging", hint="upload the artifacts a build wrote")
            try:
                package_data, release_data, file_data = inspect_conda_package(str(path))
            except Exception as exc:  # noqa: BLE001 - any unreadable archive
                raise ChannelError(f"cannot read package metadata from {path}: {exc}", path=path,
                                   field="channels.staging", hint="rebuild the package") from None
            sha = sha256_of(path)
            twin = next((m for m in metas if m[4]["basename"] == file_data["basename"]), None)
            if twin is not None and twin[1] != sha:
                raise ChannelError(f"{twin[0]} and {path} are both {file_data['basename']} but differ", path=path,
                                   field="channels.staging", hint="upload one build output folder at a time")
            if twin is None:
                metas.append((path, sha, package_data, release_data, file_data))
        if not metas:
            return []

        self._call(f"checking owner '{self.owner}'", self.api.user, self.owner)
        to_send, to_label = [], []
        for path, sha, package_data, release_data, file_data in metas:  # check everything before any write
            name, version, basename = package_data["name"], release_data["version"], file_data["basename"]
            existing = self._get_or_none(f"checking {basename}", self.api.distribution, self.owner, name, version,
                                         basename)
            if existing is None:
                to_send.append((path, sha, package_data, release_data, file_data))
            elif existing.get("sha256") != sha:
                raise ChannelError(
                    mask_secret(f"{self.describe()} already has {basename} with sha256 {existing.get('sha256')}, "
                                f"but the local file {path} has sha256 {sha}; a file is never overwritten",
                                self._token),
                    path=path, field="channels.staging",
                    hint="bump the recipe's build number (or version) and rebuild, or remove the old file "
                         "from anaconda.org first if it was never promoted")
            elif self.label not in (existing.get("labels") or ()):
                to_label.append((name, version, basename))
            else:
                progress(f"{basename}: already on {self.owner}/{self.label}, skipped")

        for name, version, basename in to_label:  # same file, uploaded under another label before
            self._call(f"labelling {basename}", self.api.add_channel, self.label, self.owner, name, version,
                       filename=basename)
            progress(f"{basename}: already uploaded, added label '{self.label}'")
        for path, sha, package_data, release_data, file_data in to_send:
            name, version, basename = package_data["name"], release_data["version"], file_data["basename"]
            what = f"uploading {basename}"
            self._ensure_package_and_release(what, name, version, package_data, release_data)
            with open(path, "rb") as fd, contextlib.redirect_stderr(io.StringIO()):  # no tqdm bar
                self._call(what, self.api.upload, self.owner, name, version, basename, fd, "conda",
                           sha256=sha, dependencies=file_data.get("dependencies"), attrs=file_data["attrs"],
                           channels=[self.label])
            progress(f"{basename}: uploaded to {self.owner}/{self.label}")

        listed = self.list_files()
        out = []
        for path, sha, _, _, file_data in metas:
            f = listed.get(file_data["basename"])
            if f is None or f.sha256 != sha:
                raise ChannelError(
                    f"after uploading {file_data['basename']}, {self.describe()} lists "
                    f"{'sha256 ' + f.sha256 if f else 'nothing'} for it, expected {sha}",
                    path=path, field="channels.staging", hint="check the file on anaconda.org and upload it again")
            out.append(f)
        progress(f"uploaded {len(to_send)} file(s) to {self.describe()}, "
                 f"{len(metas) - len(to_send)} already there")
        return out

    def _get_or_none(self, what: str, fn: Callable[..., T], *args: Any) -> T | None:
        """One read; None when the server says 404."""
        from binstar_client import errors

        def call() -> T | None:
            try:
                return fn(*args)
            except errors.NotFound:
                return None

        return self._call(what, call)

    def _ensure_package_and_release(self, what: str, name: str, version: str, package_data: Mapping[str, Any],
                                    release_data: Mapping[str, Any]) -> None:
        """Create the package and the release if the owner has neither yet (as ``anaconda upload`` does)."""
        from binstar_client.utils.config import PackageType

        if self._get_or_none(what, self.api.package, self.owner, name) is None:
            self._call(what, self.api.add_package, self.owner, name, package_data.get("summary") or name,
                       package_data.get("license"), public=True, attrs=dict(package_data),
                       license_url=package_data.get("license_url"),
                       license_family=package_data.get("license_family"), package_type=PackageType.CONDA)
        if self._get_or_none(what, self.api.release, self.owner, name, version) is None:
            self._call(what, self.api.add_release, self.owner, name, version, [], None, dict(release_data))

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
