"""One recipe: rendered by rattler-build, its typed model, its sources, its specs and pins, its variants, its editor."""
