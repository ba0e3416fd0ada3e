"""judge: see docs/design.md."""
