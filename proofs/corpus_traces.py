"""Write the model checker's traces for the trace corpus (``docs/corpus.md``).

    python proofs/corpus_traces.py            # rewrites corpus_modelcheck.json
    python proofs/corpus_traces.py --check    # exit 1 if the committed file is stale

The conformance suite must not import ``proofs/`` (it is not installed), so the traces
the model checker finds are written once, here, to
``conformance/kvoffload/conformance/corpus/corpus_modelcheck.json``, and
``kvoffload corpus write`` reads them from there and computes every expected answer
with the spec. The file holds calls only, never answers:

- ``tiny``: every trace of up to ``MAX_CALLS`` calls at TINY, deduplicated up to renaming
  of keys and slots the way the model checker deduplicates: a breadth-first search keeps
  one real node per canonical form (``symmetry.canonical``: keys, slots and tickets
  renamed), and a case is a shortest trace to a node found within ``MAX_CALLS - 1``
  calls followed by one call the environment makes there (itself one per class of calls
  equivalent under the node's symmetries). Three searches: LRU with ticket completions,
  LRU with vLLM's completions (duplicate and late reports included, no assumption), ARC
  with ticket completions. Stored as a tree: ``nodes`` (``[parent, call]``, node 0 the
  initial one) and ``cases`` (``[node, call]``).
- ``counterexamples``: the shortest trace of every check that must find a violation
  (``python proofs/check.py --list``: the ``mutant:*`` and ``hazard:*`` checks and the
  vLLM-form hazards of ``spec-vllm-form*``), at TINY.
- ``kills``: for seeded ARC variants of ``kvoffload check --self-test`` that random
  traces do not reach, the first call on which the variant and the spec differ in a
  bounded refinement at TINY (shortest, breadth-first).

A call is ``[op, keys, success, ticket]`` (``ticket`` null in vLLM's form).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Hashable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "conformance" / "kvoffload" / "conformance" / "corpus" / "corpus_modelcheck.json"
MAX_CALLS = 6
KILLED_BY_REFINEMENT = ("ArcRejectsWithEvictable", "ArcNoAdaptation", "ArcGhostHitToT1")


def _call(call: Any) -> list[Any]:
    return [call.op.value, list(call.keys), call.success, call.ticket]


def tiny_tree(form_name: str, policy_name: str) -> dict[str, Any]:
    """Every shortest trace of up to MAX_CALLS calls at TINY, one per node class x call."""
    from kvoffload.spec import Policy
    from proofs.modelcheck.bounds import TINY
    from proofs.modelcheck.environment import Environment
    from proofs.modelcheck.explorer import Search, initial_node
    from proofs.modelcheck.model import SPEC
    from proofs.modelcheck.node import Action, Form, Node
    from proofs.modelcheck.symmetry import canonical

    policy = Policy(policy_name)
    env = Environment(SPEC, TINY, Form(form_name))

    def canon(node: Node) -> tuple[Hashable, object]:
        return canonical(node, TINY.keys)

    search: Search[Node, Action] = Search(initial_node(TINY, policy), canon)
    nodes: list[list[Any]] = [[-1, None]]
    cases: list[list[Any]] = []
    for node, i, info in search.frontier():
        depth = search.depth_of[i]
        if depth >= MAX_CALLS:
            break
        classes = info if isinstance(info, tuple) else None
        made: set[object] = set()
        for action in env.actions(node, classes):
            # Where a running copy uses a slot the state counts as free (vLLM's form after
            # a stale completion), the environment tries each free slot for a store; the
            # corpus leaves the slot to the target, so one call stands for every choice.
            if action.call in made:
                continue
            made.add(action.call)
            cases.append([i, _call(action.call)])
            new = env.step(node, action).node
            if new is None or new is node or depth + 1 >= MAX_CALLS:
                continue
            _, fresh = search.reach(i, action, new)
            if fresh:
                nodes.append([i, _call(action.call)])
    return {"form": form_name, "policy": policy_name, "capacity": TINY.capacity,
            "nodes": nodes, "cases": cases}


def counterexamples() -> list[dict[str, Any]]:
    from proofs.modelcheck.bounds import TINY
    from proofs.modelcheck.checks import CHECKS
    from proofs.modelcheck.explorer import explore

    found = []
    for check in CHECKS:
        if check.expect != "violated":
            continue
        result = explore(check.setup, TINY)
        if result.violation is None:
            raise RuntimeError(f"{check.name} found no violation at TINY")
        found.append({"check": check.name, "about": check.about,
                      "property": result.violation.prop,
                      "policy": check.setup.policy.value, "capacity": TINY.capacity,
                      "calls": [_call(a.call) for a in result.violation.trace]})
    return found


def kills() -> list[dict[str, Any]]:
    from kvoffload.conformance.selftest import mutants
    from kvoffload.spec import Policy
    from proofs.modelcheck.bounds import TINY
    from proofs.modelcheck.node import Form
    from proofs.modelcheck.refinement import NativeManager, refine

    found = []
    for name in KILLED_BY_REFINEMENT:
        cls = getattr(mutants, name)

        def factory(capacity: int, policy: Policy, cls: Any = cls) -> NativeManager:
            manager: NativeManager = cls(capacity, policy.value)
            return manager

        result = refine(TINY, Policy.ARC, Form.TICKET, factory)
        if result.divergence is None:
            raise RuntimeError(f"{name} answers as the spec on every call at TINY")
        found.append({"variant": name, "policy": "arc", "capacity": TINY.capacity,
                      "problem": result.divergence.problem,
                      "calls": [_call(a.call) for a in result.divergence.trace]})
    return found


def generate() -> dict[str, Any]:
    start = time.perf_counter()
    data: dict[str, Any] = {
        "generated_by": "python proofs/corpus_traces.py", "bound": "TINY",
        "max_calls": MAX_CALLS,
        "tiny": {name: tiny_tree(form, policy) for name, form, policy in
                 (("lru-ticket", "ticket", "lru"), ("lru-vllm", "vllm", "lru"),
                  ("arc-ticket", "ticket", "arc"))},
        "counterexamples": counterexamples(),
        "kills": kills(),
    }
    print(f"generated in {time.perf_counter() - start:.1f} s: "
          + ", ".join(f"{k} {len(v['cases'])} cases" for k, v in data["tiny"].items())
          + f", {len(data['counterexamples'])} counterexamples, {len(data['kills'])} kills",
          file=sys.stderr)
    return data


def render(data: dict[str, Any]) -> str:
    """One line per node, case and trace: small diffs when the model checker changes."""
    lines = ["{", f' "generated_by": {json.dumps(data["generated_by"])},',
             f' "bound": {json.dumps(data["bound"])},', f' "max_calls": {data["max_calls"]},',
             ' "tiny": {']
    sets = list(data["tiny"].items())
    for n, (name, tree) in enumerate(sets):
        lines.append(f'  {json.dumps(name)}: {{"form": {json.dumps(tree["form"])}, '
                     f'"policy": {json.dumps(tree["policy"])}, '
                     f'"capacity": {tree["capacity"]},')
        for part in ("nodes", "cases"):
            rows = [json.dumps(r, separators=(",", ":")) for r in tree[part]]
            end = "]," if part == "nodes" else "]}" + ("," if n < len(sets) - 1 else "")
            lines.append(f'   "{part}": [')
            lines += [f"    {r}," for r in rows[:-1]] + [f"    {rows[-1]}", f"   {end}"]
    lines.append(" },")
    for part in ("counterexamples", "kills"):
        rows = [json.dumps(r, separators=(",", ":")) for r in data[part]]
        lines.append(f' "{part}": [')
        lines += [f"  {r}," for r in rows[:-1]] + [f"  {rows[-1]}"]
        lines.append(" ]," if part == "counterexamples" else " ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the committed file differs from a fresh one")
    args = parser.parse_args(argv)
    text = render(generate())
    json.loads(text)  # the rendering is valid JSON
    if args.check:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print(f"{OUT.relative_to(ROOT)} is {'up to date' if same else 'STALE'}")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(text):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
