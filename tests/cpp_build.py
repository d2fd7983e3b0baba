"""One C or C++ build per set of inputs, kept between test sessions.

The C++ replayer and host (corpus/replayer/) take 5 to 7 s of CPU to compile, most of
it nlohmann/json's templates, and each test session compiled them again although
nothing had changed; so did rumur's generated verifiers (about 0.9 s each at -O0,
tests/proofs/conftest.py) and the hosts' launcher (host_launcher.c). A build is kept in
the suite's cache (``$KVOFFLOAD_CACHE``, else ``~/.cache/kvoffload``, where the vLLM
wheels are kept too) under a key made of everything that decides its output: the
compiler's ``--version``, the command line, the source and the files it includes (the
headers named, and every file it includes in quotes, found on its own). A
change to any of them builds anew, so a build that would now fail (``-Wall -Werror``
included) still fails; ``KVOFFLOAD_NO_BUILD_CACHE=1`` turns the cache off (each build
is then made anew, in a folder removed when the process exits). A machine with an empty
cache (a fresh CI runner) pays every build once, in its first session.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kvoffload.conformance.target.vllm_wheels import cache_dir

QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def quoted_includes(source: Path) -> list[Path]:
    """The files ``source`` includes in quotes (``#include "toy.hpp"``, found beside the
    file that names them), and the files those include, each once, in the order met."""
    found: list[Path] = []
    todo = [source]
    while todo:
        including = todo.pop(0)
        for name in QUOTED_INCLUDE.findall(including.read_text(encoding="utf-8")):
            path = (including.parent / name).resolve()
            if path not in found and path.is_file():
                found.append(path)
                todo.append(path)
    return found


def build_key(compiler: str, flags: Sequence[str], source: Path, *inputs: Path,
              libraries: Sequence[str] = ()) -> str:
    """The hash of every input of a build: the compiler's ``--version``, the flags
    (and the libraries linked, if any), the source and the other files it reads: the
    ``inputs`` named and the files it includes in quotes (a change to any gives another
    key)."""
    inputs = (*inputs, *quoted_includes(source))
    digest = hashlib.sha256()
    version = subprocess.run([compiler, "--version"], check=True, capture_output=True,
                             text=True).stdout
    command = "\0".join(flags) + ("\0\0" + "\0".join(libraries) if libraries else "")
    for part in (version, command, *(p.read_text(encoding="utf-8") for p in (source, *inputs))):
        digest.update(part.encode())
        digest.update(b"\0\0")
    return digest.hexdigest()[:32]


def kept_build(compiler: str, flags: Sequence[str], source: Path, *inputs: Path,
               libraries: Sequence[str] = (), folder: str = "c-builds") -> Path:
    """``COMPILER FLAGS -o NAME SOURCE LIBRARIES``, built once per :func:`build_key`
    (``inputs``: the files ``source`` includes) and kept in the cache's ``folder``: the
    kept build's path, to run or copy, never to write (``NAME``: the source's stem)."""
    if os.environ.get("KVOFFLOAD_NO_BUILD_CACHE") == "1":
        scratch = tempfile.mkdtemp(prefix="kvoffload-build-")
        atexit.register(shutil.rmtree, scratch, True)
        made = Path(scratch) / source.stem
        subprocess.run([compiler, *flags, "-o", str(made), str(source), *libraries],
                       check=True, capture_output=True, text=True)
        return made
    key = build_key(compiler, flags, source, *inputs, libraries=libraries)
    kept = cache_dir() / folder / key / source.stem
    if not kept.is_file():
        kept.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=kept.parent) as scratch:
            made = Path(scratch) / source.stem
            subprocess.run([compiler, *flags, "-o", str(made), str(source), *libraries],
                           check=True, capture_output=True, text=True)
            os.replace(made, kept)  # atomic: a concurrent session sees all of it or none
    return kept


def cached_build(flags: Sequence[str], source: Path, header: Path, target: Path) -> Path:
    """``g++ FLAGS -o TARGET SOURCE``, or a copy of the same build made before."""
    shutil.copy2(kept_build("g++", flags, source, header, folder="cpp-builds"), target)
    return target
