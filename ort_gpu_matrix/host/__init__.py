"""This machine, read before anything is built: a cell resolved against what the host has.

Which python serves a cell (pythons.py), whether the NVIDIA driver serves its CUDA build (driver.py), which
GPUs a sweep may use, how many runs share one and what a run used (gpus.py, room.py, gpumem.py), which
library file a pin names (elf.py), and which ORT release a suite's tests come from (ortsource.py); host.py
ties them into one resolved cell. It reads and never installs, so the doctor shows the same facts a run
refuses on.
"""
