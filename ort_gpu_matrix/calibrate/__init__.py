"""calibrate: see docs/design.md."""
