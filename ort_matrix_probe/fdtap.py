"""Read what native code prints on fd 1 (or fd 2) while ORT works, and give it back.

ORT prints `SdpaKernel=<TIER>` from C++ straight to fd 1, below Python's
sys.stdout and below pytest's capture, so the only place to see it is fd 1
itself. The tap swaps a pipe in for fd 1 while a run is in progress, then
writes every byte back to whatever fd 1 was (pytest's capture, or a test's own
dup2 capture), so the tests see exactly what they would have seen alone.
The same tap on fd 2 around a session's creation reads ORT's log of a CUDA EP
that would not load (epcensus.py).
"""
from __future__ import annotations

import ctypes
import os
import re
import sys
import threading
from collections.abc import Callable

_TOKEN = re.compile(rb"SdpaKernel=([A-Z0-9_]+)")  # any tier name ORT prints (XQA, ...): the list is open
_ANSI = re.compile(rb"\x1b\[[0-9;]*[A-Za-z]")


def tiers_in(data: bytes) -> list[str]:
    """Every tier token in order; colour codes stripped. The AttentionKernelOptions line has none."""
    return [t.decode() for t in _TOKEN.findall(_ANSI.sub(b"", data))]


_LIBC: list[object] = []  # the process's own C library, opened once (each tap flushes it twice)


def _flush_native() -> None:
    try:
        if not _LIBC:
            _LIBC.append(ctypes.CDLL(None))
        _LIBC[0].fflush(None)  # type: ignore[attr-defined]
    except (OSError, AttributeError):
        pass


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks: list[bytes] = []
    while True:
        block = os.read(fd, 1 << 20)
        if not block:
            return b"".join(chunks)
        chunks.append(block)


class FdTap:
    """One shared redirection of a native fd (1 unless told) for overlapping calls, reference counted.

    The first run in opens it and the last one out restores fd 1, hands the
    bytes to `sink` and writes them back. Only open and close take the lock,
    so concurrent run() calls stay concurrent. `sink` also learns whether any
    run in that window was a session that asked for the CUDA EP: bytes printed
    while only CPU sessions ran cannot be a CUDA kernel's dispatch line.

    The bytes go to an anonymous in-memory file (memfd_create) where the OS has
    one: no thread to start and join per window on the hot path, a run. Else
    to a pipe drained by a reader thread, so that a large print never blocks.
    A `tee` tap (the EP census's, of fd 2 around a session's creation) always
    uses the pipe, and its reader writes each chunk through as it arrives: ORT's
    last lines before a crash in the CUDA EP's creation still reach the log.
    """

    def __init__(self, sink: Callable[[bytes, bool], None], fd: int = 1, tee: bool = False) -> None:
        self._sink = sink
        self._fd = fd
        self._tee = tee  # write each chunk through as it comes: what a crash inside the window printed survives
        self._lock = threading.Lock()
        self._depth = 0
        self._cuda = False
        self._saved = -1
        self._reader: threading.Thread | None = None
        self._chunks: list[bytes] = []
        self._memfd = -1  # the window's in-memory file, where memfd_create exists

    @staticmethod
    def _drain(fd: int, chunks: list[bytes], through: int) -> None:
        while True:
            block = os.read(fd, 65536)
            if not block:
                break
            chunks.append(block)
            view = memoryview(block)
            while through >= 0 and view:
                view = view[os.write(through, view):]
        os.close(fd)

    def enter(self, cuda: bool) -> None:
        with self._lock:
            if self._depth == 0:
                self._cuda = False
                try:
                    (sys.stdout if self._fd == 1 else sys.stderr).flush()
                except (AttributeError, OSError, ValueError):  # a test's own stand-in stream, or a closed one
                    pass
                _flush_native()
                self._saved = os.dup(self._fd)
                if hasattr(os, "memfd_create") and not self._tee:
                    self._memfd = os.memfd_create(f"ort-matrix-fd{self._fd}", os.MFD_CLOEXEC)
                    os.dup2(self._memfd, self._fd)
                else:
                    r, w = os.pipe()
                    os.dup2(w, self._fd)
                    os.close(w)
                    self._chunks = []
                    through = self._saved if self._tee else -1
                    self._reader = threading.Thread(target=self._drain, args=(r, self._chunks, through), daemon=True)
                    self._reader.start()
            self._depth += 1
            self._cuda = self._cuda or cuda

    def exit(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth:
                return
            _flush_native()
            os.dup2(self._saved, self._fd)  # the pipe's last write end closes: its reader sees the end
            if self._memfd >= 0:
                data = _read_all(self._memfd)
                os.close(self._memfd)
                self._memfd = -1
            else:
                assert self._reader is not None
                self._reader.join()  # before _saved closes: a tee writes through it
                data = b"".join(self._chunks)
            os.close(self._saved)
            self._sink(data, self._cuda)
            view = memoryview(b"" if self._tee else data)  # a tee wrote every byte through already
            while view:
                view = view[os.write(self._fd, view):]

    def around(self, method: Callable[..., object], asks_cuda: Callable[[object], bool]) -> Callable[..., object]:
        """`method` (a session's run), run with fd 1 tapped; `asks_cuda(session)` says if it asked for CUDA."""
        def tapped(*args: object, **kwargs: object) -> object:
            self.enter(bool(args) and asks_cuda(args[0]))
            try:
                return method(*args, **kwargs)
            finally:
                self.exit()

        return tapped
