"""util: see docs/design.md."""
