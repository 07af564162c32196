"""check-pr: the PR gate, its entry point, and its comment view."""
