"""vLLM: 'lookup' diverges from the kvoffload spec, in its own API.

Found by `kvoffload check vllm==0.20.2`: lookup answers MISS iff absent, PENDING iff its store is in flight, HIT iff READY (safe profile: PENDING may read as MISS, never as HIT); vLLM's RETRY only where the spec says PENDING.
lookup('a') must answer PENDING (strict profile); the target answered MISS

The operations of the spec's API, as kvoffload made them (tier of 1):
    1. prepare_store(['a'])
    2. lookup('a')

Below, each operation (``step``) is followed by exactly the vLLM calls kvoffload's
adapter made for it, and each call's answer is compared with the answer vLLM gave
under kvoffload. Run it with plain `python` (no kvoffload needed). It prints every call
and answer, then the divergent operation's calls next to what the spec demands. Exit
status 1: vLLM answered every call as under kvoffload, so the divergence is its own;
0: some answer differs (not reproduced outside kvoffload).
vLLM 0.20.2: the script imports vllm.v1.kv_offload from an installed vLLM 0.20.2 if
there is one (pip install vllm==0.20.2); else from the wheel's vllm/v1/kv_offload files
as kvoffload unpacks them, unchanged, in ~/.cache/kvoffload/vllm/0.20.2
($KVOFFLOAD_CACHE), put on sys.path with small stubs for the few modules outside
kv_offload that it imports (vLLM's logger, its metrics class, BlockHash, kv_hints, the
cache-hit source enum, cdiv and round_up: load_vllm below), as kvoffload loads vLLM on a
machine without it. No vLLM code is copied into the script.
"""

# --- the reproducer's helpers (copied into every script from here on) ---
import dataclasses
import enum
import linecache
import sys
from typing import Any

NAMED: dict[str, Any] = {}
"""Objects the script named (keys, buffers), by name: an answer holding one is written
as its name."""
SAME = [0]
"""How many answers were the same as under kvoffload."""
OTHER: list[tuple[str, Any, Any]] = []
"""The answers that were not: (line, answer, answer under kvoffload)."""
STEPS: list[tuple[str, list[tuple[str, Any]]]] = []


def plain(value: Any, named: dict[str, Any] | None = None) -> Any:
    """An answer in a form that compares across processes: literals as they are,
    sequences item by item, dataclasses field by field, named objects by name, any
    other object by its type."""
    named = NAMED if named is None else named
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    for name, known in named.items():
        try:
            if value is known or (type(value) is type(known) and bool(value == known)
                                  and type(value).__module__ != "builtins"):
                return "<" + name + ">"
        except Exception:
            continue
    if isinstance(value, enum.Enum):
        return "<" + type(value).__name__ + "." + value.name + ">"
    if isinstance(value, (list, tuple)):
        return [plain(item, named) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((plain(item, named) for item in value), key=repr)
    if isinstance(value, dict):
        return [[plain(k, named), plain(v, named)] for k, v in value.items()]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__name__,
                **{f.name: plain(getattr(value, f.name), named)
                   for f in dataclasses.fields(value)}}
    if callable(getattr(value, "tolist", None)):
        return plain(value.tolist(), named)
    return "<" + type(value).__name__ + ">"


def _note(line: str, got: Any, expected: Any) -> None:
    same = got == expected
    SAME[0] += same
    if not same:
        OTHER.append((line, got, expected))
    if STEPS:
        STEPS[-1][1].append((line, got))
    print("    " + line + "\n        -> " + repr(got)
          + ("" if same else "   (under kvoffload: " + repr(expected) + ")"))


def saw(value: Any, expected: Any, name: str | None = None) -> None:
    """The answer of the call on the line above, printed and compared with ``expected``
    (what the engine answered under kvoffload); ``name``: the script names it so."""
    frame = sys._getframe(1)
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno - 1).strip()
    _note(line, plain(value), expected)
    if name is not None:
        NAMED[name] = value


