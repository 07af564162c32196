"""The promotion gate and main's life cycle: plan, holds, reverse-dependency verdicts, installability, hints,
excuses, staleness, prune, retire; flaky tests and failure signatures."""
