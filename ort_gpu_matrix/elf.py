"""Is a file to pin a shared library, and which one: its ELF type and DT_SONAME, read with pyelftools.

ld.so skips an LD_PRELOAD entry it cannot load with a message on stderr and goes on, so a pinned
text file, a static archive or the wrong library would otherwise run green with nothing pinned.
"""
from __future__ import annotations

import re
import sys
from functools import cache
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSegment
from elftools.elf.elffile import ELFFile

# what each pinned name must declare as its soname
SONAMES = {"cudart": re.compile(r"libcudart\.so\.\d+"), "cudnn": re.compile(r"libcudnn\.so\.\d+")}


def soname(path: Path) -> tuple[str | None, str | None]:
    """(the DT_SONAME, None), or (None, why this is no shared library ld.so could preload)."""
    try:
        with path.open("rb") as f:
            if f.read(4) != b"\x7fELF":
                return None, "is not an ELF file"
            f.seek(0)
            elf = ELFFile(f)
            if elf["e_type"] != "ET_DYN":
                return None, f"is an ELF {elf['e_type']}, not a shared library"
            host = _host_machine()
            if host is not None and elf["e_machine"] != host:
                return None, f"is built for {elf['e_machine']}, this host runs {host}"
            for seg in elf.iter_segments():
                if isinstance(seg, DynamicSegment):
                    for tag in seg.iter_tags("DT_SONAME"):
                        return str(tag.soname), None  # type: ignore[attr-defined]
            return None, "is a shared library without a soname"
    except (OSError, ELFError) as exc:
        return None, f"cannot be read as ELF ({exc})"



@cache
def _host_machine() -> str | None:
    """The ELF machine of the interpreter running this: what ld.so here can load."""
    try:
        with open(sys.executable, "rb") as f:
            return str(ELFFile(f)["e_machine"])
    except (OSError, ELFError):
        return None


def fits(name: str, path: Path) -> str | None:
    """None when `path` is a shared library whose soname is one `name` (cudart, cudnn) must have, else why not."""
    found, problem = soname(path)
    if problem:
        return f"{path} {problem}"
    if not SONAMES[name].fullmatch(found or ""):
        return f"{path} is a shared library with soname {found}, not lib{name}.so.<N>"
    return None
