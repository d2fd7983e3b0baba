"""One g++ build per set of inputs, kept between test sessions.

The C++ replayer and host (corpus/replayer/) take 5 to 7 s of CPU to compile, most of
it nlohmann/json's templates, and each test session compiled them again although
nothing had changed. A build is kept in the suite's cache (``$KVOFFLOAD_CACHE``, else
``~/.cache/kvoffload``, where the vLLM wheels are kept too) under a key made of
everything that decides its output: the compiler's ``--version``, the command line, the
source and the JSON header. A change to any of them builds anew, so a build that would
now fail (``-Wall -Werror`` included) still fails; ``KVOFFLOAD_NO_BUILD_CACHE=1``
turns the cache off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kvoffload.conformance.target.vllm_wheels import cache_dir


def build_key(compiler: str, flags: Sequence[str], source: Path, header: Path) -> str:
    """The hash of every input of a build (a change to any gives another key)."""
    digest = hashlib.sha256()
    version = subprocess.run([compiler, "--version"], check=True, capture_output=True,
                             text=True).stdout
    for part in (version, "\0".join(flags), source.read_text(encoding="utf-8"),
                 header.read_text(encoding="utf-8")):
        digest.update(part.encode())
        digest.update(b"\0\0")
    return digest.hexdigest()[:32]


def cached_build(flags: Sequence[str], source: Path, header: Path, target: Path) -> Path:
    """``g++ FLAGS -o TARGET SOURCE``, or a copy of the same build made before."""
    command = ["g++", *flags]
    if os.environ.get("KVOFFLOAD_NO_BUILD_CACHE") == "1":
        subprocess.run([*command, "-o", str(target), str(source)], check=True,
                       capture_output=True, text=True)
        return target
    kept = cache_dir() / "cpp-builds" / build_key("g++", flags, source, header) / source.stem
    if not kept.is_file():
        kept.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=kept.parent) as scratch:
            made = Path(scratch) / source.stem
            subprocess.run([*command, "-o", str(made), str(source)], check=True,
                           capture_output=True, text=True)
            os.replace(made, kept)  # atomic: a concurrent session sees all of it or none
    shutil.copy2(kept, target)
    return target
