"""Is a file to pin a shared library, and which one: its ELF header, then its DT_SONAME.

ld.so skips an LD_PRELOAD entry it cannot load with a message on stderr and goes on, so a pinned
text file, a static archive or the wrong library would otherwise run green with nothing pinned.

Two depths, for two costs. `header_problem` reads the fixed ELF header (type, machine) with struct:
cheap enough for `nox -l`, which checks every cell. `fits` adds the soname, read with pyelftools
(whose import is not free), and runs only when a cell is about to run, and in the doctor.
"""
from __future__ import annotations

import re
import struct
import sys
from functools import cache
from pathlib import Path

# what each pinned name must declare as its soname
SONAMES = {"cudart": re.compile(r"libcudart\.so\.\d+"), "cudnn": re.compile(r"libcudnn\.so\.\d+")}
_TYPES = {0: "ET_NONE", 1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE"}
_MACHINES = {3: "EM_386", 8: "EM_MIPS", 20: "EM_PPC", 21: "EM_PPC64", 22: "EM_S390", 40: "EM_ARM",
             62: "EM_X86_64", 183: "EM_AARCH64", 243: "EM_RISCV"}


def kind(path: str) -> str | None:
    """"cudart" or "cudnn" by file name (libcudnn_ops.so.9 is neither: only the shims are pinned)."""
    name = Path(path).name
    return next((k for k in SONAMES if name.startswith(f"lib{k}.so")), None)


def _header(path: str | Path) -> tuple[str, str] | None:
    """(e_type, e_machine) names, or None when the file is not ELF."""
    with open(path, "rb") as f:
        head = f.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    order = "<" if head[5] == 1 else ">"
    e_type, e_machine = struct.unpack_from(f"{order}HH", head, 16)
    return _TYPES.get(e_type, f"type {e_type}"), _MACHINES.get(e_machine, f"machine {e_machine}")


@cache
def _host_machine() -> str | None:
    """The ELF machine of the interpreter running this: what ld.so here can load."""
    try:
        found = _header(sys.executable)
    except OSError:
        return None
    return found[1] if found else None


def header_problem(path: Path) -> str | None:
    """Why ld.so could not preload this file (not ELF, not a shared library, another CPU's), or None."""
    try:
        found = _header(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if found is None:
        return "is not an ELF file"
    e_type, machine = found
    if e_type != "ET_DYN":
        return f"is an ELF {e_type}, not a shared library"
    host = _host_machine()
    if host is not None and machine != host:
        return f"is built for {machine}, this host runs {host}"
    return None


def soname(path: Path) -> tuple[str | None, str | None]:
    """(the DT_SONAME, None), or (None, why this is no shared library ld.so could preload)."""
    problem = header_problem(path)
    if problem:
        return None, problem
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSegment
    from elftools.elf.elffile import ELFFile

    try:
        with path.open("rb") as f:
            for seg in ELFFile(f).iter_segments():
                if isinstance(seg, DynamicSegment):
                    for tag in seg.iter_tags("DT_SONAME"):
                        return str(tag.soname), None  # type: ignore[attr-defined]
            return None, "is a shared library without a soname"
    except (OSError, ELFError) as exc:
        return None, f"cannot be read as ELF ({exc})"


def fits(name: str, path: Path) -> str | None:
    """None when `path` is a shared library whose soname is one `name` (cudart, cudnn) must have, else why not."""
    found, problem = soname(path)
    if problem:
        return f"{path} {problem}"
    if not SONAMES[name].fullmatch(found or ""):
        return f"{path} is a shared library with soname {found}, not lib{name}.so.<N>"
    return None
