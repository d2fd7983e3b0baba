"""Regenerate the lifecycle diagram and the operation x phase table from the spec.

Run from the repository root:

    python -m docs.tools.lifecycle_diagram           # docs/lifecycle.dot, docs/op-phase-table.md
    python -m docs.tools.lifecycle_diagram --render  # also lifecycle.svg, .png (Graphviz `dot`)
    python -m docs.tools.lifecycle_diagram --check   # exit 1 if the committed files are stale

Both files are projections of a bounded exploration of :mod:`kvoffload.spec` (see
:mod:`.lifecycle_projection`), so they follow the spec: change a transition and they change.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from kvoffload.spec import Policy

from .lifecycle_projection import Bounds, distinct_effects, explore
from .lifecycle_render import Exploration, render_dot, render_table

DOCS = Path(__file__).resolve().parents[1]
DOT_FILE = DOCS / "lifecycle.dot"
TABLE_FILE = DOCS / "op-phase-table.md"
COMMAND = "python -m docs.tools.lifecycle_diagram"

MAIN = Bounds()
"""The default policy (LRU), with a reset and two readers: every phase and copy is reached."""
EXTRA = Bounds(resets=0, policy=Policy.ARC)
"""ARC, smaller: its ghost lists make the space grow fast; it adds what touch does under ARC."""


def run(bounds: Bounds) -> Exploration:
    """Explore the spec within ``bounds`` and project every step onto the keys.

    The pages are drawn from the distinct effects only (their edges and cells are sets):
    the 32,466 effects of the two explorations are 160 distinct ones."""
    states, steps = explore(bounds)
    return Exploration(bounds, len(states), len(steps), distinct_effects(steps, bounds.keys))


def generate(main: Bounds = MAIN, extra: Bounds = EXTRA) -> dict[Path, str]:
    """The text of every generated file, computed from the spec now."""
    runs = run(main), run(extra)
    caption = ("The lifecycle of one key, projected from the transitions of kvoffload.spec\\n"
               f"explored: {main.describe()};\\n{extra.describe()}")
    effects = [e for r in runs for e in r.effects]
    return {DOT_FILE: render_dot(effects, caption, COMMAND),
            TABLE_FILE: render_table(*runs, COMMAND)}


def render_pictures(dot_file: Path) -> list[Path]:
    """Render ``dot_file`` to SVG and PNG beside it with Graphviz's ``dot``."""
    dot = shutil.which("dot")
    if dot is None:
        raise SystemExit("Graphviz `dot` not found: apt-get install -y graphviz")
    pictures = []
    for fmt, extra in (("svg", []), ("png", ["-Gdpi=110"])):
        target = dot_file.with_suffix(f".{fmt}")
        subprocess.run([dot, f"-T{fmt}", *extra, str(dot_file), "-o", str(target)], check=True)
        pictures.append(target)
    return pictures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="compare with the committed files instead of writing them")
    mode.add_argument("--render", action="store_true",
                      help="also render lifecycle.svg and lifecycle.png with Graphviz")
    args = parser.parse_args(argv)
    files = generate()
    if args.check:
        stale = [path for path, text in files.items()
                 if not path.exists() or path.read_text(encoding="utf-8") != text]
        for path in stale:
            print(f"stale: {path.relative_to(DOCS.parent)} (run {COMMAND})", file=sys.stderr)
        return 1 if stale else 0
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(DOCS.parent)}")
    if args.render:
        for picture in render_pictures(DOT_FILE):
            print(f"wrote {picture.relative_to(DOCS.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
