"""Write docs/reproducers/: each LMCache and vLLM finding of docs/engines.md as an
engine-native reproducer (no kvoffload in it), with the output it printed when run.

    python docs/tools/engine_reproducers.py            # every finding
    python docs/tools/engine_reproducers.py --only lmcache_cpu_store_in_flight

For each finding the shrunk trace is replayed against the engine through the suite
(kvoffload.conformance.reproduce), the engine calls its adapter makes are recorded, and
the script is written and run in a fresh process (engine_script.engine_reproducer): it
is kept only if it reproduced the divergence there. ``<name>.py`` is the script,
``<name>.out`` what it printed on stdout, ``index.json`` lists them (with whether each
finding is the engine's bug or its design choice, as docs/engines.md says);
tests/docs/test_reproducers.py runs them again. Needs LMCache 0.5.6 and vLLM 0.20.2
(the suite's cache) where those findings are written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kvoffload.conformance.command.engine_script import engine_reproducer
from kvoffload.conformance.config import CheckConfig
from kvoffload.conformance.errors import PropertyViolation
from kvoffload.conformance.reproduce import reproduce
from kvoffload.spec import Call, Op

FOLDER = Path(__file__).resolve().parent.parent / "reproducers"
LMCACHE = "lmcache==0.5.6"


def _store(key: str, success: bool = True) -> list[Call]:
    return [Call(Op.PREPARE_STORE, (key,)), Call(Op.COMPLETE_STORE, (key,), success=success)]


FINDINGS: dict[str, dict[str, Any]] = {
    "lmcache_cpu_store_in_flight_invisible": {
        "target": LMCACHE, "kind": "design",
        "config": {"adapter": "lmcache-cpu", "profile": "strict", "capacity": 1},
        "calls": [Call(Op.PREPARE_STORE, ("a",)), Call(Op.LOOKUP, ("a",))],
        "what": "a chunk being stored on the CPU backend (allocated, not yet put) is "
                "invisible: contains and exists_in_put_tasks are both False"},
    "lmcache_cpu_one_chunk_per_call": {
        "target": LMCACHE, "kind": "design",
        "config": {"adapter": "lmcache-cpu", "profile": "safe", "capacity": 1},
        "calls": [Call(Op.PREPARE_STORE, ("a", "b"))],
        "what": "LMCache allocates one chunk at a time: a store of two chunks on a tier of "
                "one keeps the first and finds no room for the second, where the spec "
                "rejects the whole call"},
    "lmcache_cpu_clear_does_not_fence_a_store": {
        "target": LMCACHE, "kind": "design",
        "config": {"adapter": "lmcache-cpu", "profile": "safe", "capacity": 1},
        "calls": [Call(Op.PREPARE_STORE, ("a",)), Call(Op.RESET_CACHE),
                  Call(Op.COMPLETE_STORE, ("a",)), Call(Op.LOOKUP, ("a",))],
        "what": "clear() does not know a chunk being written: the submit_put_task after "
                "it puts the chunk into the cleared cache"},
    "lmcache_cpu_clear_does_not_fence_a_read": {
        "target": LMCACHE, "kind": "design",
        "config": {"adapter": "lmcache-cpu", "profile": "safe", "capacity": 1},
        "calls": [*_store("a"), Call(Op.PREPARE_LOAD, ("a",)), Call(Op.RESET_CACHE),
                  Call(Op.LOOKUP, ("a",))],
        "what": "clear() skips a chunk whose buffer is still held by a reader: it "
                "survives the reset"},
    "lmcache_cpu_read_does_not_refresh_lru": {
        "target": LMCACHE, "kind": "design",
        "config": {"adapter": "lmcache-cpu", "profile": "safe", "capacity": 2,
                   "level": "exact"},
        "calls": [*_store("a"), *_store("b"), Call(Op.PREPARE_LOAD, ("a",)),
                  Call(Op.COMPLETE_LOAD, ("a",)), Call(Op.PREPARE_STORE, ("c",))],
        "what": "get_blocking does not refresh LMCache's LRU (only touch_cache does): "
                "its LRU is put-and-touch order, not use order"},
    "lmcache_disk_failed_write_stays_in_put_tasks": {
        "target": LMCACHE, "kind": "bug",
        "config": {"adapter": "lmcache-disk", "profile": "strict", "capacity": 1},
        "calls": [*_store("a", success=False), Call(Op.LOOKUP, ("a",))],
        "what": "a disk write that raises leaves its key in the put tasks for ever: "
                "exists_in_put_tasks stays True"},
    "lmcache_disk_failed_write_blocks_the_chunk": {
        "target": LMCACHE, "kind": "bug",
        "config": {"adapter": "lmcache-disk", "profile": "strict", "capacity": 1},
        "calls": [*_store("a", success=False), Call(Op.PREPARE_STORE, ("a",))],
        "what": "after its write failed, the chunk can never be stored again (the key is "
                "lost)"},
    "lmcache_disk_failed_write_keeps_its_space": {
        "target": LMCACHE, "kind": "bug",
        "config": {"adapter": "lmcache-disk", "profile": "strict", "capacity": 2},
        "calls": [*_store("a"), *_store("b", success=False), Call(Op.PREPARE_STORE, ("c",))],
        "what": "the failed write's bytes stay counted in the disk's use: a later store "
                "evicts a chunk it should not need to (the space is lost until restart)"},
    "vllm_0_20_2_lookup_of_a_block_being_stored": {
        "target": "vllm==0.20.2", "kind": "bug",
        "config": {"profile": "strict", "capacity": 1},
        "calls": [Call(Op.PREPARE_STORE, ("a",)), Call(Op.LOOKUP, ("a",))],
        "what": "lookup answers False (absent) for a block being stored, so a scheduler "
                "stores it again (fixed by vLLM PR #41795, 0.21.0)"},
}


def _violation(finding: dict[str, Any]) -> PropertyViolation:
    try:
        reproduce(finding["target"], finding["config"], finding["calls"])
    except PropertyViolation as found:
        found.generated = len(found.trace)
        return found
    raise SystemExit(f"{finding['target']} conforms on {finding['calls']}: nothing to show")


def write(name: str) -> dict[str, Any]:
    """Record, write and confirm one finding's script; its index entry."""
    finding = FINDINGS[name]
    violation = _violation(finding)
    config = CheckConfig.from_options(**finding["config"], spelling="")
    script = engine_reproducer(finding["target"], config, violation)
    if script is None or not script.reproduced:
        raise SystemExit(f"{name}: the script did not reproduce the divergence:\n"
                         f"{script.output if script else 'no script'}")
    path = FOLDER / f"{name}.py"
    path.write_text(script.source, encoding="utf-8")
    status, output = script.status, script.output
    (FOLDER / f"{name}.out").write_text(output, encoding="utf-8")
    return {"target": finding["target"], "kind": finding["kind"], "what": finding["what"],
            "property": violation.prop, "status": status,
            "trace": [str(c) for c in violation.trace],
            "last_line": output.strip().splitlines()[-1]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=sorted(FINDINGS), default=None)
    args = parser.parse_args(argv)
    FOLDER.mkdir(exist_ok=True)
    index_path = FOLDER / "index.json"
    index = json.loads(index_path.read_text()) if index_path.is_file() else {}
    failed = []
    for name in args.only or FINDINGS:
        print(f"{name} ...", file=sys.stderr, flush=True)
        try:
            index[name] = write(name)
        except SystemExit as error:
            print(error, file=sys.stderr)
            failed.append(name)
    index_path.write_text(json.dumps(dict(sorted(index.items())), indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
