"""Model-checking speed: distinct states per second, and rumur on the same model side by side.

For each preset, the spec with LRU and ticket completions (``spec-lru``) is
explored by the Python checker (``proofs/check.py``) and, in the same run, the same
model written in Murphi (``proofs/murphi/kvoffload_lru.m``) is generated, compiled and
checked by rumur. Both keep one state per class of states equal up to renaming keys and
slots, so the state counts must agree (the run says so if they do not); the time to a
verdict counts rumur's C compilation. rumur runs with exhaustive symmetry reduction
(exact classes, like ours) and with its faster heuristic one (may keep more states).

    python benchmarks/bench_modelcheck.py                    # TINY and SMALL
    python benchmarks/bench_modelcheck.py --presets tiny --threads 1 2

Times depend on the machine and on what else runs; the ratios are measured side by
side in one run. No figure here is a test.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proofs.modelcheck import rumur
from proofs.modelcheck.bounds import PRESETS
from proofs.modelcheck.checks import CHECKS_BY_NAME
from proofs.modelcheck.explorer import explore


def _row(label: str, states: int, seconds: float, extra: str = "") -> str:
    rate = states / seconds if seconds else float("inf")
    return f"  {label:42} {states:>9,} states {seconds:8.2f} s {rate:>10,.0f} states/s  {extra}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=["tiny", "small"], choices=PRESETS)
    parser.add_argument("--threads", nargs="+", type=int, default=[1],
                        help="rumur verifier threads to try (default 1, like ours)")
    parser.add_argument("--arc", action="store_true",
                        help="also time spec-arc at TINY (no rumur model for ARC)")
    args = parser.parse_args()
    have_rumur = shutil.which("rumur") is not None
    if not have_rumur:
        print("rumur is not installed (apt-get install -y rumur): Python figures only")
    for name in args.presets:
        bounds = PRESETS[name]
        print(f"{name.upper()}: {bounds.describe()}; model spec-lru (LRU, ticket "
              "completions)")
        ours = explore(CHECKS_BY_NAME["spec-lru"].setup, bounds)
        print(_row("proofs/check.py (Python BFS, symmetry)", ours.states, ours.seconds,
                   f"{ours.transitions:,} calls, verdict {ours.verdict}"))
        if not have_rumur:
            continue
        for symmetry in ("exhaustive", "heuristic"):
            for threads in args.threads:
                theirs = rumur.check(bounds, symmetry=symmetry, threads=threads)
                label = f"rumur, {symmetry} symmetry, {threads} thread(s)"
                print(_row(label, theirs.states, theirs.seconds,
                           f"(compile {theirs.compile_seconds:.2f} s, run "
                           f"{theirs.run_seconds:.2f} s), verdict {theirs.verdict}"))
                if symmetry == "exhaustive" and theirs.states != ours.states:
                    print(f"  !! state counts differ: ours {ours.states}, rumur "
                          f"{theirs.states}")
                print(f"  {'':42} time to verdict, rumur / ours: "
                      f"{theirs.seconds / ours.seconds:.2f}x (run only: "
                      f"{theirs.run_seconds / ours.seconds:.2f}x)")
    if args.arc:
        arc = explore(CHECKS_BY_NAME["spec-arc"].setup, PRESETS["tiny"])
        print("TINY: spec-arc (ARC, ticket completions)")
        print(_row("proofs/check.py (Python BFS, symmetry)", arc.states, arc.seconds,
                   f"{arc.transitions:,} calls, verdict {arc.verdict}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
