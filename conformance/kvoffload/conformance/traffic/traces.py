"""Request traces: each request's arrival time and the ids of its prompt's blocks.

A trace is any iterable of :class:`Request`. :func:`read_mooncake` reads the format of
Mooncake's published traces (one JSON object per line, gzip or plain); another trace that
lists block ids per request fits by writing a reader that yields :class:`Request` values
(the :class:`TraceReader` protocol): the simulator needs nothing else. The two traces the
package carries are found by name (:data:`BUILTIN`).
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

BLOCK_TOKENS = 512
"""Tokens per block in Mooncake's traces (the paper's block size)."""

DATA = Path(__file__).resolve().parent / "data" / "mooncake"
BUILTIN = {
    "conversation": DATA / "conversation_trace.jsonl.gz",
    "synthetic": DATA / "synthetic_trace.jsonl.gz",
}
"""The Mooncake FAST'25 traces carried by the package (``data/mooncake/README.md``)."""


class TraceError(ValueError):
    """A trace cannot be read: a missing file or a line that breaks the format. The
    message names the file and the line."""


@dataclass(frozen=True)
class Request:
    """One request: when it arrives, the ids of its prompt's blocks in order (equal ids
    are the same reusable KV block), and its prompt's length in tokens."""

    arrival_ms: float
    blocks: tuple[Hashable, ...]
    tokens: int

    def block_tokens(self, index: int, block_tokens: int = BLOCK_TOKENS) -> int:
        """Tokens in block ``index``: a full block, except the last, which holds the rest."""
        if index < len(self.blocks) - 1:
            return block_tokens
        return self.tokens - block_tokens * (len(self.blocks) - 1)


class TraceReader(Protocol):
    """What reads a trace: a source (a path) in, requests in arrival order out."""

    def __call__(self, source: Path) -> Iterator[Request]: ...


def resolve(name: str) -> Path:
    """The file a trace argument names: a built-in name or a path.

    raises: TraceError
    """
    path = BUILTIN.get(name, Path(name))
    if not path.is_file():
        known = ", ".join(sorted(BUILTIN))
        raise TraceError(f"no trace file {name!r} (a path, or one of the built-in "
                         f"traces: {known})")
    return path


def read_mooncake(source: Path, block_tokens: int = BLOCK_TOKENS) -> Iterator[Request]:
    """Mooncake's format, gzip (by its magic bytes, whatever the name) or plain: per line
    ``timestamp`` (ms), ``input_length`` (tokens) and ``hash_ids`` (block ids).

    raises: TraceError
    """
    try:
        stream = _open(source)
    except OSError as error:
        raise TraceError(f"cannot read trace {source}: {error}") from None
    with stream:
        try:
            for number, line in enumerate(stream, 1):
                if line.strip():
                    yield _mooncake_request(line, f"{source}:{number}", block_tokens)
        except (OSError, EOFError, UnicodeDecodeError) as error:
            raise TraceError(f"cannot read trace {source}: {error}") from None


def _open(source: Path) -> TextIO:
    """The file as text, through gzip when it starts with gzip's magic bytes."""
    with source.open("rb") as probe:
        zipped = probe.read(2) == b"\x1f\x8b"
    if zipped:
        return gzip.open(source, "rt", encoding="utf-8")
    return source.open(encoding="utf-8")


def _mooncake_request(line: str, where: str, block_tokens: int) -> Request:
    """One line of Mooncake's format as a :class:`Request`.

    raises: TraceError
    """
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise TraceError(f"{where}: not a JSON line ({error.msg})") from None
    if not isinstance(row, dict):
        raise TraceError(f"{where}: a line must be a JSON object, got {type(row).__name__}")
    missing = [k for k in ("timestamp", "input_length", "hash_ids") if k not in row]
    if missing:
        raise TraceError(f"{where}: missing field(s) {missing}")
    arrival, tokens, ids = row["timestamp"], row["input_length"], row["hash_ids"]
    if not _is_number(arrival) or arrival < 0:
        raise TraceError(f"{where}: timestamp must be a number of ms >= 0, got {arrival!r}")
    if not isinstance(ids, list) or not all(_is_int(i) for i in ids):
        raise TraceError(f"{where}: hash_ids must be a list of ints")
    if not _is_int(tokens) or math.ceil(tokens / block_tokens) != len(ids):
        raise TraceError(f"{where}: input_length {tokens!r} does not fit {len(ids)} "
                         f"block(s) of {block_tokens} tokens (ceil(input_length / "
                         f"{block_tokens}) ids expected)")
    if len(set(ids)) != len(ids):
        raise TraceError(f"{where}: hash_ids names a block twice")
    return Request(float(arrival), tuple(ids), tokens)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def load(name: str, reader: TraceReader = read_mooncake, limit: int | None = None
         ) -> list[Request]:
    """The requests of a built-in trace or a file (the first ``limit`` of them), checked
    to arrive in order.

    raises: TraceError
    """
    path = resolve(name)
    requests: list[Request] = []
    for request in reader(path):
        if limit is not None and len(requests) >= limit:
            break
        if requests and request.arrival_ms < requests[-1].arrival_ms:
            raise TraceError(f"{path}: request {len(requests) + 1} arrives at "
                             f"{request.arrival_ms} ms, before the one before it "
                             f"({requests[-1].arrival_ms} ms): a trace is in arrival order")
        requests.append(request)
    if not requests:
        raise TraceError(f"{path}: the trace holds no request")
    return requests


def spread(requests: Sequence[Request], window_ms: float) -> list[Request]:
    """The requests with each group that shares one arrival time spread evenly over the
    ``window_ms`` after it, in trace order (the k-th of n at ``k * window_ms / n``), then
    sorted by the new times (stably). Mooncake's conversation trace gives arrivals to the
    second (1,180 distinct times for 12,031 requests, up to 28 at one time): read as
    simultaneous, the requests of one second meet each other's stores in flight.
    """
    if window_ms < 0 or not math.isfinite(window_ms):
        raise TraceError(f"a spread must be a finite number of ms >= 0, got {window_ms!r}")
    groups: dict[float, list[Request]] = {}
    for request in requests:
        groups.setdefault(request.arrival_ms, []).append(request)
    moved = [Request(time + window_ms * k / len(group), r.blocks, r.tokens)
             for time, group in groups.items() for k, r in enumerate(group)]
    return sorted(moved, key=lambda r: r.arrival_ms)


def distinct_blocks(requests: Iterable[Request]) -> int:
    """How many distinct block ids the requests name (an infinite cache's size)."""
    return len({key for request in requests for key in request.blocks})


def largest(requests: Sequence[Request]) -> int:
    """The most blocks one request names."""
    return max(len(request.blocks) for request in requests)
