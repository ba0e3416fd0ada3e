"""execute: see docs/design.md."""
