"""matrix.toml: the model (model.py), reading and validating it (loader.py), pairing
expansion (pairings.py) and the JSON Schema generated from the same model (schema.py)."""
