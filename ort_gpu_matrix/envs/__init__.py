"""envs: see docs/design.md."""
