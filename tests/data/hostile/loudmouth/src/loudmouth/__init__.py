"""Test data: a package whose test prints hostile text (see shout.py)."""
