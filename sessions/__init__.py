"""ort-gpu-matrix: the harness behind noxfile.py.

Data flows one way: matrix (matrix.py) -> cells (cells.py) -> sessions
(registry.py) -> runs (runner.py) -> verdicts (verdicts.py) -> results
(results.py, table.py).
"""
