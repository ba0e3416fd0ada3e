"""How results are shown: the sweep report in the terminal (terminal.py), as Markdown (markdown.py) and as
one HTML file (html.py), as one JUnit XML file for CI's test tabs (junitxml.py), a cell session's table (table.py), a bisect (bisect.py), and a watched sweep's
lines (live.py, in colour as nox decides it: color.py).

The sections every form shares are made once (summary.py, fallbacks.py, cpunodes.py, pollution.py, tiers.py),
so the forms say the same thing; each escapes the untrusted text it shows (test ids, reasons, paths) for its form.
"""
