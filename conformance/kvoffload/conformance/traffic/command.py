"""``kvoffload traffic``: request traces through the reference tier (``docs/traffic.md``).

``run`` serves a trace at one capacity and transfer time, tri-state and two-state, and
prints both with the difference; ``capacity`` sweeps the hit rate against capacity;
``latency`` sweeps the tri-state lookup's savings against transfer time. Exit status as
the rest of the command line: 0 done, 2 the run could not be made as asked (a missing or
malformed trace, a bad option), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from kvoffload.spec.errors import BadCapacity

from ..errors import EXIT_INTERRUPTED, EXIT_USAGE
from . import sweep
from .plot import PlotUnavailable
from .progress import Display
from .report import comparison, markdown, plain, run_json
from .simulator import Lookup, Touch, simulate
from .timing import BANDWIDTH_GBPS, BLOCK_BYTES, Timing, TimingError
from .traces import (
    BLOCK_TOKENS,
    BUILTIN,
    Request,
    TraceError,
    distinct_blocks,
    load,
    spread,
)

_SUFFIXES = {"k": 1e3, "m": 1e6, "g": 1e9}


class TrafficUsage(Exception):
    """An option that cannot be simulated (exit 2)."""


def tokens(text: str) -> float | None:
    """A capacity in tokens: ``3e6``, ``3M``, ``100k``, or ``inf`` (None)."""
    word = text.strip().lower()
    if word in ("inf", "infinite"):
        return None
    scale = _SUFFIXES.get(word[-1:], 1.0)
    try:
        value = float(word[:-1] if scale != 1.0 else word) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of tokens: {text!r}") from None
    if not math.isfinite(value) or value < BLOCK_TOKENS:
        raise argparse.ArgumentTypeError(
            f"a capacity must be at least one block ({BLOCK_TOKENS} tokens), got {text!r}")
    return value


def blocks(text: str) -> int:
    """A capacity in blocks: an int >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of blocks: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a capacity must be at least 1 block, got {value}")
    return value


def count(text: str) -> int:
    """A count (requests, bytes): an int >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def milliseconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of ms: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"a transfer time must be >= 0 ms, got {text!r}")
    return value


def add_traffic_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``traffic`` sub-commands and their options."""
    sub = parser.add_subparsers(dest="traffic_command", required=True)
    run = sub.add_parser("run", help="serve a trace at one capacity, tri-state and two-state")
    run.add_argument("trace", nargs="?", default="conversation", help=_TRACE_HELP)
    _capacity_options(run, default_tokens=3e6)
    run.add_argument("--policy", choices=("lru", "arc"), default="lru")
    _timing_options(run)
    _spread_option(run)
    _common_options(run, tables=False)
    cap = sub.add_parser("capacity", help="hit rate against capacity (zero latency)")
    cap.add_argument("traces", nargs="*", default=list(BUILTIN), help=_TRACE_HELP)
    cap.add_argument("--policy", nargs="+", choices=("lru", "arc"), default=["lru", "arc"])
    cap.add_argument("--tokens", nargs="+", type=tokens, default=list(sweep.CAPACITIES),
                     help="capacities in tokens (3e6, 3M, inf; default 1e5 to 5e7 and inf)")
    cap.add_argument("--touch", choices=[t.value for t in Touch], help=_TOUCH_HELP)
    cap.add_argument("--plot", type=Path, metavar="PNG",
                     help="also draw the curves into this PNG (needs the [plot] extra)")
    _common_options(cap)
    lat = sub.add_parser("latency", help="tri-state against two-state over transfer times")
    lat.add_argument("trace", nargs="?", default="conversation", help=_TRACE_HELP)
    _capacity_options(lat, default_tokens=3e6)
    lat.add_argument("--policy", choices=("lru", "arc"), default="lru")
    lat.add_argument("--ms", nargs="+", type=milliseconds, default=list(sweep.LATENCIES),
                     help="per-block store and load times to sweep, ms")
    lat.add_argument("--block-bytes", type=count, default=BLOCK_BYTES)
    _spread_option(lat)
    _common_options(lat)


_TOUCH_HELP = ("when a request touches its blocks: when its transfers end, or at its "
               "arrival (default: done for LRU, arrival for ARC)")
_TRACE_HELP = f"a trace file (Mooncake's format, gzip or plain) or {' / '.join(BUILTIN)}"


def _capacity_options(parser: argparse.ArgumentParser, default_tokens: float) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--capacity-tokens", type=tokens, default=default_tokens,
                       help=f"tier size in tokens ({BLOCK_TOKENS} a block; inf: every "
                       f"block of the trace; default {default_tokens:g})")
    group.add_argument("--capacity-blocks", type=blocks, help="tier size in blocks")


def _timing_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store-ms", type=milliseconds,
                        help="ms to store one block (default: --block-bytes at --bandwidth)")
    parser.add_argument("--load-ms", type=milliseconds,
                        help="ms to load one block (default: --block-bytes at --bandwidth)")
    parser.add_argument("--bandwidth", type=float, default=BANDWIDTH_GBPS,
                        help=f"GB/s both ways (default {BANDWIDTH_GBPS:g})")
    parser.add_argument("--block-bytes", type=count, default=BLOCK_BYTES,
                        help=f"bytes in a block (default {BLOCK_BYTES:,}: LLaMA2-70B, fp16)")
    parser.add_argument("--touch", choices=[t.value for t in Touch], help=_TOUCH_HELP)


