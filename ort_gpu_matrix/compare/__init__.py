"""compare: see docs/design.md."""
