"""`conda-distro sandbox DIR`."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperGroup

from conda_distro.cli.app import HELP_OPTIONS, Format, FormatOpt, app, emit, stderr


class _DefaultCreate(TyperGroup):
    """`sandbox DIR …` creates a world (the command `create`); `sandbox publish-release DIR VERSION` adds a
    release to one. Anything that is not a subcommand name goes to `create`."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["create", *args]
        return super().parse_args(ctx, args)

    def format_help(self, ctx, formatter):
        """Help as the README writes the command: `sandbox [OPTIONS] DIR` with its options, then the other
        subcommand (``create`` is the hidden name of the default)."""
        create = self.commands["create"]
        create.format_help(ctx.__class__(create, info_name=ctx.info_name, parent=ctx.parent), formatter)
        self.format_commands(ctx, formatter)


sandbox_app = typer.Typer(name="sandbox", cls=_DefaultCreate, no_args_is_help=True, add_completion=False,
                          context_settings=HELP_OPTIONS,
                          rich_markup_mode=None,
                          help="The sandbox world: `sandbox DIR` creates one; `sandbox publish-release DIR VERSION` "
                               "adds a stand-in PyTorch release to its upstream channel, `sandbox publish-package "
                               "DIR NAME VERSION --source FOLDER` any other package.")
app.add_typer(sandbox_app, name="sandbox")


def _progress(interactive: bool) -> Callable[[str], None] | None:
    """Progress lines on a terminal; under CI or a pipe they go to the log only."""
    if not interactive:
        return None
    return lambda msg: stderr.print(f"[dim]{msg}[/]", markup=True, highlight=False)


@sandbox_app.command("create", hidden=True)
def sandbox(
    dir: Annotated[Path, typer.Argument(help="The folder to create the sandbox world in.", metavar="DIR", show_default=False)],
    force: Annotated[bool, typer.Option("--force", help="Delete the content of a non-empty DIR first.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Build the upstream channel afresh instead of "
                                           "copying it from $CONDA_DISTRO_CACHE (~/.cache/conda-distro).")] = False,
    real: Annotated[bool, typer.Option("--real", help="The real world: this repository's recipes/ and distro.yaml "
                                       "against real PyTorch, with an upstream channel converted from PyPI wheels "
                                       "(first run downloads several GB; see docs/real-world.md).")] = False,
    refresh: Annotated[bool, typer.Option("--refresh", help="With --real: resolve again with pip, rewrite the lock "
                                          "(real-world.lock.json) and print what changed; without it the world is "
                                          "made of exactly the locked files.")] = False,
    compiled: Annotated[bool, typer.Option("--compiled", help="Add the compiled recipes (scatterkit <- sparsekit: "
                                           "C++/CUDA extensions built per PyTorch minor with the stand-in compiler "
                                           "packages; see docs/compiled.md).")] = False,
    format: FormatOpt = Format.text,
) -> int:
    """Create a self-contained, offline distribution world in DIR: an upstream channel with the host
    python and stand-in pytorch releases (cpu and cuda builds), and a set of sandbox recipes. A non-empty
    DIR is refused unless --force, and --force refuses a folder that is not a sandbox world of this user."""
    from conda_distro.sandbox import SandboxOptions, create_world

    interactive = stderr.is_terminal and not os.environ.get("CI") and sys.stderr.isatty()
    return emit(create_world(SandboxOptions(path=dir, force=force, use_cache=not no_cache, real=real,
                                            refresh=refresh, compiled=compiled, progress=_progress(interactive))),
                format)


@sandbox_app.command("publish-release")
def publish_release_cmd(
    dir: Annotated[Path, typer.Argument(help="A sandbox world (made by `conda-distro sandbox DIR`).", metavar="DIR", show_default=False)],
    version: Annotated[str, typer.Argument(help="The release to publish, e.g. 2.7.0.", metavar="VERSION", show_default=False)],
    format: FormatOpt = Format.text,
) -> int:
    """Publish a stand-in PyTorch release (cpu and cuda builds) into a sandbox world's upstream channel:
    the sandbox's "PyTorch VERSION is out", ready for `conda-distro sweep --pytorch VERSION`."""
    from conda_distro.sandbox import PublishOptions, publish_release

    return emit(publish_release(PublishOptions(world=dir, version=version)), format)


@sandbox_app.command("publish-package")
def publish_package_cmd(
    dir: Annotated[Path, typer.Argument(help="A sandbox world (made by `conda-distro sandbox DIR`).", metavar="DIR", show_default=False)],
    name: Annotated[str, typer.Argument(help="The package name, e.g. arraylib.", metavar="NAME", show_default=False)],
    version: Annotated[str, typer.Argument(help="Its version, e.g. 1.0.0.", metavar="VERSION", show_default=False)],
    source: Annotated[Path, typer.Option("--source", help="A folder whose files go into site-packages as they are.",
                                         show_default=False)],
    build_number: Annotated[int, typer.Option("--build-number", help="The build number.")] = 0,
    depends: Annotated[list[str] | None, typer.Option("--depends", help="A run requirement besides python "
                                                     "(repeatable), e.g. 'arraylib >=1,<2'.", show_default=False)] = None,
    format: FormatOpt = Format.text,
) -> int:
    """Publish a noarch: python package NAME VERSION holding the files of --source into a sandbox world's
    upstream channel: the sandbox's "conda-forge published it". A second build of a version (other files,
    same build number) gets another build string and a newer timestamp."""
    from conda_distro.sandbox.release import PackageOptions, publish_package

    return emit(publish_package(PackageOptions(world=dir, name=name, version=version, source=source,
                                               build_number=build_number, depends=tuple(depends or ()))), format)
