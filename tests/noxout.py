"""What nox prints after a session's error message, so a test can ask for the whole message and nothing more.

nox ends an aborted or failed session's line with a full stop, and when the session took a second or more it puts
`` (took 2 seconds)`` before that full stop. On a loaded CI machine the same session crosses that second one run in
a few, so a test that wants the message to end the line must accept both, and nothing else.
"""

import re

_TAIL = r"(?: \(took [^()\n]+\))?\.?\n"


def ends_line(out: str, text: str) -> bool:
    """True where ``text`` appears in ``out`` followed only by nox's duration and full stop, then a line break."""
    return re.search(re.escape(text) + _TAIL, out) is not None
