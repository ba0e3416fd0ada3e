"""The adversarial table: bad matrix files, each with the exact file/key/problem/fix it must produce.

Every row runs through the real nox: a structural problem stops `nox` at registration with exit status 2,
a host problem fails the session before anything is built. No row leaves a venv or a result behind, and no
row shows a traceback. Adding a check means adding a row.
"""
import os
import subprocess
import sys

import pytest
from helpers import PY, REPO, SUITES, ends_line, matrix_head, suite_head

ROOT = str(SUITES / "verdicts")
BASE = matrix_head(pythons=[PY], suite="s", modes=["normal"]) + f"""[pairing]
include = [{{ python = "{PY}", ort = "cpu", torch = "none", libs = "x" }}]

""" + suite_head("s", ["test_allpass.py"], [".."], root=ROOT)



def _expect(tmp, text):
    """Writes expect/s.toml beside the matrix; returns the suite key that loads it."""
    (tmp / "expect").mkdir(exist_ok=True)
    (tmp / "expect" / "s.toml").write_text(text)
    return 'expect_file = "expect/s.toml"\n'


EXPECT = "{tmp}/expect/s.toml"  # an expect file's problems name that file

ROWS = [
    ('prefix with a space', lambda b, tmp: b.replace('[matrix]\n', '[matrix]\nprefix = "g p u"\n'),
     [('matrix.prefix', "may hold only letters, digits, '_' and '.'", 'write prefix = "gpu"')]),
    ('pythons as TOML numbers', lambda b, tmp: b.replace(f'pythons = ["{PY}"]', 'pythons = [3.10]'),
     [('matrix.pythons', 'holds the TOML number 3.1, not a string (TOML reads 3.10 as 3.1)', 'quote every item: pythons = ["3.1"] (python 3.10 is "3.10")')]),
    ('unknown backend', lambda b, tmp: b.replace('[matrix]\n', '[matrix]\nbackend = "uv|conda"\n'),
     [('matrix.backend', '`conda` is not a venv backend', 'use one or more of uv|virtualenv|venv, e.g. "uv|virtualenv"')]),
    ('backend misspelt', lambda b, tmp: b.replace('[matrix]\n', '[matrix]\nbackend = "uv|virtualen"\n'),
     [('matrix.backend', '`virtualen` is not a venv backend (did you mean `virtualenv`?)', 'write backend = "uv|virtualenv"')]),
    ('backend with an empty part', lambda b, tmp: b.replace('[matrix]\n', '[matrix]\nbackend = "uv|"\n'),
     [('matrix.backend', "'' is not a venv backend", 'use one or more of uv|virtualenv|venv, e.g. "uv|virtualenv"')]),
    ('modes empty', lambda b, tmp: b.replace('modes = ["normal"]', 'modes = []'),
     [('matrix.modes', 'is empty: every pairing would run nothing', 'list some of: normal, require_cudnn, teeth, or remove the key')]),
    ('unknown mode', lambda b, tmp: b.replace('modes = ["normal"]', 'modes = ["fast"]'),
     [('matrix.modes[0]', '`fast` is not a mode', 'use some of: normal, require_cudnn, teeth')]),
    ('mode misspelt', lambda b, tmp: b.replace('modes = ["normal"]', 'modes = ["normal", "teth"]'),
     [('matrix.modes[1]', '`teth` is not a mode (did you mean `teeth`?)', 'write "teeth"')]),
    ('mode with a terminal escape', lambda b, tmp: b.replace('modes = ["normal"]', 'modes = ["\\u001b[2Jnormal"]'),
     [('matrix.modes[0]', "'\\x1b[2Jnormal' is not a mode (did you mean `normal`?)", 'write "normal"')]),
    ('python with a patch version', lambda b, tmp: b.replace(f'pythons = ["{PY}"]', 'pythons = ["3.12.1"]'),
     [('matrix.pythons[0]', '`3.12.1` is not a python version (did you mean `3.12`?)', 'write "3.12"')]),
    ('python this misspelt', lambda b, tmp: b.replace(f'pythons = ["{PY}"]', f'pythons = ["{PY}", "This"]'),
     [('matrix.pythons[1]', '`This` is not a python version (did you mean `this`?)', 'write "this"')]),
    ('offline not a bool', lambda b, tmp: b.replace('[matrix]\n', '[matrix]\noffline = "yes"\n'),
     [('matrix.offline', "must be true or false, found 'yes'", 'write offline = true')]),
    ('offline without wheelhouse', lambda b, tmp: b.replace('[matrix]\n', '[matrix]\noffline = true\n'),
     [('matrix.offline', 'is true (or MATRIX_OFFLINE=1) but no wheelhouse is given: nothing could be installed', 'add wheelhouse = ["/path/to/wheels"], or set MATRIX_WHEELHOUSE')]),
    ('unknown matrix.suite', lambda b, tmp: b.replace('suite = "s"', 'suite = "nope"'),
     [('matrix.suite', '`nope` is not a declared suite id', 'declare [suite.nope] or use one of: s')]),
    ('matrix.suite misspelt', lambda b, tmp: b.replace('suite = "s"', 'suite = "S"'),
     [('matrix.suite', '`S` is not a declared suite id (did you mean `s`?)', 'write "s", or declare [suite.S]')]),
    ('near-miss matrix key', lambda b, tmp: b.replace('[matrix]\n', '[matrix]\nbackends = "uv"\n'),
     [('matrix.backends', 'unknown key (did you mean `backend`?)', 'rename backends to backend')]),
    ('unknown top-level table', lambda b, tmp: b + '\n[matrx]\nprefix = "x"\n',
     [('matrx', 'unknown key', 'remove it, or use one of: $schema, libs, matrix, ort, pairing, suite, torch')]),
    ('schema not a string', lambda b, tmp: '"$schema" = 1\n' + b,
     [('$schema', 'must be a string, found 1', '"$schema" = "./matrix.schema.json"')]),
    ('ort requirement and wheel', lambda b, tmp: b.replace('requirement = "onnxruntime==1.32.0"', 'requirement = "onnxruntime==1.32.0"\nwheel = "x.whl"'),
     [('ort.cpu', 'needs exactly one of requirement, wheel (found requirement, wheel)', 'keep one of: requirement, wheel')]),
    ('ort without a form', lambda b, tmp: b.replace('requirement = "onnxruntime==1.32.0"\n', ''),
     [('ort.cpu', 'needs exactly one of requirement, wheel (found none)', 'keep one of: requirement, wheel')]),
    ('ort index_url with a wheel', lambda b, tmp: b.replace('requirement = "onnxruntime==1.32.0"', 'wheel = "x.whl"\nindex_url = "https://x/simple/"'),
     [('ort.cpu.index_url', 'only applies with `requirement`', 'remove index_url, or add requirement')]),
    ('ort with not a list', lambda b, tmp: b.replace('with = ["onnx==1.20.1"]', 'with = "onnx==1.20.1"'),
     [('ort.cpu.with', "must be a list of strings, found 'onnx==1.20.1'", 'write with = ["..."]')]),
    ('ort id with a dash', lambda b, tmp: b.replace('[ort.cpu]', '[ort.cpu-1]').replace('ort = "cpu"', 'ort = "cpu-1"'),
     [('ort.cpu-1', "id may hold only letters, digits, '_' and '.'", 'rename it: ids become parts of session names')]),
    ('ort requirement a number', lambda b, tmp: b.replace('requirement = "onnxruntime==1.32.0"', 'requirement = 1.32'),
     [('ort.cpu.requirement', 'is the TOML number 1.32, not a string', 'quote it: requirement = "1.32"')]),
    ('torch skip false', lambda b, tmp: b.replace('skip = true', 'skip = false'),
     [('torch.none.skip', 'skip = false declares nothing', 'write skip = true, or use requirement or environment')]),
    ('torch two forms', lambda b, tmp: b.replace('skip = true', 'skip = true\nenvironment = "/opt/torch"'),
     [('torch.none', 'needs exactly one of requirement, environment, skip (found environment, skip)', 'keep one of: requirement, environment, skip')]),
    ('torch index_url with environment', lambda b, tmp: b.replace('skip = true', 'environment = "/opt/torch"\nindex_url = "https://x/simple/"'),
     [('torch.none.index_url', 'only applies with `requirement`', 'remove index_url, or add requirement')]),
    ('libs none with a file', lambda b, tmp: b.replace('none = true', 'none = true\ncudnn = "/x/libcudnn.so.9"'),
     [('libs.x', 'needs exactly one of cudart/cudnn, search, pip, none (found cudart/cudnn, none)', 'keep one of: cudart/cudnn, search, pip, none')]),
    ('libs none false', lambda b, tmp: b.replace('none = true', 'none = false'),
     [('libs.x.none', 'none = false declares nothing', 'write none = true, or use cudart/cudnn or search or pip')]),
    ('libs without a form', lambda b, tmp: b.replace('[libs.x]\nnone = true', '[libs.x]\nrunner = "gpu"'),
     [('libs.x', 'needs exactly one of cudart/cudnn, search, pip, none (found none)', 'keep one of: cudart/cudnn, search, pip, none')]),
    ('libs near-miss key', lambda b, tmp: b.replace('none = true', 'cudnnn = "/x/libcudnn.so.9"'),
     [('libs.x.cudnnn', 'unknown key (did you mean `cudnn`?)', 'rename cudnnn to cudnn')]),
    ('libs runner empty', lambda b, tmp: b.replace('none = true', 'none = true\nrunner = []'),
     [('libs.x.runner', 'is empty', 'write runner = "label", or remove it')]),
    ('libs search not a list of strings', lambda b, tmp: b.replace('none = true', 'search = [1]'),
     [('libs.x.search', 'holds the TOML number 1, not a string', 'quote every item: search = ["1"]')]),
    ('suite root missing', lambda b, tmp: b.replace(f'root = "{ROOT}"\n', ''),
     [('suite.s.root', 'is missing', 'add root = "suites/dispatch" (the tests\' dir, relative to the matrix file; ${VAR} expanded; may begin with {ort.source} (the pairing\'s ORT source tree))')]),
    ('suite root misspelt', lambda b, tmp: b.replace('root = ', 'rooot = '),
     [('suite.s.rooot', 'unknown key (did you mean `root`?)', 'rename rooot to root')]),
    ('suite files empty', lambda b, tmp: b.replace('files = ["test_allpass.py"]', 'files = []'),
     [('suite.s.files', 'is empty', 'add files = ["test_*.py"] (relative to root)')]),
    ('suite env reserved LD_PRELOAD', lambda b, tmp: b + 'env = { LD_PRELOAD = "/x.so" }\n',
     [('suite.s.env.LD_PRELOAD', 'is set by the harness itself (the harness sets it for every run)', 'remove it from suite.env; pin libraries with a [libs.<id>] set')]),
    ('suite env harness prefix', lambda b, tmp: b + 'env = { ORT_MATRIX_REPORT = "x" }\n',
     [('suite.s.env.ORT_MATRIX_REPORT', "is set by the harness itself (ORT_MATRIX_* variables carry the probe's channels and options)", 'remove it from suite.env; the harness sets it for every run')]),
    ('suite env not strings', lambda b, tmp: b + 'env = { A = true }\n',
     [('suite.s.env', 'must be a table of strings', 'write env = { NAME = "value" }')]),
    ('suite timeout zero', lambda b, tmp: b + 'timeout = 0\n',
     [('suite.s.timeout', 'must be a whole number >= 1, found 0', 'write timeout = 3600')]),
    ('suite test_timeout zero', lambda b, tmp: b + 'test_timeout = 0\n',
     [('suite.s.test_timeout', 'must be a whole number >= 1, found 0', 'write test_timeout = 1')]),
    ('suite slots_per_gpu zero', lambda b, tmp: b + 'slots_per_gpu = 0\n',
     [('suite.s.slots_per_gpu', 'must be a whole number >= 1, found 0', 'write slots_per_gpu = 1')]),
    ('suite slots_per_gpu a string', lambda b, tmp: b + 'slots_per_gpu = "auto"\n',
     [('suite.s.slots_per_gpu', "must be a whole number >= 1, found 'auto'", 'write slots_per_gpu = 1')]),
    ('suite pytest_args a string', lambda b, tmp: b + 'pytest_args = "-q"\n',
     [('suite.s.pytest_args', "must be a list of strings, found '-q'", 'write pytest_args = ["..."]')]),
    ('suite provider_options a list', lambda b, tmp: b + 'provider_options = ["sdpa_kernel=16"]\n',
     [('suite.s.provider_options', 'must be a table of strings', 'write provider_options = { NAME = "value" }')]),
    ('expect unknown mode table', lambda b, tmp: b + '[suite.s.expect.fast]\nmin_passed = 1\n',
     [('suite.s.expect.fast', 'unknown key', 'remove it, or use one of: normal, require_cudnn, teeth')]),
    ('expect min_passed negative', lambda b, tmp: b + '[suite.s.expect.normal]\nmin_passed = -1\n',
     [('suite.s.expect.normal.min_passed', 'must be a whole number >= 0, found -1', 'write min_passed = 1')]),
    ('expect min_passed a float', lambda b, tmp: b + '[suite.s.expect.normal]\nmin_passed = 1.5\n',
     [('suite.s.expect.normal.min_passed', 'must be a whole number >= 0, found 1.5', 'write min_passed = 1')]),
    ('isolation unknown', lambda b, tmp: b.replace('[suite.s]\n', '[suite.s]\nisolation = "strict"\n'),
     [('suite.s.isolation', "'strict' is not an isolation", 'use one of: restore, report, off')]),
    ('isolation misspelt', lambda b, tmp: b.replace('[suite.s]\n', '[suite.s]\nisolation = "restor"\n'),
     [('suite.s.isolation', "'restor' is not an isolation (did you mean `restore`?)", 'use one of: restore, report, off')]),
    ('cpu_nodes unknown', lambda b, tmp: b.replace('[suite.s]\n', '[suite.s]\ncpu_nodes = "error"\n'),
     [('suite.s.cpu_nodes', "'error' is not a cpu_nodes choice", 'use one of: warn, fail')]),
    ('cpu_nodes misspelt', lambda b, tmp: b.replace('[suite.s]\n', '[suite.s]\ncpu_nodes = "fial"\n'),
     [('suite.s.cpu_nodes', "'fial' is not a cpu_nodes choice (did you mean `fail`?)", 'use one of: warn, fail')]),
    ('shape_ops a string', lambda b, tmp: b.replace('[suite.s]\n', '[suite.s]\nshape_ops = "Shape"\n'),
     [('suite.s.shape_ops', "must be a list of strings, found 'Shape'", 'write shape_ops = ["..."]')]),
    ('cuda_ops without ops', lambda b, tmp: b + '[suite.s.expect.normal]\ncuda_ops = [{ test = "TestMoE::" }]\n',
     [('suite.s.expect.normal.cuda_ops[0].ops', 'is missing', 'add ops = ["com.microsoft.MoE"] (the ops (`Unique`; another domain\'s after it: `com.microsoft.MoE`) that must run, and run on the CUDA EP only, in each matching test that passed)')]),
    ('cuda_ops with no op', lambda b, tmp: b + '[suite.s.expect.normal]\ncuda_ops = [{ test = "x", ops = [] }]\n',
     [('suite.s.expect.normal.cuda_ops[0].ops', 'is empty: it needs at least 1 item(s)', 'write ops = ["com.microsoft.MoE"] (the ops (`Unique`; another domain\'s after it: `com.microsoft.MoE`) that must run, and run on the CUDA EP only, in each matching test that passed)')]),
    ('cuda_ops op with a space', lambda b, tmp: b + '[suite.s.expect.teeth]\ncuda_ops = [{ test = "x", ops = ["com.microsoft MoE"] }]\n',
     [('suite.s.expect.teeth.cuda_ops[0].ops[0]', "`com.microsoft MoE` is not an op as the node census names it (its type, after its domain unless ONNX's own)", 'write ops = ["Unique"], or ["com.microsoft.MoE"] for another domain\'s op')]),
    ('shape_ops item with a space', lambda b, tmp: b.replace('[suite.s]\n', '[suite.s]\nshape_ops = ["Shape", "com.microsoft MoE"]\n'),
     [('suite.s.shape_ops[1]', "`com.microsoft MoE` is not an op as the node census names it (its type, after its domain unless ONNX's own)", 'write ops = ["Unique"], or ["com.microsoft.MoE"] for another domain\'s op')]),
    ('cuda_ops in ONNX domain spelt out', lambda b, tmp: b + '[suite.s.expect.normal]\ncuda_ops = [{ test = "x", ops = ["ai.onnx.Relu"] }]\n',
     [('suite.s.expect.normal.cuda_ops[0].ops[0]', "`ai.onnx.Relu` names ONNX's own domain, which the node census leaves out", 'write "Relu"')]),
    ('allowed_cpu_ops op twice', lambda b, tmp: b + '[suite.s.expect.normal]\nallowed_cpu_ops = [{ test = "x", ops = ["Unique", "Unique"], reason = "r" }]\n',
     [('suite.s.expect.normal.allowed_cpu_ops[0].ops[1]', "`Unique` is listed twice", 'list each op once')]),
    ('allowed_cpu_ops without reason', lambda b, tmp: b + '[suite.s.expect.normal]\nallowed_cpu_ops = [{ test = "x", ops = ["Unique"] }]\n',
     [('suite.s.expect.normal.allowed_cpu_ops[0].reason', 'is missing', 'add reason = "..." (why it is tolerated (ORT has no CUDA kernel for it, say))')]),
    ('isolation as a bool', lambda b, tmp: b.replace('[suite.s]\n', '[suite.s]\nisolation = false\n'),
     [('suite.s.isolation', 'must be a string, found False', 'write isolation = "..."')]),
    ('teeth min_failures zero', lambda b, tmp: b + '[suite.s.expect.teeth]\nmin_failures = 0\n',
     [('suite.s.expect.teeth.min_failures', 'must be a whole number >= 1, found 0', 'write min_failures = 1')]),
    ('teeth key under normal', lambda b, tmp: b + '[suite.s.expect.normal]\nknown_toothless = []\n',
     [('suite.s.expect.normal.known_toothless', 'unknown key here: known_toothless is read only by [suite.s.expect.teeth]', 'move it to [suite.s.expect.teeth], or use one of: allowed_cpu_ops, allowed_fallbacks, allowed_skips, cuda_ops, cuda_runs, dispatch_tests, forbid_kernels, known_failures, known_flaky, min_passed, require_kernel, tiers')]),
    ('bad regex in allowed_skips', lambda b, tmp: b + '[suite.s.expect.normal]\nallowed_skips = ["(unclosed"]\n',
     [('suite.s.expect.normal.allowed_skips[0]', 'is not a valid regex (missing ), unterminated subpattern at position 0)', 'escape special characters such as ( [ + ?')]),
    ('bad regex in dispatch_tests', lambda b, tmp: b + '[suite.s.expect.normal]\ndispatch_tests = "[a-"\n',
     [('suite.s.expect.normal.dispatch_tests', 'is not a valid regex (unterminated character set at position 0)', 'escape special characters such as ( [ + ?')]),
    ('tier rule with an unknown key', lambda b, tmp: b + '[suite.s.expect.normal]\ntiers = [{ test = "x", onyl = ["XQA"] }]\n',
     [('suite.s.expect.normal.tiers[0].onyl', 'unknown key (did you mean `only`?)', 'rename onyl to only')]),
    ('tier rule without only', lambda b, tmp: b + '[suite.s.expect.normal]\ntiers = [{ test = "x" }]\n',
     [('suite.s.expect.normal.tiers[0].only', 'is missing', 'add only = ["EFFICIENT_ATTENTION"] (the tiers a matching test may dispatch, as ORT prints them (any name, XQA too); it must dispatch at least one of them and nothing else)')]),
    ('tier rule with an empty only', lambda b, tmp: b + '[suite.s.expect.normal]\ntiers = [{ test = "x", only = [] }]\n',
     [('suite.s.expect.normal.tiers[0].only', 'is empty: it needs at least 1 item(s)', 'write only = ["EFFICIENT_ATTENTION"] (the tiers a matching test may dispatch, as ORT prints them (any name, XQA too); it must dispatch at least one of them and nothing else)')]),
    ('tier rule with a bad regex', lambda b, tmp: b + '[suite.s.expect.normal]\ntiers = [{ test = "Test(Flash", only = ["FLASH_ATTENTION"] }]\n',
     [('suite.s.expect.normal.tiers[0].test', 'is not a valid regex (missing ), unterminated subpattern at position 4)', 'escape special characters such as ( [ + ?')]),
    ('tier name in lower case', lambda b, tmp: b + '[suite.s.expect.normal]\ntiers = [{ test = "x", only = ["xqa", "flash_attention"] }]\n',
     [('suite.s.expect.normal.tiers[0].only[0]', "'xqa' is not a tier name as ORT prints it (did you mean `XQA`?)", 'write "XQA"'),
      ('suite.s.expect.normal.tiers[0].only[1]', "'flash_attention' is not a tier name as ORT prints it (did you mean `FLASH_ATTENTION`?)", 'write "FLASH_ATTENTION"')]),
    ('tier name the probe could never record', lambda b, tmp: b + '[suite.s.expect.normal]\ntiers = [{ test = "x", only = ["SdpaKernel=MATH"] }]\n',
     [('suite.s.expect.normal.tiers[0].only[0]', "'SdpaKernel=MATH' is not a tier name as ORT prints it (capitals, digits and _, as after SdpaKernel=)", 'use a name from the report\'s tier table, e.g. FLASH_ATTENTION, EFFICIENT_ATTENTION, TRT_FUSED_ATTENTION, CUDNN_FLASH_ATTENTION, MATH, XQA')]),
    ('tier rules in teeth', lambda b, tmp: b + '[suite.s.expect.teeth]\ntiers = [{ test = "x", only = ["MATH"] }]\n',
     [('suite.s.expect.teeth.tiers', 'unknown key here: tiers is read only by [suite.s.expect.normal]', 'move it to [suite.s.expect.normal], or use one of: allowed_cpu_ops, allowed_fallbacks, cuda_ops, cuda_runs, dispatch_tests, forbid_kernels, known_failures, known_flaky, known_toothless, message, min_failures, require_kernel, tier')]),
    ('tier rules as a table', lambda b, tmp: b + '[suite.s.expect.normal]\ntiers = { test = "x", only = ["MATH"] }\n',
     [('suite.s.expect.normal.tiers', 'must be a list of tables', 'write tiers = [{ test = "regex", reason = "why" }]')]),
    ('expect file tier rule with a bad only', lambda b, tmp: b + _expect(tmp, '[expect.require_cudnn]\ntiers = [{ test = "x", only = "XQA" }]\n'),
     [(EXPECT, 'expect.require_cudnn.tiers[0].only', "must be a list of strings, found 'XQA'", 'write only = ["..."]')]),
    ('allowed_fallbacks entry without error', lambda b, tmp: b + '[suite.s.expect.normal]\nallowed_fallbacks = [{ test = "x", reason = "no GPU here" }]\n',
     [('suite.s.expect.normal.allowed_fallbacks[0].error', 'is missing', 'add error = "^CUDAExecutionProvider is not in this build" (a regex searched in ORT\'s reason for the fallback (its EP error, or the library that would not load); a fallback with another reason still fails)')]),
    ('allowed_fallbacks error that is no regex', lambda b, tmp: b + '[suite.s.expect.teeth]\nallowed_fallbacks = [{ test = "x", error = "libcublas(", reason = "r" }]\n',
     [('suite.s.expect.teeth.allowed_fallbacks[0].error', 'is not a valid regex (missing ), unterminated subpattern at position 9)', 'escape special characters such as ( [ + ?')]),
    ('cuda_runs with min 0', lambda b, tmp: b + '[suite.s.expect.normal]\ncuda_runs = [{ test = "x", min = 0 }]\n',
     [('suite.s.expect.normal.cuda_runs[0].min', 'must be a whole number >= 1, found 0', 'write min = 1')]),
    ('cuda_runs with a misspelt key', lambda b, tmp: b + '[suite.s.expect.normal]\ncuda_runs = [{ test = "x", minimum = 2 }]\n',
     [('suite.s.expect.normal.cuda_runs[0].minimum', 'unknown key', 'remove it, or use one of: min, observed, reason, subtests, test')]),
    ('cuda_runs as a table', lambda b, tmp: b + '[suite.s.expect.normal]\ncuda_runs = { test = "x" }\n',
     [('suite.s.expect.normal.cuda_runs', 'must be a list of tables', 'write cuda_runs = [{ test = "regex", reason = "why" }]')]),
    ('known_failures entry without reason', lambda b, tmp: b + '[suite.s.expect.normal]\nknown_failures = [{ test = "x" }]\n',
     [('suite.s.expect.normal.known_failures[0].reason', 'is missing', 'add reason = "..." (why)')]),
    ('known_flaky without outcomes', lambda b, tmp: b + '[suite.s.expect.normal]\nknown_flaky = [{ test = "x", reason = "r" }]\n',
     [('suite.s.expect.normal.known_flaky[0].outcomes', 'is missing', 'add outcomes = ["passed", "failed"] (every outcome it may take (passed, failed, skipped, error, xfailed, xpassed))'),
      ('suite.s.expect.normal.known_flaky[0].outcomes', 'is empty: a flaky rule lists every outcome the test may take', 'write outcomes = ["passed", "failed"]')]),
    ('known_flaky bad outcome', lambda b, tmp: b + '[suite.s.expect.normal]\nknown_flaky = [{ test = "x", reason = "r", outcomes = ["passed", "flaked"] }]\n',
     [('suite.s.expect.normal.known_flaky[0].outcomes[1]', '`flaked` is not a pytest outcome (did you mean `failed`?)', 'write "failed"')]),
    ('known_flaky bad tier', lambda b, tmp: b + '[suite.s.expect.normal]\nknown_flaky = [{ test = "x", reason = "r", outcomes = ["passed"], tiers = ["flash"] }]\n',
     [('suite.s.expect.normal.known_flaky[0].tiers[0]', '`flash` is not an SdpaKernel tier name', 'write tiers as ORT prints them, e.g. ["EFFICIENT_ATTENTION", "FLASH_ATTENTION"]')]),
    ('known_flaky bad regex', lambda b, tmp: b + '[suite.s.expect.normal]\nknown_flaky = [{ test = "x(", reason = "r", outcomes = ["passed"] }]\n',
     [('suite.s.expect.normal.known_flaky[0].test', 'is not a valid regex (missing ), unterminated subpattern at position 1)', 'escape special characters such as ( [ + ?')]),
    ('known_toothless not tables', lambda b, tmp: b + '[suite.s.expect.teeth]\nknown_toothless = ["x"]\n',
     [('suite.s.expect.teeth.known_toothless[0]', 'must be a table, found str', 'write it as an inline table: { key = value, ... }')]),
    ('pairing unknown ort id', lambda b, tmp: b.replace('ort = "cpu", torch', 'ort = "gpu", torch'),
     [('pairing.include[0].ort', '`gpu` is not a declared ort id (did you mean `cpu`?)', 'write "cpu", or declare [ort.gpu]')]),
    ('pairing unknown libs id', lambda b, tmp: b.replace('libs = "x" }', 'libs = "cu130" }'),
     [('pairing.include[0].libs', '`cu130` is not a declared libs id', 'declare [libs.cu130] or use one of: x')]),
    ('pairing torch id misspelt', lambda b, tmp: b.replace('torch = "none", libs', 'torch = "non", libs'),
     [('pairing.include[0].torch', '`non` is not a declared torch id (did you mean `none`?)', 'write "none", or declare [torch.non]')]),
    ('pairing suite misspelt', lambda b, tmp: b.replace('libs = "x" }', 'libs = "x", suite = "ss" }'),
     [('pairing.include[0].suite', '`ss` is not a declared suite id (did you mean `s`?)', 'write "s", or declare [suite.ss]')]),
    ('pairing mode misspelt', lambda b, tmp: b.replace('libs = "x" }', 'libs = "x", modes = ["normal", "require_cudn"] }'),
     [('pairing.include[0].modes[1]', '`require_cudn` is not a mode (did you mean `require_cudnn`?)', 'write "require_cudnn"')]),
    ('pairing unknown mode', lambda b, tmp: b.replace('libs = "x" }', 'libs = "x", modes = ["fast"] }'),
     [('pairing.include[0].modes[0]', '`fast` is not a mode', 'use some of: normal, require_cudnn, teeth')]),
    ('exclude names an undeclared libs id', lambda b, tmp: b.replace('[pairing]\n', '[pairing]\nexclude = [{ libs = "xx" }]\n'),
     [('pairing.exclude[0].libs', '`xx` is not a declared libs id (did you mean `x`?)', 'write "x", or declare [libs.xx]')]),
    ('exclude names an undeclared ort id', lambda b, tmp: b.replace('[pairing]\n', '[pairing]\nexclude = [{ python = "3.99", ort = "gpu131" }]\n'),
     [('pairing.exclude[0].ort', '`gpu131` is not a declared ort id', 'declare [ort.gpu131] or use one of: cpu')]),
    ('pairing python a number', lambda b, tmp: b.replace(f'{{ python = "{PY}"', '{ python = 3.10'),
     [('pairing.include[0].python', 'is the TOML number 3.1, not a string (TOML reads 3.10 as 3.1)', 'quote it: python = "3.1" (python 3.10 is "3.10")')]),
    ('pairing python not a version', lambda b, tmp: b.replace(f'{{ python = "{PY}"', '{ python = "py3"'),
     [('pairing.include[0].python', '`py3` is not a python version', 'write X.Y, such as "3.12", or "this" (the python running nox)')]),
    ('pairing python with a prefix', lambda b, tmp: b.replace(f'{{ python = "{PY}"', '{ python = "python3.12"'),
     [('pairing.include[0].python', '`python3.12` is not a python version (did you mean `3.12`?)', 'write "3.12"')]),
    ('pairing modes empty', lambda b, tmp: b.replace('libs = "x" }', 'libs = "x", modes = [] }'),
     [('pairing.include[0].modes', 'is empty: the pairing would run nothing', 'modes = ["normal"]')]),
    ('pairing near-miss key', lambda b, tmp: b.replace('libs = "x" }', 'libs = "x", suit = "s" }'),
     [('pairing.include[0].suit', 'unknown key (did you mean `suite`?)', 'rename suit to suite')]),
    ('pairing missing libs', lambda b, tmp: b.replace(', libs = "x" }', ' }'),
     [('pairing.include[0].libs', 'is missing', 'add libs = "..." (a [libs.<id>])')]),
    ('pairing include not a list', lambda b, tmp: b.replace('include = [{', 'include = {').replace('"x" }]', '"x" }'),
     [('pairing.include', 'must be a list of tables', 'include = [{ python = "3.12", ort = "...", torch = "...", libs = "..." }]')]),
    ('exclude removes everything', lambda b, tmp: b.replace('[pairing]\n', '[pairing]\nexclude = [{ libs = "x" }]\n'),
     [('pairing', 'no pairing is left after exclude', 'loosen pairing.exclude or add pairing.include entries')]),
    ('the same pairing twice', lambda b, tmp: b.replace('libs = "x" }]', 'libs = "x" }, { python = "' + PY + '", ort = "cpu", torch = "none", libs = "x" }]'),
     [('pairing.include[1]', 'declares the same pairing as pairing.include[0] (gpu-{py}-x-cpu-none-s)', 'remove one of the two entries')]),
    ('pin missing on this host', lambda b, tmp: b.replace('none = true', 'cudnn = "/nonexistent/libcudnn.so.9"'),
     [('libs.x.cudnn', '/nonexistent/libcudnn.so.9 does not exist on this host', 'point cudnn at the real file (try: ldconfig -p | grep libcudnn), or use none = true')]),
    ('pin a text file', lambda b, tmp: b.replace('none = true', 'cudart = "' + str(tmp) + '/text/libcudart.so.13"'),
     [('libs.x.cudart', '{tmp}/text/libcudart.so.13 is not an ELF file: ld.so would skip it and pin nothing', 'point cudart at the real libcudart.so.<N> (try: ldconfig -p | grep libcudart)')]),
    ('search finds nothing', lambda b, tmp: b.replace('none = true', 'search = ["/nonexistent"]'),
     [('libs.x.search', "no libcudart.so.* in ['/nonexistent']", 'add the directory that holds libcudart.so.*, or pin cudart = "/path/libcudart.so.*"'),
      ('libs.x.search', "no libcudnn.so.9 in ['/nonexistent']", 'add the directory that holds libcudnn.so.9, or pin cudnn = "/path/libcudnn.so.9"')]),
    ('python not on this host', lambda b, tmp: b.replace(f'{{ python = "{PY}"', '{ python = "3.99"'),
     [('pairing.include[0].python', "no python 3.99 for gpu-3.99-x: none on PATH, in pyenv's versions, in /usr/bin or among uv's pythons (install it: uv python install 3.99)", 'uv python install 3.99, or drop 3.99 from the matrix')]),
    ('torch environment missing', lambda b, tmp: b.replace('skip = true', 'environment = "/nonexistent/torchenv"'),
     [('torch.none.environment', '/nonexistent/torchenv/lib/python{py}/site-packages does not exist (python {py})', 'point environment at a venv or prefix of the same python version that has torch installed')]),
    ('local ORT wheel missing', lambda b, tmp: b.replace('requirement = "onnxruntime==1.32.0"', 'wheel = "/nonexistent/onnxruntime-1.32.0-py3-none-any.whl"'),
     [('ort.cpu.wheel', '/nonexistent/onnxruntime-1.32.0-py3-none-any.whl does not exist', 'point wheel at a downloaded .whl, or use requirement')]),
    ('wheelhouse not a dir', lambda b, tmp: b.replace('[matrix]\n', '[matrix]\nwheelhouse = ["/nonexistent/wheels"]\n'),
     [('matrix.wheelhouse[0]', '/nonexistent/wheels is not a directory', 'create it, or remove the entry')]),
    ('suite root not a dir', lambda b, tmp: b.replace(f'root = "{ROOT}"', 'root = "/nonexistent/suite"'),
     [('suite.s.root', '/nonexistent/suite is not a directory', 'point root at the directory that holds the tests')]),
    ('suite files glob matches nothing', lambda b, tmp: b.replace('files = ["test_allpass.py"]', 'files = ["test_nope_*.py"]'),
     [('suite.s.files', "'test_nope_*.py' matches nothing under {root}", 'fix the name or glob, relative to root')]),
    ('pythonpath not a dir', lambda b, tmp: b.replace('pythonpath = [".."]', 'pythonpath = ["no-such-dir"]'),
     [('suite.s.pythonpath', '{root}/no-such-dir is not a directory', 'list directories relative to root')]),
    ('unset variable', lambda b, tmp: b.replace(f'root = "{ROOT}"', 'root = "${MATRIX_TEST_UNSET_VAR}/suite"'),
     [('suite.s.root', 'uses ${MATRIX_TEST_UNSET_VAR}, which is not set', 'export MATRIX_TEST_UNSET_VAR=... before running nox')]),
    # tests that belong to a release: [ort.<id>] source and {ort.source} in a suite root
    ('suite refers to an ort source the ort lacks', lambda b, tmp: b.replace(f'root = "{ROOT}"', 'root = "{ort.source}/tests"'),
     [('ort.cpu.source', 'is missing: suite.s.root begins with {ort.source} and pairing.include[0] pairs that suite with ort cpu',
       'add source = "${ORT_SOURCE}" to [ort.cpu] (an ORT checkout: the dir holding VERSION_NUMBER), or pair suite s only with ORT entries that have one')]),
    ('unknown ort placeholder in a root', lambda b, tmp: b.replace(f'root = "{ROOT}"', 'root = "{ort.src}/tests"'),
     [('suite.s.root', 'has the unknown placeholder {ort.src}', "use {ort.source}, the source of the pairing's [ort.<id>], or a path")]),
    ('ort source placeholder inside a root', lambda b, tmp: b.replace(f'root = "{ROOT}"', 'root = "/x/{ort.source}/tests"'),
     [('suite.s.root', 'has {ort.source} after its start: it stands for a whole directory', 'write root = "{ort.source}/onnxruntime/test/python/transformers"')]),
    ('ort source placeholder run on', lambda b, tmp: b.replace(f'root = "{ROOT}"', 'root = "{ort.source}tests"').replace('with = ["onnx==1.20.1"]', 'with = ["onnx==1.20.1"]\nsource = "/x"'),
     [('suite.s.root', 'continues {ort.source} without a /', 'write root = "{ort.source}/onnxruntime/test/python/transformers"')]),
    ('ort source a number', lambda b, tmp: b.replace('with = ["onnx==1.20.1"]', 'with = ["onnx==1.20.1"]\nsource = 1'),
     [('ort.cpu.source', 'is the TOML number 1, not a string', 'quote it: source = "1"')]),
    ('ort source missing on this host', lambda b, tmp: b.replace('with = ["onnx==1.20.1"]', 'with = ["onnx==1.20.1"]\nsource = "/nonexistent/ort"').replace(f'root = "{ROOT}"', 'root = "{ort.source}/tests"'),
     [('ort.cpu.source', '/nonexistent/ort is not a directory', 'point source at the root of an ORT checkout (the dir holding VERSION_NUMBER)')]),
    ('ort source without VERSION_NUMBER', lambda b, tmp: b.replace('with = ["onnx==1.20.1"]', f'with = ["onnx==1.20.1"]\nsource = "{tmp}/text"').replace(f'root = "{ROOT}"', 'root = "{ort.source}/tests"'),
     [('ort.cpu.source', '{tmp}/text holds no VERSION_NUMBER: it is not the root of an ORT checkout', 'point source at the root of an ORT checkout (the dir holding VERSION_NUMBER)')]),
    ('ort source from an unset variable', lambda b, tmp: b.replace('with = ["onnx==1.20.1"]', 'with = ["onnx==1.20.1"]\nsource = "${MATRIX_TEST_UNSET_ORT}"').replace(f'root = "{ROOT}"', 'root = "{ort.source}/tests"'),
     [('ort.cpu.source', 'uses ${MATRIX_TEST_UNSET_ORT}, which is not set: set MATRIX_TEST_UNSET_ORT to an ORT checkout (the dir holding VERSION_NUMBER)', 'export MATRIX_TEST_UNSET_ORT=/path/to/onnxruntime before running nox')]),
    ('root under an unset ORT checkout variable', lambda b, tmp: b.replace(f'root = "{ROOT}"', 'root = "${MATRIX_TEST_UNSET_ORT}/onnxruntime/test/python/transformers"'),
     [('suite.s.root', 'uses ${MATRIX_TEST_UNSET_ORT}, which is not set: set MATRIX_TEST_UNSET_ORT to an ORT checkout (the dir holding VERSION_NUMBER)', 'export MATRIX_TEST_UNSET_ORT=/path/to/onnxruntime before running nox')]),
    ('offline without the ORT wheel', lambda b, tmp: b.replace('[matrix]\n', '[matrix]\noffline = true\nwheelhouse = ["' + str(tmp) + '/emptyhouse"]\n'),
     [('ort.cpu.requirement', 'offline, and no wheel for onnxruntime==1.32.0 in {tmp}/emptyhouse', 'pip download onnxruntime==1.32.0 -d {tmp}/emptyhouse on a machine with network')]),
    ('libs pip and none together', lambda b, tmp: b.replace('none = true', 'none = true\npip = ["nvidia-cudnn-cu13==9.12.0.46"]'),
     [('libs.x', 'needs exactly one of cudart/cudnn, search, pip, none (found pip, none)', 'keep one of: cudart/cudnn, search, pip, none')]),
    ('libs unknown loader', lambda b, tmp: b.replace('none = true', 'none = true\nloader = "dlopen"'),
     [('libs.x.loader', '`dlopen` is not a loader', 'use one of: preload, ort_preload_dlls, torch_first')]),
    ('libs loader misspelt', lambda b, tmp: b.replace('none = true', 'none = true\nloader = "torch-first"'),
     [('libs.x.loader', '`torch-first` is not a loader (did you mean `torch_first`?)', 'write loader = "torch_first"')]),
    ('ort_preload_dlls without pip', lambda b, tmp: b.replace('none = true', 'none = true\nloader = "ort_preload_dlls"'),
     [('libs.x.loader', 'ort_preload_dlls needs a pip set: preload_dlls(directory=...) reads nvidia/*/lib', 'add pip = ["nvidia-cudnn-cu13==..."], or use loader = "preload"')]),
    ('torch_first with pinned files', lambda b, tmp: b.replace('none = true', 'search = ["/opt/x"]\nloader = "torch_first"'),
     [('libs.x.loader', "torch_first pins nothing: torch's own libraries serve ORT", 'write none = true with it, or use loader = "preload"')]),
    ('pip spec not a requirement', lambda b, tmp: b.replace('none = true', 'pip = ["nvidia cudnn 9"]'),
     [('libs.x.pip[0]', 'is not a pip requirement (Expected semicolon (after name with no version specifier) or end)', 'write it as "nvidia-cudnn-cu13==9.12.0.46"')]),
    ("offline without a pip set's wheel", lambda b, tmp: b.replace('[matrix]\n', '[matrix]\noffline = true\nwheelhouse = ["' + str(tmp) + '/emptyhouse"]\n').replace('requirement = "onnxruntime==1.32.0"', 'wheel = "' + str(tmp) + '/emptyhouse/onnxruntime-1.32.0-py3-none-any.whl"').replace('none = true', 'pip = ["nvidia-cudnn-cu13==9.12.0.46"]'),
     [('ort.cpu.wheel', '{tmp}/emptyhouse/onnxruntime-1.32.0-py3-none-any.whl does not exist', 'point wheel at a downloaded .whl, or use requirement'),
      ('libs.x.pip[0]', 'offline, and no wheel for nvidia-cudnn-cu13==9.12.0.46 in {tmp}/emptyhouse', 'pip download nvidia-cudnn-cu13==9.12.0.46 -d {tmp}/emptyhouse on a machine with network')]),
    ('matrix tools not a list', lambda b, tmp: b.replace('[matrix]\n', '[matrix]\ntools = "pytest"\n'),
     [('matrix.tools', "must be a list of strings, found 'pytest'", 'write tools = ["..."]')]),
    ('matrix runner empty', lambda b, tmp: b.replace('[matrix]\n', '[matrix]\nrunner = []\n'),
     [('matrix.runner', 'is empty', 'write runner = "label", or remove it')]),
    ('suite requirements a string', lambda b, tmp: b + 'requirements = "parameterized"\n',
     [('suite.s.requirements', "must be a list of strings, found 'parameterized'", 'write requirements = ["..."]')]),
    ('suite plugins numbers', lambda b, tmp: b + 'plugins = [1]\n',
     [('suite.s.plugins', 'holds the TOML number 1, not a string', 'quote every item: plugins = ["1"]')]),
    ('exclude unknown key', lambda b, tmp: b.replace('[pairing]\n', '[pairing]\nexclude = [{ lib = "x" }]\n'),
     [('pairing.exclude[0].lib', 'unknown key (did you mean `libs`?)', 'rename lib to libs')]),
    ('torch requirement with index_url a number', lambda b, tmp: b.replace('skip = true', 'requirement = "torch==2.11.0"\nindex_url = 1'),
     [('torch.none.index_url', 'is the TOML number 1, not a string', 'quote it: index_url = "1"')]),
    ('expect require_kernel a list', lambda b, tmp: b + '[suite.s.expect.normal]\nrequire_kernel = ["CUDNN_FLASH_ATTENTION"]\n',
     [('suite.s.expect.normal.require_kernel', "must be a string, found ['CUDNN_FLASH_ATTENTION']", 'write require_kernel = "..."')]),
    ('expect_file a number', lambda b, tmp: b + 'expect_file = 1\n',
     [('suite.s.expect_file', 'is the TOML number 1, not a string', 'quote it: expect_file = "1"')]),
    ('expect_file missing', lambda b, tmp: b + 'expect_file = "expect/s.toml"\n',
     [('suite.s.expect_file', '{tmp}/expect/s.toml does not exist', 'write it with `nox -s calibrate -- gpu-{py}-x` (or --write PATH), or remove expect_file')]),
    ('expect_file a directory', lambda b, tmp: ((tmp / "expect" / "s.toml").mkdir(parents=True), b + 'expect_file = "expect/s.toml"\n')[1],
     [('suite.s.expect_file', '{tmp}/expect/s.toml is a directory, not a file', 'point expect_file at the .toml file `nox -s calibrate` wrote')]),
    ('a key set in the matrix and in the expect file', lambda b, tmp: b + _expect(tmp, '[expect.normal]\nmin_passed = 2\n') + '[suite.s.expect.normal]\nmin_passed = 1\n',
     [('suite.s.expect.normal.min_passed', 'is set both here and in {tmp}/expect/s.toml (expect.normal.min_passed)', 'set it in one file only: remove it from [suite.s.expect.normal] here, or from [expect.normal] in {tmp}/expect/s.toml')]),
    ('expect file near-miss key', lambda b, tmp: b + _expect(tmp, '[expect.normal]\nmin_pased = 2\n'),
     [(EXPECT, 'expect.normal.min_pased', 'unknown key (did you mean `min_passed`?)', 'rename min_pased to min_passed')]),
    ('expect file teeth key under normal', lambda b, tmp: b + _expect(tmp, '[expect.normal]\nknown_toothless = []\n'),
     [(EXPECT, 'expect.normal.known_toothless', 'unknown key here: known_toothless is read only by [expect.teeth]', 'move it to [expect.teeth], or use one of: allowed_cpu_ops, allowed_fallbacks, allowed_skips, cuda_ops, cuda_runs, dispatch_tests, forbid_kernels, known_failures, known_flaky, min_passed, require_kernel, tiers')]),
    ('expect file bad regex', lambda b, tmp: b + _expect(tmp, '[expect.teeth]\nknown_failures = [{ test = "x[", reason = "r" }]\n'),
     [(EXPECT, 'expect.teeth.known_failures[0].test', 'is not a valid regex (unterminated character set at position 1)', 'escape special characters such as ( [ + ?')]),
    ('expect file observation without a date', lambda b, tmp: b + _expect(tmp, '[expect.normal]\nknown_failures = [{ test = "x", reason = "r", observed = [{ cell = "c", ort = "1.31.1" }] }]\n'),
     [(EXPECT, 'expect.normal.known_failures[0].observed[0].date', 'is missing', 'add date = "2026-11-30" (the day the run started (UTC), as YYYY-MM-DD)')]),
    ('expect file unknown table', lambda b, tmp: b + _expect(tmp, '[normal]\nmin_passed = 2\n'),
     [(EXPECT, 'normal', 'unknown key', 'remove it, or use one of: expect')]),
    ('expect file unknown mode', lambda b, tmp: b + _expect(tmp, '[expect.fast]\nmin_passed = 2\n'),
     [(EXPECT, 'expect.fast', 'unknown key', 'remove it, or use one of: normal, require_cudnn, teeth')]),
    ('expect file not TOML', lambda b, tmp: b + _expect(tmp, '[expect.normal]\nmin_passed = \n'),
     [(EXPECT, '(syntax)', 'is not valid TOML: Invalid value (at line 2, column 14)', 'fix the TOML syntax at that line')]),
    ('expect file key set twice', lambda b, tmp: b + _expect(tmp, '[expect.normal]\nmin_passed = 2\nmin_passed = 3\n'),
     [(EXPECT, 'expect.normal.min_passed', 'is set twice (lines 2 and 3)', 'keep one of the two lines')]),
    ('expect forbid_kernels a string', lambda b, tmp: b + '[suite.s.expect.require_cudnn]\nforbid_kernels = "MATH"\n',
     [('suite.s.expect.require_cudnn.forbid_kernels', "must be a list of strings, found 'MATH'", 'write forbid_kernels = ["..."]')]),
]