def made(value: Any, name: str) -> Any:
    """An object the script makes (a key, a backend), named so in the answers."""
    NAMED[name] = value
    return value


def raises(expected: str | None) -> "_Raises":
    """The call in this ``with`` raises (``expected``: its class's name, or None)."""
    return _Raises(expected)


class _Raises:

    def __init__(self, expected: str | None) -> None:
        self.expected = expected

    def __enter__(self) -> "_Raises":
        frame = sys._getframe(1)
        self.line = linecache.getline(frame.f_code.co_filename, frame.f_lineno + 1).strip()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: Any) -> bool:
        got = None if kind is None else "raises " + kind.__name__
        _note(self.line, got, None if self.expected is None else "raises " + self.expected)
        return kind is not None and issubclass(kind, Exception)


def step(text: str) -> None:
    """One operation of the spec's API, made on the engine by the calls after it."""
    STEPS.append((text, []))
    print(text)


def finish(failing: str, spec_table: str, what: str) -> int:
    """Print the divergent operation's calls beside the spec's demand; the exit status."""
    print()
    same = not OTHER
    calls = [answers for text, answers in STEPS if text.split(". ", 1)[-1] == failing]
    print("the divergence, at " + failing + ":")
    for line, got in (calls[-1] if calls else []):
        print("    " + line + "  -> " + repr(got))
    print("what the spec demands, next to what " + what + " showed under kvoffload:")
    print(spec_table)
    if same:
        print("REPRODUCED: every call answered as it did under kvoffload ("
              + str(SAME[0]) + " answers): " + what + " diverges from the spec here")
        return 1
    print("NOT REPRODUCED: " + str(len(OTHER)) + " answer(s) differ from those under "
          "kvoffload; the first: " + OTHER[0][0] + " -> " + repr(OTHER[0][1]))
    return 0


# --- the vLLM stubs (copied into reproducers from here on) ---
import enum
import logging
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, NewType


class StubLogger:
    """vLLM's logger interface (``warning_once`` and friends) over the logging module."""

    def __init__(self, name: str) -> None:
        self._logger = logging.getLogger(name)
        self._said: set[tuple[str, str]] = set()

    def __getattr__(self, name: str) -> Any:
        if name.endswith("_once"):
            level = name.removesuffix("_once")

            def once(message: str, *args: Any, **kwargs: Any) -> None:
                if (level, message) not in self._said:
                    self._said.add((level, message))
                    getattr(self._logger, level)(message, *args)
            return once
        return getattr(self._logger, name)


class StubStats:
    """Stand-in for vLLM's ``OffloadingConnectorStats``: records, never exports."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.values: dict[str, Any] = {}

    def set_gauge(self, name: str, value: float, *args: Any) -> None:
        self.values[name] = value

    def increase_counter(self, name: str, value: float = 1, *args: Any) -> None:
        self.values[name] = self.values.get(name, 0) + value

    def observe_histogram(self, name: str, value: float, *args: Any) -> None:
        self.values.setdefault(name, []).append(value)

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


class StubCacheHitSource(str, enum.Enum):
    DEVICE = "device"
    HOST = "host"
    P2P = "p2p"
    DISK = "disk"
    EXTERNAL_UNSPECIFIED = "external_unspecified"


class StubKvHintsEnvelope:
    """Stand-in for vLLM's request hints envelope (never built by the managers)."""


