"""ort-gpu-matrix's engine: everything but the nox session definitions, and never nox itself.

Data flows one way, matrix.toml -> config -> plan -> host -> envs -> execute -> judge -> store -> report;
compare decides what changed against a baseline, and drive, calibrate and app run that flow. Each subpackage imports only those above it in this list
(tests/test_import_graph.py, LAYERS); docs/design.md ("Layout") names every module:

    util/       atomic files, escaping, user errors, the one voice, the codec of stored records; imports nothing of ours
    config/     matrix.toml -> a validated, typed model; modes, tier names, rules, expect files
    plan/       pairings -> cells and their sessions; what a --select chooses; CI jobs; a bisect's builds
    host/       a cell against this machine: interpreters, the driver, GPUs and the room on each
    envs/       one fingerprinted venv per install, and pip-installed library sets
    execute/    one mode run: pytest in a private dir with the probe inside, every witness read back
    judge/      a run's evidence -> a verdict: counts, tiers, EPs, flakes, expectations, pollution
    store/      results, confirmation records, baselines and bisect records on disk, typed and versioned
    compare/    a sweep against a baseline, purely: what changed, grouped, what to rerun, what did not reproduce
    drive/      runs cells end to end, schedules mode runs over GPU slots, confirms regressions by rerunning them
    report/     the report's data and every form of it: terminal, Markdown, HTML, live progress lines
    calibrate/  runs -> the expect file that accepts them, for review
    app/        the commands the sessions run: sweep and report, calibrate, bisect, doctor, init, the console script
"""
