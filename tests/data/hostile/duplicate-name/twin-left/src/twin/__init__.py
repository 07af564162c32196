"""twin, from twin-left: hostile test data."""
SIDE = "left"
