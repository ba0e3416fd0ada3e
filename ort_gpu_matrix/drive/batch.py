"""A batch of mode runs as children over GPU slots, each scoped teeth started early where it can: one sequence
for a cell session's overlapped modes and a `--gpus` sweep's cells.

Both plan the jobs from their last durations, mark the teeth that may start beside their require_cudnn
(earlyteeth.py), log the plan, run the children (scheduler.py) with each teeth told its census as soon as
it is stored, and close the hand-over whatever happens. They had written this twice; what each does with
the results the children stored stays with it.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from . import earlyteeth, makespan, scheduler


def run_batch(jobs: list[scheduler.Job], slots: Sequence[str], command: scheduler.ChildCommand, hooks: scheduler.Hooks,
              results_dir: Path, label: str) -> str | None:
    """Every job (scheduler.jobs_of) as a child, `len(slots)` at a time, each left with its exit and its timing;
    the signal that stopped the batch, or None. `label` begins the plan's log line."""
    voice = hooks.voice
    handoff = earlyteeth.mark(jobs, len(slots), results_dir, voice)  # a scoped teeth may start beside its census's run
    order, predicted = makespan.plan(jobs, len(slots))
    voice.log(f"{label}: {makespan.describe(order, predicted, len(slots))}")
    command = dataclasses.replace(command, args_for=lambda job: earlyteeth.args(job, handoff, results_dir, voice))
    hooks = dataclasses.replace(hooks, ended=lambda job: earlyteeth.hand_over(job, jobs, handoff, results_dir, voice))
    try:
        return scheduler.run(order, slots, command, hooks)
    finally:
        if handoff is not None:
            handoff.close()
