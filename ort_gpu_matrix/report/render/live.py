"""Where a watched sweep's lines go: plain lines (CI logs, pipes), or lines above one live line (a terminal).

The live line is rich's progress display, not cursor codes of our own: rich keeps the line below the
printed ones, redraws it, and restores the cursor when it stops (`transient`: the line is gone and
the terminal is as it was, on a Ctrl-C too). Without a terminal (or with TERM=dumb) nothing but
plain lines is written: no cursor movement, no colour unless nox's --forcecolor asks for it. Colour
follows render/color.py (nox's --forcecolor/--nocolor, NO_COLOR, the tty).
"""
from __future__ import annotations

import os
import sys
from typing import IO, Protocol

from .color import verdict as coloured


class Source(Protocol):
    """What the live line shows: progress.SweepProgress."""

    @property
    def total(self) -> int: ...
    def finished(self) -> int: ...
    def left_text(self) -> str: ...
    def now_text(self) -> str: ...


class Display:
    """Plain lines, one per call, flushed: what CI logs and pipes get."""

    def __init__(self, out: IO[str] | None = None, color: bool = False):
        self.out = out or sys.stdout
        self.color = color

    def start(self, source: Source) -> None:
        self.source = source

    def line(self, text: str, verdict: str | None = None) -> None:
        if verdict and self.color:
            text = text.replace(verdict, coloured(verdict, True), 1)
        self.out.write(text + "\n")
        self.out.flush()

    def refresh(self) -> None:
        pass

    def stop(self) -> None:
        pass


class LiveDisplay(Display):
    """Lines printed above one live line: runs done of all, elapsed, time left, what runs now."""

    def __init__(self, out: IO[str] | None = None, color: bool = False):
        super().__init__(out, color)
        from rich.console import Console  # imported when a terminal asks for it: a CI log never needs rich

        self.console = Console(file=self.out, force_terminal=True, no_color=not color, highlight=False,
                               soft_wrap=True, emoji=False, markup=False)
        self.progress: object | None = None

    def start(self, source: Source) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
        from rich.text import Text

        super().start(source)

        class Left(ProgressColumn):
            def render(self, task: object) -> Text:
                return Text(source.left_text())

        class Now(ProgressColumn):
            def render(self, task: object) -> Text:
                now = source.now_text()
                return Text(f"running {now}" if now else "", overflow="ellipsis", no_wrap=True)

        progress = Progress(TextColumn("sweep"), BarColumn(bar_width=20), MofNCompleteColumn(), TextColumn("runs"),
                            TimeElapsedColumn(), Left(), Now(), console=self.console, transient=True,
                            redirect_stdout=False, redirect_stderr=False, refresh_per_second=4)
        self.task = progress.add_task("sweep", total=source.total)
        self.progress = progress
        progress.start()

    def line(self, text: str, verdict: str | None = None) -> None:
        from rich.text import Text

        shown = Text(text)
        if verdict and self.color:
            style = {"PASS": "green", "FAIL": "red"}.get(verdict)
            at = text.find(verdict)
            if style and at >= 0:
                shown.stylize(style, at, at + len(verdict))
        self.console.print(shown)

    def refresh(self) -> None:
        from rich.progress import Progress

        if isinstance(self.progress, Progress):
            self.progress.update(self.task, completed=self.source.finished())
            self.progress.refresh()

    def stop(self) -> None:
        from rich.progress import Progress

        if isinstance(self.progress, Progress):
            self.progress.stop()
            self.progress = None


def for_here(color: bool, out: IO[str] | None = None) -> Display:
    """The live line on a terminal, plain lines anywhere else."""
    out = out or sys.stdout
    live = out.isatty() and os.environ.get("TERM", "") != "dumb"
    return LiveDisplay(out, color) if live else Display(out, color)
