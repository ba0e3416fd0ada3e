"""store: see docs/design.md."""