def not_loaded(name: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{name} is stubbed: only vLLM's manager code is loaded")
    return call


def cdiv(a: int, b: int) -> int:
    return -(a // -b)


def round_up(x: int, y: int) -> int:
    return cdiv(x, y) * y


STUBS: dict[str, dict[str, Any]] = {
    "logger": {"init_logger": StubLogger},
    "v1.core.kv_cache_utils": {
        "BlockHash": NewType("BlockHash", bytes),
        "resolve_kv_cache_block_sizes": not_loaded("resolve_kv_cache_block_sizes"),
    },
    "distributed.kv_transfer.kv_connector.v1.offloading.metrics": {
        "OffloadingConnectorStats": StubStats,
    },
    "v1.kv_hints": {"KvHintsEnvelope": StubKvHintsEnvelope},
    "v1.metrics.cache_hit_source": {"CacheHitSource": StubCacheHitSource},
    "utils.math_utils": {"cdiv": cdiv, "round_up": round_up},
}
"""Outside module (relative to ``vllm``) -> the names its stub provides."""


def load_vllm(version: str) -> str:
    """Make ``import vllm.v1.kv_offload...`` work: an installed vLLM of ``version`` as it
    is; else release ``version``'s ``vllm/v1/kv_offload`` as kvoffload caches it
    (``$KVOFFLOAD_CACHE`` or ``~/.cache/kvoffload``, ``vllm/<version>``: the wheel's
    files, unchanged) on ``sys.path``, with :data:`STUBS` for its outside imports.
    Says which."""
    try:  # an installed vLLM, if any
        from importlib import import_module
        from importlib.metadata import version as installed

        if installed("vllm") == version:
            import_module("vllm.v1.kv_offload")
            return "the installed vLLM " + version
    except Exception:
        pass
    cache = os.environ.get("KVOFFLOAD_CACHE") or str(Path.home() / ".cache" / "kvoffload")
    root = Path(cache).expanduser() / "vllm" / version
    if not (root / "vllm" / "v1" / "kv_offload").is_dir():
        raise SystemExit("vLLM " + version + " is neither installed nor unpacked in " + str(root)
                         + ": pip install vllm==" + version + ", or unzip its wheel's "
                         "vllm/v1/kv_offload there")
    for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    for relative, names in STUBS.items():
        parts = relative.split(".")
        for depth in range(1, len(parts) + 1):
            name = "vllm." + ".".join(parts[:depth])
            folder = root / "vllm" / Path(*parts[:depth])
            if name in sys.modules or folder.is_dir():
                continue
            module = types.ModuleType(name)
            if depth < len(parts):
                module.__path__ = []
            sys.modules[name] = module
        sys.modules["vllm." + relative].__dict__.update(names)
    return "vLLM " + version + "'s vllm/v1/kv_offload from " + str(root) + ", with stubs"


print('loaded', load_vllm('0.20.2'))
from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager
from vllm.v1.kv_offload.abstract import ReqContext

SPEC = "                   spec             target\n-----------------  ---------------  -----------\ncall               lookup('a')      lookup('a')\nanswer             PENDING          MISS\nspec state of 'a'  STORING, slot 0"


def main():
    manager = made(CPUOffloadingManager(1, cache_policy='lru', enable_events=True), 'manager')
    step("1. prepare_store(['a'])")
    context = made(ReqContext(), 'context')
    v1 = manager.prepare_store([b'a\x00\x00\x00\x00'], req_context=context)
    saw(v1, {'type': 'PrepareStoreOutput', 'keys_to_store': [b'a\x00\x00\x00\x00'], 'store_spec': '<CPULoadStoreSpec>', 'evicted_keys': []}, 'v1')
    v2 = v1.keys_to_store
    saw(v2, [b'a\x00\x00\x00\x00'], 'v2')
    v3 = v1.evicted_keys
    saw(v3, [], 'v3')
    v4 = v1.store_spec
    saw(v4, '<CPULoadStoreSpec>', 'v4')
    v5 = v4.block_ids
    saw(v5, [0], 'v5')
    step("2. lookup('a')")
    context_6 = made(ReqContext(), 'context_6')
    answer = manager.lookup(b'a\x00\x00\x00\x00', req_context=context_6)
    saw(answer, False)
    return finish("lookup('a')", SPEC, 'vLLM')


if __name__ == "__main__":
    try:
        status = main()
    except Exception:
        import traceback

        traceback.print_exc()
        print("the script failed before it could compare the answers")
        status = 2
    sys.exit(status)
