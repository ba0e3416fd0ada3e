"""The ground floor: what every layer needs and nothing of the matrix, so it imports no other module of ours.

Errors a user can act on (errors.py), untrusted text made safe for where it is shown (escape.py), atomic
writes and private dirs (fs.py), no child process or private dir outliving its run (orphans.py), where the
package's own files are (packaged.py), JSON checked against a dataclass's type hints (typecheck.py) and the one codec every stored record is
written and read through (codec.py), and
the one value that carries a run's output channels from the session down (voice.py).
"""
