"""What ``kvoffload traffic`` prints and writes: one run's figures, a tri-state run beside
its two-state twin (what the pre-PR-#41795 engine would have done instead), the sweeps'
tables (plain text or Markdown) and JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from .simulator import Counters, Run
from .traces import BLOCK_TOKENS


def ratio(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def hit_rate(counters: Counters) -> float:
    """The prefix hit rate in blocks: leading blocks loaded over blocks named."""
    return ratio(counters.hit_blocks, counters.blocks)


def token_hit_rate(counters: Counters) -> float:
    return ratio(counters.hit_tokens, counters.tokens)


def describe(run: Run) -> str:
    """The run's configuration in two lines."""
    c = run.counters
    return (f"trace {run.trace}: {c.requests:,} requests, {c.blocks:,} block references, "
            f"{c.tokens:,} tokens\n"
            f"tier: {run.policy.upper()}, {run.capacity:,} blocks "
            f"({run.capacity * BLOCK_TOKENS:,} tokens), touch at {run.touch.value}; "
            f"{run.timing.describe()}")


_ROWS: tuple[tuple[str, str], ...] = (
    ("prefix hit rate, blocks", "rate"),
    ("prefix hit rate, tokens", "token_rate"),
    ("blocks loaded (prefix hits)", "hit_blocks"),
    ("requests that met a block in flight", "met_in_flight_requests"),
    ("leading blocks found in flight", "met_in_flight_blocks"),
    ("waits for a store (tri-state)", "waits"),
    ("time waited, s", "wait_s"),
    ("blocks computed", "computed_blocks"),
    ("tokens computed", "computed_tokens"),
    ("blocks computed again (in flight)", "recomputed_blocks"),
    ("tokens computed again", "recomputed_tokens"),
    ("duplicate stores, blocks", "duplicate_stores"),
    ("bytes written twice", "bytes_twice"),
    ("blocks stored", "stored_blocks"),
    ("bytes written", "bytes_written"),
    ("store calls rejected", "rejections"),
    ("blocks not stored (rejected)", "rejected_blocks"),
    ("evictions", "evictions"),
)


def figures(run: Run) -> dict[str, float]:
    """Every figure of a run by name (the counters, rates and byte counts)."""
    c = run.counters
    found: dict[str, float] = dict(asdict(c))
    found.update(rate=hit_rate(c), token_rate=token_hit_rate(c), wait_s=c.wait_ms / 1e3,
                 bytes_twice=c.duplicate_stores * run.timing.block_bytes,
                 bytes_written=c.stored_blocks * run.timing.block_bytes)
    return found


def cell(value: float) -> str:
    """A figure as printed: ints with thousands separators, small floats to 4 places."""
    if isinstance(value, float) and not value.is_integer():
        if abs(value) < 10:
            return f"{value:.4f}" if round(value, 4) else "0"
        return f"{value:,.1f}"
    return f"{int(value):,}"


def comparison(tri: Run, two: Run) -> str:
    """A tri-state run and its two-state twin side by side, and the difference."""
    left, right = figures(tri), figures(two)
    lines = [describe(tri), "",
             f"{'':38} {'tri-state':>20} {'two-state':>20} {'two - tri':>20}"]
    for label, name in _ROWS:
        a, b = left[name], right[name]
        lines.append(f"{label:38} {cell(a):>20} {cell(b):>20} {cell(b - a):>20}")
    lines += ["", summary(tri, two)]
    return "\n".join(lines)


def summary(tri: Run, two: Run) -> str:
    """One paragraph: what the two-state engine did instead of the tri-state one."""
    left, right = figures(tri), figures(two)
    return (f"With the pre-PR-#41795 lookup (in flight reads as absent) the engine would "
            f"have computed {cell(right['computed_blocks'] - left['computed_blocks'])} "
            f"more blocks ({cell(right['computed_tokens'] - left['computed_tokens'])} "
            f"tokens), {cell(right['recomputed_blocks'])} of them while their store was "
            f"in flight, and offered {cell(right['duplicate_stores'])} blocks to be "
            f"stored a second time ({cell(right['bytes_twice'])} bytes written twice by "
            f"a tier that also reads in flight as absent); the tri-state engine waited "
            f"{cell(left['waits'])} times, {left['wait_s']:.3f} s in all.")


def run_json(run: Run) -> dict[str, object]:
    """A run as JSON: its configuration and every figure."""
    return {"trace": run.trace, "policy": run.policy, "capacity_blocks": run.capacity,
            "capacity_tokens": run.capacity * BLOCK_TOKENS, "lookup": run.lookup.value,
            "touch": run.touch.value, "timing": asdict(run.timing),
            "figures": figures(run)}


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def plain(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """The same table in aligned columns."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(str(cell).rjust(w) for cell, w in zip(row, widths, strict=True))
                     for row in [header, *rows])
