"""A CycloneDX SBOM (JSON, spec 1.6) of a snapshot, written with cyclonedx-python-lib.

One component per package: the snapshot's own packages and the upstream packages its lockfiles install
with them. Each names its version, conda build (property ``conda:build``), sha256, license (the
package's own ``license``, as its index records it), package URL (``pkg:conda/NAME@VERSION?build=…``), where
the file is downloaded from (external reference ``distribution``) and, for the distribution's packages,
where its source comes from (``source-distribution``: the recipe's source URL, or for a source kept in
this repository, the recipe folder at the commit it was built from). A package whose license or source
is unknown says so (``conda-distro:license`` / ``conda-distro:source`` = ``unknown``) instead of
leaving the field out silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from conda_distro.util.fsutil import atomic_write_text


@dataclass(frozen=True)
class SbomPackage:
    name: str
    version: str
    build: str
    subdir: str
    sha256: str
    license: str | None
    url: str  # where the file is downloaded from
    source: str | None  # where its source comes from (None: unknown)
    ours: bool  # built by this distribution (else upstream)


def package_url(p: SbomPackage) -> str:
    from packageurl import PackageURL

    return str(PackageURL(type="conda", name=p.name, version=p.version,
                          qualifiers={"build": p.build, "subdir": p.subdir, "type": "conda"}))


def build_sbom(packages: Iterable[SbomPackage], *, name: str, version: str) -> str:
    """The SBOM of ``packages`` as CycloneDX 1.6 JSON text; the subject is ``name`` ``version`` (a snapshot)."""
    from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, Property, XsUri
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.model.license import LicenseExpression
    from cyclonedx.output.json import JsonV1Dot6
    from packageurl import PackageURL

    bom = Bom()
    root = Component(name=name, version=version, type=ComponentType.PLATFORM, bom_ref=f"conda-distro:{name}")
    bom.metadata.component = root
    components = []
    for p in sorted(packages, key=lambda p: (p.name, p.version, p.build)):
        refs = [ExternalReference(type=ExternalReferenceType.DISTRIBUTION, url=XsUri(p.url))]
        props = [Property(name="conda:build", value=p.build), Property(name="conda:subdir", value=p.subdir),
                 Property(name="conda-distro:origin", value="distribution" if p.ours else "upstream")]
        if p.source:
            refs.append(ExternalReference(type=ExternalReferenceType.SOURCE_DISTRIBUTION, url=XsUri(p.source)))
        else:
            props.append(Property(name="conda-distro:source", value="unknown"))
        if not p.license:
            props.append(Property(name="conda-distro:license", value="unknown"))
        purl = PackageURL(type="conda", name=p.name, version=p.version,
                          qualifiers={"build": p.build, "subdir": p.subdir, "type": "conda"})
        component = Component(
            name=p.name, version=p.version, type=ComponentType.LIBRARY, purl=purl, bom_ref=package_url(p),
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=p.sha256)],
            licenses=[LicenseExpression(p.license)] if p.license else [],
            external_references=refs, properties=props)
        bom.components.add(component)
        components.append(component)
    bom.register_dependency(root, components)
    return JsonV1Dot6(bom).output_as_string(indent=1) + "\n"


def write_sbom(path: Path, packages: Iterable[SbomPackage], *, name: str, version: str) -> Path:
    atomic_write_text(path, build_sbom(packages, name=name, version=version))
    return path


def packages_of(records: Iterable[Mapping], ours: Mapping[str, str | None]) -> list[SbomPackage]:
    """SbomPackages from repodata records (dicts with ``url``); ``ours``: our package names -> source URL."""
    out: dict[str, SbomPackage] = {}
    for r in records:
        url = str(r["url"])
        out[url] = SbomPackage(name=r["name"], version=str(r["version"]), build=r["build"], subdir=r["subdir"],
                               sha256=r.get("sha256") or "", license=r.get("license") or None, url=url,
                               source=ours.get(r["name"]), ours=r["name"] in ours)
    return list(out.values())
