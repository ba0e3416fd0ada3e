"""plan: see docs/design.md."""
