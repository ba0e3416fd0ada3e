"""The in-process probe: a pytest plugin loaded into every test process with `-p ort_matrix_probe.plugin`.

It is copied into each test venv, so it imports only the standard library and
pytest, never the engine. One job per module:

    inject.py      force CUDA EP provider options into every InferenceSession
    fdtap.py       read `SdpaKernel=<TIER>` from native fd 1 around run() (and ORT's log on fd 2)
    epcensus.py    which EP served each session that asked for the CUDA EP, its runs, ORT's reason for a fallback
    envreads.py    which tests read the variables a mode changes (the canary), so another mode may carry them
    subtests.py    which subtest (self.subTest, the subtests fixture) is open, so what runs inside it is its own
    ortpatch.py    patch onnxruntime when the tests import it, never before
    loader.py      the libs set's loader (torch_first, ort_preload_dlls), before anything else
    syspath.py     where `import onnxruntime` will resolve for the tests, found without importing it
    audit.py       which CUDA/cuDNN files serve this process
    provenance.py  what is installed, read from metadata without importing it
    selection.py   which collected items run: the engine's keep and drop lists, in every collecting process
    report.py      outcomes per test and per subtest, and the JSON report the engine judges
    schema.py      the report's shape and the subtest ids, shared with the engine
    plugin.py      the pytest hooks that tie them together
"""
