"""Runs the flow: cells end to end, mode runs scheduled over GPU slots, regressions confirmed by rerunning them.

A cell's modes run in order through execute, judge and store, teeth reading the require_cudnn census made
just before, resolved once per run (cell.py, attempt.py, teeth.py, census.py); a sweep's mode runs go out as child processes over GPU slots,
longest first (scheduler.py, batch.py, makespan.py), and a cell session overlaps its modes on its one GPU
(overlap.py). A regression counts only once it reproduces, so drive reruns a sweep's regressed tests before
they count (confirm.py); a bisect step runs one ORT build (bisect_step.py). No nox in here: sessions/ and app/ call it.
"""
