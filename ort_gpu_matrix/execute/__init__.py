"""One mode run: pytest in a private 0700 dir with the probe loaded, and every witness of what happened.

The request says which mode of which cell runs, in which venv (request.py); the test process gets exactly
the environment its mode needs (testenv.py); pytest's whole process group is supervised and stopped
together (mode_run.py, group.py); and what it left is read and checked, each witness on its own: the probe's
report (probe_report.py), junit XML (junit.py) and pytest's summary line (summary.py). Judging is judge's.
"""
