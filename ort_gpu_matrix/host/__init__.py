"""host: see docs/design.md."""
