"""The independent cross-check: the same model written in Murphi, checked by rumur.

``proofs/murphi/kvoffload_lru.m`` is the spec (LRU, ticket completions) written
again by hand for rumur (Debian package ``rumur``). Its keys and slots are scalarsets,
and with ``--symmetry-reduction exhaustive`` rumur keeps exactly one state per class of
states equal up to renaming keys and slots, as :mod:`.symmetry` does: so the two state
counts must be equal, not just close. Compile time is part of rumur's time to a verdict.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .bounds import Bounds

MODEL = Path(__file__).resolve().parent.parent / "murphi" / "kvoffload_lru.m"
CFLAGS = ("-std=gnu11", "-O3", "-mcx16")
"""rumur's documented compiler flags (``-mcx16``: its lock-free queue needs 16-byte CAS)."""


class RumurMissing(RuntimeError):
    """rumur or a C compiler is not installed (``apt-get install -y rumur``)."""


@dataclass(frozen=True)
class RumurResult:
    """rumur's verdict and figures, with the time of each stage."""

    verdict: str
    """``holds`` or ``violated``."""
    error: str
    states: int
    rules_fired: int
    generate_seconds: float
    compile_seconds: float
    run_seconds: float
    output: str

    @property
    def seconds(self) -> float:
        return self.generate_seconds + self.compile_seconds + self.run_seconds


def version() -> str:
    """rumur's version line, e.g. ``Rumur version v2022.08.20-1``."""
    exe = shutil.which("rumur")
    if exe is None:
        raise RumurMissing("rumur is not installed: apt-get install -y rumur")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True)
    return (out.stdout or out.stderr).strip()


def source(bounds: Bounds, mutation: str | None = None, background: bool = False,
           node_failure: bool = False) -> str:
    """The Murphi model with ``bounds`` written into its constants.

    ``background`` switches on the opt-in background eviction (``BACKGROUND``, D14),
    ``node_failure`` the node's failure (``NODE_FAILURE``, D15).

    ``mutation`` names a rule to break, for the runner's own test: ``TouchQueuesStoring``
    lets ``touch`` queue a STORING key, as the Python mutant of that name does.
    """
    if bounds.width != 2:
        raise ValueError("the Murphi model has one- and two-key calls only (width 2)")
    text = MODEL.read_text()
    for name, value in (("CAPACITY", bounds.capacity), ("NKEYS", len(bounds.keys)),
                        ("RESETS", bounds.resets), ("READERS", bounds.readers)):
        text, n = re.subn(rf"^(  {name}: )\d+;", rf"\g<1>{value};", text, count=1,
                          flags=re.MULTILINE)
        if n != 1:
            raise ValueError(f"constant {name} not found in {MODEL}")
    for name, on in (("BACKGROUND", background), ("NODE_FAILURE", node_failure)):
        text, n = re.subn(rf"^(  {name}: )\w+;", rf"\g<1>{str(on).lower()};", text,
                          count=1, flags=re.MULTILINE)
        if n != 1:
            raise ValueError(f"constant {name} not found in {MODEL}")
    if mutation == "TouchQueuesStoring":
        text, n = re.subn(r"if blocks\[k\]\.pos != 0 then queue_append\(k\); endif;",
                          "if blocks[k].phase != ABSENT then queue_append(k); endif;", text)
        if n != 1:
            raise ValueError("the touch procedure was not found")
    elif mutation is not None:
        raise ValueError(f"unknown mutation {mutation!r}")
    return text


def compile_verifier(cc: str, cflags: Sequence[str], folder: Path) -> None:
    """``cc CFLAGS -o model model.c -lpthread`` in ``folder``: rumur's generated C
    built into the verifier, ``folder/model``."""
    subprocess.run([cc, *cflags, "-o", "model", "model.c", "-lpthread"], cwd=folder,
                   check=True, capture_output=True, text=True)


Build = Callable[[str, Sequence[str], Path], None]
"""How :func:`check` makes ``model`` from ``model.c`` in a folder (``cc``, ``cflags``,
the folder): :func:`compile_verifier`, or a function that leaves the same program there
(the tests keep one build per generated source, tests/proofs/conftest.py)."""


def check(bounds: Bounds, *, symmetry: str = "exhaustive", threads: int = 1,
          mutation: str | None = None, workdir: Path | None = None,
          background: bool = False, node_failure: bool = False,
          cflags: Sequence[str] = CFLAGS, build: Build = compile_verifier) -> RumurResult:
    """Generate, compile (with ``cflags``, by ``build``) and run the verifier for
    ``bounds``; parse its verdict. The verdict and the state count do not depend on
    ``cflags``; the time to them does (TINY's verifier: about 2.7 s of CPU to compile at
    -O3, 0.7 s at -O0, and it runs in a tenth of a second either way). rumur and the
    compiler run in the work folder on relative names, so the generated C (whose checks
    name the model's file in their messages) is the same in every folder."""
    exe, cc = shutil.which("rumur"), shutil.which("cc") or shutil.which("gcc")
    if exe is None or cc is None:
        raise RumurMissing("rumur and a C compiler are needed: apt-get install -y rumur gcc")
    with tempfile.TemporaryDirectory(prefix="kvoffload-rumur-") as tmp:
        where = workdir or Path(tmp)
        (where / "model.m").write_text(source(bounds, mutation, background, node_failure))
        t0 = time.perf_counter()
        subprocess.run([exe, f"--symmetry-reduction={symmetry}", "--deadlock-detection=off",
                        f"--threads={threads}", "--counterexample-trace=full",
                        "model.m", "--output", "model.c"],
                       cwd=where, check=True, capture_output=True, text=True)
        t1 = time.perf_counter()
        build(cc, cflags, where)
        t2 = time.perf_counter()
        run = subprocess.run([str(where / "model")], capture_output=True, text=True,
                             check=False)
        t3 = time.perf_counter()
    return parse(run.stdout + run.stderr, t1 - t0, t2 - t1, t3 - t2)


def parse(output: str, generate: float = 0.0, compile_: float = 0.0, run: float = 0.0
          ) -> RumurResult:
    """Read the verdict, the first error and the state count from a verifier's output."""
    explored = re.search(r"(\d+) states, (\d+) rules fired", output)
    if explored is None:
        raise ValueError(f"no state count in rumur's output:\n{output[-2000:]}")
    if "No error found." in output:
        verdict, error = "holds", ""
    elif re.search(r"\d+ error\(s\) found", output):
        found = re.search(r"The following is the error trace for the error:\s*\n\s*(.+)",
                          output)
        verdict, error = "violated", found.group(1).strip() if found else "unknown error"
    else:
        raise ValueError(f"no verdict in rumur's output:\n{output[-2000:]}")
    return RumurResult(verdict, error, int(explored.group(1)), int(explored.group(2)),
                       generate, compile_, run, output)


def trace_rules(output: str) -> list[str]:
    """The rules of a counterexample trace, in order (the start state not counted)."""
    pattern = r'^Rule "([^"]+)"(?:, ([^\n]*))? fired\.'
    return [f"{rule} [{args}]" if args else rule
            for rule, args in re.findall(pattern, output, flags=re.MULTILINE)]
