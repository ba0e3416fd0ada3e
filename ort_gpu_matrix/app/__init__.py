"""app: see docs/design.md."""
