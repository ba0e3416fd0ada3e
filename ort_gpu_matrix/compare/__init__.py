"""A sweep against a baseline, as pure comparison: it reads Results and a Baseline and starts nothing.

What changed, named by kind (regressions apart from improvements) so that scripts can rely on it
(changes.py); the same changes grouped for a person, by kind and by transition (grouping.py); which tests a
sweep must rerun before they count, and what a rerun shows (suspects.py); and what a confirmation rerun did
not reproduce, read from the results' own records so that `nox -s report` later
agrees with the sweep (unreproduced.py). Rerunning the regressions to confirm them is drive's job.
"""