def _spread_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spread-ms", type=milliseconds, default=0.0,
                        help="spread the requests that share one arrival time evenly over "
                        "this many ms after it (the conversation trace's times are to the "
                        "second; default 0: simultaneous)")


def _common_options(parser: argparse.ArgumentParser, tables: bool = True) -> None:
    parser.add_argument("--limit", type=count, help="serve only the first N requests")
    if tables:
        parser.add_argument("--markdown", action="store_true", help="tables in Markdown")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures here")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="show progress on stderr (default: only at a terminal)")


def run_traffic_command(args: argparse.Namespace) -> int:
    """Run a ``traffic`` sub-command; the exit status."""
    display = Display(args.progress)
    try:
        handler = _HANDLERS[args.traffic_command]
        text, data = handler(args, display)
        display.done()
        if args.json is not None:
            args.json.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    except (TraceError, TimingError, BadCapacity, TrafficUsage, PlotUnavailable,
            OSError) as error:
        display.done()
        print(f"kvoffload traffic: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        display.done()
        print("kvoffload traffic: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(text)
    return 0


def _load(name: str, args: argparse.Namespace) -> list[Request]:
    requests = load(name, limit=args.limit)
    window = getattr(args, "spread_ms", 0.0)
    return spread(requests, window) if window else requests


def _capacity(args: argparse.Namespace, requests: Sequence[Request]) -> int:
    if args.capacity_blocks is not None:
        return int(args.capacity_blocks)
    return sweep.blocks_of(args.capacity_tokens, requests)


def _timing(args: argparse.Namespace) -> Timing:
    if not math.isfinite(args.bandwidth) or args.bandwidth <= 0:
        raise TrafficUsage(f"--bandwidth must be a number of GB/s > 0, got {args.bandwidth}")
    derived = Timing.from_bandwidth(args.bandwidth, args.bandwidth, args.block_bytes)
    store = derived.store_ms if args.store_ms is None else args.store_ms
    load_ms = derived.load_ms if args.load_ms is None else args.load_ms
    return Timing(store, load_ms, args.block_bytes)


def _run(args: argparse.Namespace, display: Display) -> tuple[str, object]:
    requests = _load(args.trace, args)
    capacity, timing = _capacity(args, requests), _timing(args)
    touch = None if args.touch is None else Touch(args.touch)
    runs = [simulate(requests, capacity, args.policy, lookup, timing, touch=touch,
                     trace=args.trace,
                     progress=display.task(f"{args.trace} {lookup.value}", len(requests)))
            for lookup in (Lookup.TRI_STATE, Lookup.TWO_STATE)]
    text = comparison(runs[0], runs[1])
    if args.spread_ms:
        text = f"arrivals at one time spread over {args.spread_ms:g} ms\n{text}"
    return text, {"spread_ms": args.spread_ms, "runs": [run_json(r) for r in runs]}


def _progress(display: Display, total: int) -> sweep.Progress:
    return lambda label: display.task(label, total)


def _capacity_sweep(args: argparse.Namespace, display: Display) -> tuple[str, object]:
    traces = [(name, _load(name, args)) for name in args.traces]
    total = max(len(r) for _, r in traces)
    touch = None if args.touch is None else Touch(args.touch)
    rows = sweep.capacity_sweep(traces, args.policy, args.tokens, _progress(display, total),
                                touch)
    header, body = sweep.capacity_table(rows)
    if args.plot is not None:
        from .plot import plot_capacity

        plot_capacity(rows, args.plot)
    notes = [f"{name}: {len(r):,} requests, largest {max(len(q.blocks) for q in r)} "
             f"blocks, {distinct_blocks(r):,} distinct blocks" for name, r in traces]
    touches = ", ".join(f"{r.policy.upper()} at {r.touch.value}"
                        for r in {r.policy: r for r in rows[0].runs}.values())
    text = "\n".join([*notes, f"prefix hit rate, blocks (tokens); zero latency; touch: "
                      f"{touches}", "",
                      (markdown if args.markdown else plain)(header, body)])
    return text, {"rows": [{"tokens": row.tokens, "runs": [run_json(r) for r in row.runs]}
                           for row in rows]}


def _latency_sweep(args: argparse.Namespace, display: Display) -> tuple[str, object]:
    requests = _load(args.trace, args)
    capacity = _capacity(args, requests)
    rows = sweep.latency_sweep(args.trace, requests, capacity, args.policy, args.ms,
                               args.block_bytes, _progress(display, len(requests)))
    header, body = sweep.latency_table(rows)
    text = (f"{args.trace}: {len(requests):,} requests, arrivals at one time spread over "
            f"{args.spread_ms:g} ms; {args.policy.upper()}, {capacity:,} blocks "
            f"({capacity * BLOCK_TOKENS:,} tokens); {args.block_bytes:,} bytes/block\n\n"
            + (markdown if args.markdown else plain)(header, body))
    return text, {"rows": [{"ms": r.ms, "tri": run_json(r.tri), "two": run_json(r.two)}
                           for r in rows]}


_HANDLERS: dict[str, Callable[[argparse.Namespace, Display], tuple[str, object]]] = {
    "run": _run, "capacity": _capacity_sweep, "latency": _latency_sweep}
