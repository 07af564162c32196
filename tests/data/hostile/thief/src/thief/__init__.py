"""thief: hostile test data."""
