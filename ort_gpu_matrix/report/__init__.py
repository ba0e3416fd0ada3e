"""The sweep report: its data, built from Results alone and a baseline, and every form people read it in.

model.py gathers results (a sweep just run, or result files from CI) into a grid of cells x modes, what
changed, and the gate; states.py says how each stored test is shown, tiertable.py the tiers by test
function, and progress.py the lines of a sweep being watched. render/ holds the forms: terminal, Markdown
and HTML. It comes after drive and compare, whose results and comparisons it shows, and before calibrate,
which shows its runs with the same progress lines.
"""
