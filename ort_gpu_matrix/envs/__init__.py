"""Where the tests run: one venv per install, and pip-installed library sets, each built once and reused.

A venv (venvs.py) and a libs set (libsets.py) are fingerprinted by what they install, rebuilt only when that
changes or they are damaged, and say why when they are. A CUDA torch is several GB, so a cell's modes share
one venv, and so do pairings that differ only in their libs.
"""
