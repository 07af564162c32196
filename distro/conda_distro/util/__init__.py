"""Tools every room uses: bounded file and JSON/YAML IO, git, dates, caches, secrets, safe text, templates."""
