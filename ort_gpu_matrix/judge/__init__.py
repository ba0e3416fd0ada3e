"""A run's evidence -> its verdict, never by the exit code alone: the one place a run is judged.

Tests are counted and censused from the probe's report (counts.py), and the witnesses are set against each
other (witnesses.py). Then the expectations: tier rules (tiers.py), EP truth and fallbacks (eps.py),
known_flaky (flaky.py), what was expected (expected.py), subtests (subtests.py, covers.py), the library
audit (libraries.py), pollution (pollution.py) and rules that matched nothing (stale.py). verdicts.py makes
one Verdict of them, in the words every reader shares (outcomes.py), and judges a run again once a
confirmation rerun cleared some of its tests (rejudge.py). It starts nothing and stores nothing.
"""
