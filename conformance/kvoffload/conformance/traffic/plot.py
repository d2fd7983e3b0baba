"""The capacity sweep as a picture (matplotlib, the ``[plot]`` extra; imported only here).

One panel per trace: the prefix hit rate in blocks against the capacity in tokens (log
scale), a curve per policy, the infinite cache as a dashed ceiling, and the readings of
the Mooncake paper's Figure 9 (LRU) as crosses.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .report import hit_rate
from .sweep import CapacityRow

FIGURE_9 = {
    "synthetic": ((1e5, 0.01), (3e6, 0.31), (1e7, 0.58)),
    "conversation": ((1e5, 0.07), (3e6, 0.16), (1e7, 0.33)),
}
"""Readings of the paper's Figure 9 (LRU), capacity in tokens and hit rate (issue 25);
its infinite-cache maxima: synthetic about 0.65, conversation about 0.40."""
FIGURE_9_MAX = {"synthetic": 0.65, "conversation": 0.40}


class PlotUnavailable(Exception):
    """matplotlib is not installed (``pip install 'kvoffload[plot]'``)."""


def plot_capacity(rows: Sequence[CapacityRow], path: Path) -> None:
    """Draw the sweep into ``path`` (PNG).

    raises: PlotUnavailable
    """
    try:
        matplotlib = importlib.import_module("matplotlib")
        matplotlib.use("Agg")
        plt = importlib.import_module("matplotlib.pyplot")
    except ImportError:
        raise PlotUnavailable("--plot needs matplotlib: pip install 'kvoffload[plot]'"
                              ) from None
    finite = [row for row in rows if row.tokens is not None]
    ceiling = [row for row in rows if row.tokens is None]
    traces = list(dict.fromkeys(run.trace for run in rows[0].runs))
    figure, axes = plt.subplots(1, len(traces), figsize=(5.5 * len(traces), 4.2),
                                squeeze=False)
    for axis, trace in zip(axes[0], traces, strict=True):
        for column, run in enumerate(rows[0].runs):
            if run.trace != trace:
                continue
            xs = [row.tokens for row in finite]
            ys = [hit_rate(row.runs[column].counters) for row in finite]
            line = axis.plot(xs, ys, marker="o", label=f"{run.policy.upper()} (kvoffload)")
            if ceiling:
                axis.axhline(hit_rate(ceiling[0].runs[column].counters), linestyle="--",
                             color=line[0].get_color(), linewidth=0.8)
        _paper(axis, trace)
        axis.set_xscale("log")
        axis.set_ylim(0, 1)
        axis.set_xlabel("capacity, tokens")
        axis.set_ylabel("prefix hit rate, blocks")
        axis.set_title(f"Mooncake {trace} trace")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(loc="upper left", fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _paper(axis: Any, trace: str) -> None:
    """The paper's readings on one panel."""
    readings = FIGURE_9.get(trace)
    if readings is None:
        return
    xs, ys = zip(*readings, strict=True)
    axis.plot(xs, ys, "kx", markersize=8, label="paper, Figure 9 (LRU)")
    axis.axhline(FIGURE_9_MAX[trace], color="k", linestyle=":", linewidth=0.8,
                 label="paper, maximum")
