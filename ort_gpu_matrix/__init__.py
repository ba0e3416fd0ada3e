"""ort-gpu-matrix's engine: everything but the nox session definitions, and never nox itself.

Data flows one way, one module a stage:

    config/   matrix.toml -> a validated model        (loader, model, schema)
    cells     pairings -> cells and their names
    host      a cell against this machine: interpreters, libraries, suite files
    venvs     one fingerprinted venv per install
    run       one mode run of pytest in a private dir, with ort_matrix_probe loaded
    verdicts  counts, census, coverage and audit -> a verdict
    results   a typed, versioned Result, stored atomically
    render/   how results are shown
    calibrate results -> the expect file that accepts them (expectfile writes it), for review

modes (what each mode sets and how it is judged) and kernels (tier names) are
the shared vocabulary; harness ties one cell's stages together.
"""
