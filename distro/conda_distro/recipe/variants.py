"""The distribution's variant configuration: what recipes render and build with.

distro.yaml names conda-forge-style variant files (``variant_config: [variants.yaml]``, the format of
conda-forge-pinning's ``conda_build_config.yaml`` and rattler-build's ``--variant-config``). They are
read by rattler-build's own loader; the supported PyTorch minors are added on top (key: pytorch.name),
so a bare ``pytorch`` in host gives one variant per supported minor, as conda-forge's pinning does.
Every key zipped with the PyTorch key (conda-forge's ``libtorch``) takes the same minors: the two keys
name one release, so no build pairs libtorch of one minor with pytorch of another.
"""

from __future__ import annotations

import os
from pathlib import Path

from conda_distro.config import DistroRepo
from conda_distro.errors import ConfigError
from conda_distro.recipe.render import RenderSettings
from conda_distro.util.cachedir import default_cache_dir
from conda_distro.util.rattler_env import fixed_environment
from conda_distro.util.yamlio import load_fast_file
from conda_distro.vocab import Release

RENDER_CACHE = "render"  # under the tool cache ($CONDA_DISTRO_CACHE): content-addressed, shared by checkouts


def pytorch_minors(releases: list[str]) -> list[str]:
    return [m for _, m in sorted({(Release(r).major_minor, Release(r).minor) for r in releases})]


def load_variant_files(distro: DistroRepo) -> tuple[dict[str, list], list[list[str]]]:
    """The merged variant files of distro.yaml (later files override earlier keys) and their zip_keys."""
    for i, path in enumerate(distro.variant_files):
        if not path.exists() and not path.is_symlink():  # (anything else there: the reader says what is wrong)
            raise ConfigError(f"variant config file {path} does not exist", path=distro.path, field=f"variant_config[{i}]",
                              hint="create it (see docs/add-your-package.md, section \"Recipes as rattler-build renders them\") "
                                   "or drop it from distro.yaml")
    return read_variant_files(distro.variant_files)


RECIPE_VARIANT_FILES = ("variants.yaml", "conda_build_config.yaml")  # beside a recipe, as feedstocks keep them


def read_variant_files(paths: list[Path], target_platform: str = "linux-64") -> tuple[dict[str, list], list[list[str]]]:
    """Variant files read by rattler-build's loaders, merged in order (later files override earlier
    keys). A ``conda_build_config.yaml`` is read with its ``# [selector]`` lines evaluated for the
    target platform, as conda-build and rattler-build do."""
    from rattler_build import JinjaConfig, PlatformConfig, RattlerBuildError, VariantConfig

    merged: dict[str, list] = {}
    zips: list[list[str]] = []
    for path in paths:
        load_fast_file(path)  # our YAML checks first (duplicate keys, syntax with line numbers)
        try:
            with fixed_environment():  # selectors may read os.environ (CF_CUDA_ENABLED, ...)
                if path.name == "conda_build_config.yaml":
                    jinja = JinjaConfig(platform=PlatformConfig(target_platform=target_platform))
                    vc = VariantConfig.from_conda_build_config(str(path), jinja)
                else:
                    vc = VariantConfig.from_file(str(path))
        except (RattlerBuildError, ValueError, OSError) as exc:
            raise ConfigError(f"rattler-build cannot read the variant config: {str(exc).strip()[:300]}", path=path,
                              hint="the format is conda_build_config.yaml's: key: [values], zip_keys: [[a, b]]") from None
        merged.update({str(k): [str(x) if not isinstance(x, bool) else x for x in v] for k, v in vc.to_dict().items()})
        zips.extend([list(z) for z in (vc.zip_keys or [])])
    return merged, zips


def recipe_settings(settings: RenderSettings, folder: Path, keep: tuple[str, ...] = (),
                    listing: frozenset[str] | None = None) -> RenderSettings:
    """The settings a recipe renders with: the distribution's, plus a variant file kept beside the
    recipe (a feedstock's ``recipe/conda_build_config.yaml`` or ``variants.yaml``, copied with it), whose
    keys override the distribution's, except ``keep`` (the PyTorch key: the distribution decides which
    releases are built). rattler-build's CLI reads such a file too; its Python API does not.
    ``listing``: the folder's entries, when the caller has them (not looked up again)."""
    # (``listing``: the folder's entries when the caller listed it; the reader refuses a FIFO)
    local = [folder / n for n in RECIPE_VARIANT_FILES if (n in listing if listing is not None else os.path.lexists(folder / n))]
    if not local:
        return settings
    variants, zips = read_variant_files(local, settings.target_platform)
    keep = tuple({p for k in keep for z in settings.zip_keys if k in z for p in z} | set(keep))  # (libtorch too)
    for k in keep:
        variants.pop(k, None)
        zips = [z for z in zips if k not in z]
    merged = settings.with_variants(variants)
    keys = {k for z in zips for k in z}
    kept = [z for z in merged.zip_keys if not keys & set(z)]
    return RenderSettings(merged.variants, tuple(tuple(z) for z in kept + zips), merged.target_platform,
                          merged.cache_dir)


def render_settings(distro: DistroRepo, *, cache: bool = True, platform: str | None = None) -> RenderSettings:
    variants, zips = load_variant_files(distro)
    cfg = distro.config.pytorch
    settings = RenderSettings.make(variants, zips, platform or distro.config.platforms[0],
                                   default_cache_dir() / RENDER_CACHE if cache else None)
    return settings.with_minors(cfg.name, pytorch_minors(cfg.releases))
