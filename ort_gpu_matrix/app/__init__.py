"""The commands: what each nox session and the console script ask for, from the matrix to the files left behind.

The release sweep and `nox -s report` (sweep.py, with what it is asked and plans in outcome.py and what it
writes in outputs.py), calibrate (calibrate.py), bisect (bisect.py), the doctor (doctor.py), `ort-gpu-matrix
init` (starter.py) and the console script (cli.py). Each reads the matrix, chooses what runs and hands it to
the layers below; sessions/ only turns nox's arguments into these calls, so the engine never imports nox.
"""
