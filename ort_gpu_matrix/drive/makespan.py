"""The queue order of a sweep's mode runs, and its predicted makespan: longest first, refined by simulation.

Each run's last known duration comes from the results dir (no data counts as the longest), a require_cudnn
is ranked by the teeth that waits on it too, and one that an early teeth waits on is kept ahead of every run
nothing waits on; the order is then refined by simulating the schedule, a few hundred moves at most.
Kept apart from the scheduler that runs the queue (scheduler.py): planning reads last durations and
simulates; it starts nothing. The simulation picks jobs as the scheduler does (`scheduler.pick`), so a
plan cannot assume an order the scheduler would not follow.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from .scheduler import Job, pick

SEARCH_BUDGET = 400  # schedules simulated while refining the order: milliseconds for a matrix's worth of runs


def simulate(order: Sequence[Job], cost: dict[Job, float], slots: int,
             tail: Mapping[Job, float] | None = None) -> float:
    """The makespan of running `order` on `slots` slots as `run` does, with each job taking `cost` seconds. A job
    started early (before its predecessor ends) ends `tail[job]` after that predecessor, or `cost` after its own
    start if later (its start, `cost - tail`, is paid meanwhile; without a tail, half its cost is)."""
    waiting, free = list(order), list(range(slots))
    running: list[tuple[float, int, Job]] = []
    finished: set[Job] = set()
    slot_of: dict[Job, int] = {}
    began: dict[Job, float] = {}
    end_of: dict[Job, float] = {}
    now = 0.0
    while waiting or running:
        while free and (chosen := pick(waiting, free, finished, slot_of, began, now)) is not None:
            job, slot = chosen
            waiting.remove(job)
            free.remove(slot)
            slot_of[job] = slot
            began[job] = now
            end = now + cost[job]
            if job.after is not None and job.after not in finished:  # early: its tests wait for the census
                rest = min(cost[job], (tail or {}).get(job, cost[job] / 2))
                end = max(now + cost[job] - rest, end_of[job.after]) + rest
            end_of[job] = end
            running.append((end, slot, job))
        if not running:
            return float("inf")  # a job waits on one that is not in the plan
        running.sort(key=lambda r: (r[0], r[1]))
        now, slot, job = running.pop(0)
        finished.add(job)
        free.append(slot)
    return now


def plan(jobs: Sequence[Job], slots: int) -> tuple[list[Job], float | None]:
    """The queue order, longest first and refined by simulation, and its predicted makespan (None: no data).

    A run that a teeth started early waits on (its require_cudnn) stays ahead of every run that nothing waits on.
    The simulation gives each run a fixed cost, blind to runs slowing each other down, and on one GPU they do: the
    CPU, not the GPU, is what overlapped runs share (docs/evidence/one-gpu-cells-h200.md). Blind to that, it
    would start a long normal first; but each require_cudnn started
    lets its teeth's start be paid beside it, holding no core while it waits, and frees that teeth early."""
    known = [j.predicted_s for j in jobs if j.predicted_s is not None]
    longest = max(known, default=1.0)
    cost = {j: j.predicted_s if j.predicted_s is not None else longest for j in jobs}
    tail = {j: j.tail_s for j in jobs if j.tail_s is not None}
    ahead = {j.after for j in jobs if j.early_s is not None and j.after is not None}

    def chain(job: Job) -> float:  # the job and everything that waits on it
        return cost[job] + max((chain(d) for d in jobs if d.after is job), default=0.0)

    def keeps_ahead(candidate: list[Job]) -> bool:
        free = [i for i, j in enumerate(candidate) if j not in ahead and not any(d.after is j for d in jobs)]
        return not free or all(i < free[0] for i, j in enumerate(candidate) if j in ahead)

    # unknown first among equals (it may be longer still); stable: equal ranks keep the matrix's order
    order = sorted(jobs, key=lambda j: (j not in ahead, -chain(j), j.predicted_s is not None))
    best = simulate(order, cost, slots, tail)
    tried = 0
    improved = True
    while improved and tried < SEARCH_BUDGET:  # move one job elsewhere in the queue; keep a strictly better plan
        improved = False
        for i in range(len(order)):
            for k in range(len(order)):
                if i == k or tried >= SEARCH_BUDGET:
                    continue
                candidate = order[:i] + order[i + 1:]
                candidate.insert(k, order[i])
                if ahead and not keeps_ahead(candidate):
                    continue
                tried += 1
                makespan = simulate(candidate, cost, slots, tail)
                if makespan < best - 1e-9:
                    order, best, improved = candidate, makespan, True
                    break
            if improved:
                break
    return order, best if known else None


def describe(order: Sequence[Job], makespan: float | None, slots: int) -> str:
    """The plan, for the log: the queue with each run's last known duration, and the predicted makespan."""
    queue = ", ".join(f"{j.session} {'?' if j.predicted_s is None else f'{j.predicted_s:.1f}'} s" for j in order)
    total = sum(j.predicted_s or 0.0 for j in order)
    unknown = sum(j.predicted_s is None for j in order)
    if makespan is None:
        guess = "no predicted makespan: no run has a recorded duration yet"
    else:
        guess = f"predicted makespan {makespan:.1f} s of {total:.1f} s run time"
        if unknown:
            guess += f" ({unknown} run(s) without a recorded duration counted as the longest)"
    return f"plan: {len(order)} mode run(s) on {slots} slot(s), longest first: {queue}; {guess}"
