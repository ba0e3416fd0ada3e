"""What outlives a run, on disk: typed, versioned, written atomically and checked when it is read back.

A mode run's Result, one bundle per run with its log, junit file and probe report (results.py); what
confirming its regressions found, kept inside it (confirmation.py); a baseline, small enough to commit and
diff (baseline.py); and a bisect's record, written after every step so that it can resume (bisection.py).
Each file carries its version, and a reader refuses one it does not know instead of guessing.
"""
