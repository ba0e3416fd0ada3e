"""matrix.toml, where the data flow starts: read, checked and typed before anything runs.

The model declares every table and key once (model.py, keys.py); the loader, the JSON Schema and the key
reference are all made from it (loader.py, reader.py, schema.py, reference.py), so the three never disagree,
and every problem of a file is reported at once. Beside it, the vocabulary every later layer shares: the
three modes (modes.py), tier names (kernels.py, tiernames.py), the rules an expectation lists (rules.py),
pairings (pairings.py), environment overrides (overrides.py), and expect files as TOML text (expectfile.py).
"""