# every way reading the file can fail: (name, write the file at path, key, problem, fix)
FILE_ROWS = [
    ("missing file", lambda p: None, "(file)", "does not exist", "create it, or point MATRIX_TOML at your matrix file"),
    ("a directory", lambda p: p.mkdir(), "(file)", "is a directory, not a file",
     "point MATRIX_TOML at the .toml file itself, e.g. {path}/matrix.toml"),
    ("not UTF-8", lambda p: p.write_bytes(BASE.encode() + b"# caf\xe9\n"), "(file)",
     "is not UTF-8 text (byte 0xe9 on line 23)", "save it as UTF-8, as TOML requires"),
    ("not TOML", lambda p: p.write_text(BASE + "x = \n"), "(syntax)",
     "is not valid TOML: Invalid value (at line 23, column 5)",
     "fix the TOML syntax at that line"),
    ("a key set twice", lambda p: p.write_text(BASE.replace("none = true", "none = true\nnone = true")),
     "libs.x.none", "is set twice (lines 14 and 15)", "keep one of the two lines"),
    ("a table declared twice", lambda p: p.write_text(BASE + '\n[ort.cpu]\nrequirement = "x"\n'),
     "ort.cpu", "[ort.cpu] is declared twice (lines 6 and 24)", "merge the two tables into one"),
]


