"""twin, from twin-right: hostile test data."""
SIDE = "right"
