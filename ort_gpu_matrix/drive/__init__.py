"""drive: see docs/design.md."""
