"""Expectations written from runs: today's outcome of a suite's cells, as the expect file that accepts it.

The runs are the chosen cells run now, each mode --runs times, or their stored results (gather.py, seen.py).
What differed between runs becomes known_flaky, never known_failures (flaky.py); tier rules and cuda_runs
rules are written per test function (tiers.py, eps.py); and suite.py merges them into the one file a person
reviews and commits. It sits after report, whose progress lines and result loader it uses.
"""