def _nox(tmp_path, matrix, *args):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "MATRIX_TOML": str(matrix),
           "MATRIX_RESULTS": str(tmp_path / "results"), "MATRIX_VENVS": str(tmp_path / "venvs")}
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), *args], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)


def _nothing_built(tmp_path):
    venvs = tmp_path / "venvs"
    assert not venvs.exists() or [p.name for p in venvs.iterdir()] == [".locks"]
    assert not (tmp_path / "results").exists()


def _fill(text, tmp_path):
    return text.replace("{root}", ROOT).replace("{tmp}", str(tmp_path)).replace("{py}", PY)


def test_the_table_is_large_enough():
    assert len(ROWS) + len(FILE_ROWS) >= 40


@pytest.mark.parametrize("name, edit, expected", ROWS, ids=[r[0] for r in ROWS])
def test_a_bad_matrix_gets_its_exact_message_and_builds_nothing(tmp_path, name, edit, expected):
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "libcudart.so.13").write_text("not a library\n")
    (tmp_path / "emptyhouse").mkdir()
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(edit(BASE, tmp_path))
    listing = _nox(tmp_path, matrix, "-l")
    if listing.returncode == 2:  # structural: nothing is even listed
        out = listing.stdout
    else:  # a host problem: the cell is listed as not runnable, and running it fails before building
        cells = [line.split()[1] for line in listing.stdout.splitlines() if "[cells]" in line]
        assert len(cells) == 1, listing.stdout
        run = _nox(tmp_path, matrix, "-s", cells[0])
        assert run.returncode != 0
        out = run.stdout
    for row in expected:
        file, (key, problem, fix) = (_fill(row[0], tmp_path), row[1:]) if len(row) == 4 else (str(matrix), row)
        line = f"{file}: {_fill(key, tmp_path)}: {_fill(problem, tmp_path)}\n    fix: {_fill(fix, tmp_path)}"
        # the whole line, nothing more after it but nox's own ending
        assert ends_line(out, line), out
    assert out.count("    fix: ") == len(expected), out  # nothing else, nothing twice
    assert "Traceback" not in out
    _nothing_built(tmp_path)


@pytest.mark.parametrize("name, write, key, problem, fix", FILE_ROWS, ids=[r[0] for r in FILE_ROWS])
def test_a_file_that_cannot_be_read_gets_a_message_and_status_2(tmp_path, name, write, key, problem, fix):
    matrix = tmp_path / "matrix.toml"
    write(matrix)
    run = _nox(tmp_path, matrix, "-l")
    assert run.returncode == 2, run.stdout
    assert f"{matrix}: {key}: {problem}\n    fix: {fix.replace('{path}', str(matrix))}\n" in run.stdout, run.stdout
    assert "Traceback" not in run.stdout
    _nothing_built(tmp_path)
