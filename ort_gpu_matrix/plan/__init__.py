"""Which runs exist and which are chosen, decided from the typed matrix alone, before this host is looked at.

Pairings become cells, each with its venv and one session per mode (cells.py); a `--select` or a session's
posargs choose cells and modes (select.py); the cells become CI jobs (ci.py); and a bisect's ORT builds are
put in order and halved (builds.py, bisection.py). Nothing here reads the machine, so a plan is the same on
every host and CI can compute it anywhere.
"""
