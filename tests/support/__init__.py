"""Helpers shared by the test modules: ``from support.helpers import run_cli``, ``from support.repos import
write_distro``, the sandbox worlds and tiny channels (pytest plugins), fake servers and the workflow runner."""
