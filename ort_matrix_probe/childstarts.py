"""A child process and the environment it sees: the census's rule for each way a child starts (envreads.py).

A child that inherits the environment can read every variable: a read of everything, "*". One given an
environment of its own holds only what its caller put there, and whatever was taken from os.environ to build
it was read, and counted, as it was taken: `ctypes.util.find_library`, which torch's import calls, runs
`ldconfig -p` so, and counting that as a read of everything made the first module that imports torch rerun
whole. Two ways around that rule are closed here:
- a copy of the environment kept from an earlier test (a helper's `functools.cache`) was counted for that test
  only: an environment that holds at least half of this process's variables, with their values, counts as
  the whole;
- a child that outlives the test that started it (a multiprocessing forkserver, a pool kept in a module global)
  may serve later tests that start no child of their own: it counts for every test (envreads.py, as the test
  ends).

Stdlib only, like the rest of the probe.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

INHERITED = object()  # the child gets this process's environment, whole


def env_of_fork_exec(args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    """fork_exec(args, executable_list, close_fds, pass_fds, cwd, env, ...): env None is this process's."""
    return INHERITED if len(args) <= 5 or args[5] is None else args[5]


def env_of_spawn(args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    """posix_spawn(path, argv, env, ...): subprocess hands os.environ itself over for a child that inherits."""
    env = args[2] if len(args) > 2 else kwargs.get("env")
    return INHERITED if env is os.environ or env is getattr(os, "environb", None) else env


def inherits(args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    """os.system, os.fork, os.forkpty: the child always gets this process's environment."""
    return INHERITED


def _ours() -> set[bytes]:
    """This process's variables as "NAME=value" bytes, read from os.environ's own dict: not through the watch,
    which would count the probe's look as the test's read of everything."""
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict):
        return set()
    return {os.fsencode(k) + b"=" + os.fsencode(v) for k, v in data.items()}


def _bytes(value: object) -> bytes:
    return value if isinstance(value, bytes) else os.fsencode(str(value))


def _entries(env: object) -> list[bytes]:
    """An explicit environment as "NAME=value" bytes: fork_exec's list, or posix_spawn's mapping (str or bytes)."""
    if isinstance(env, Mapping):
        return [_bytes(k) + b"=" + _bytes(v) for k, v in env.items()]
    if isinstance(env, (list, tuple)):
        return [_bytes(e) for e in env]
    return []


def whole(env: object) -> bool:
    """Whether a child with `env` sees this process's environment: it inherits it, or was given (a copy of) most
    of it."""
    if env is INHERITED:
        return True
    ours = _ours()
    if not ours:
        return False
    shared = sum(1 for entry in _entries(env) if entry in ours)
    return shared * 2 >= len(ours)


_TRACKER = b"from multiprocessing.resource_tracker import main"


def serves_tests(args: tuple[Any, ...]) -> bool:
    """Whether a child that outlives its test may run tests' code later. Not multiprocessing's resource tracker
    (started by the first spawn or forkserver child, and kept): it only removes the named semaphores and shared
    memory its clients leave behind. Every other kept child may (a forkserver forks the children of later tests)."""
    argv = args[0] if args and isinstance(args[0], (list, tuple)) else ()
    return not any(_bytes(a).startswith(_TRACKER) for a in argv)


def pid_of(started: object) -> int | None:
    """The child's pid from what a starter returned: fork_exec and fork give it, forkpty gives (pid, fd); 0 is the
    forked child's own side, and os.system returns an exit status, not a pid."""
    if isinstance(started, tuple) and started and isinstance(started[0], int):
        started = started[0]
    return started if isinstance(started, int) and not isinstance(started, bool) and started > 0 else None


def alive(pid: int) -> bool:
    """Whether the child still runs: a zombie (exited, not yet reaped) does not. Read from /proc, never by
    waiting, which would take the exit status from whoever started it."""
    if not os.path.isdir("/proc"):  # no /proc: a signal 0 says whether the pid exists (a zombie counts: alive)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")
