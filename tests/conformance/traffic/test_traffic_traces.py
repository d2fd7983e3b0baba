"""The trace reader: Mooncake's format, gzip or plain, the carried traces, bad input."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from kvoffload.conformance.traffic.traces import (
    BUILTIN,
    Request,
    TraceError,
    distinct_blocks,
    largest,
    load,
    read_mooncake,
    resolve,
    spread,
)

SHARED = Path(__file__).resolve().parents[4] / "shared" / "data" / "mooncake"
"""Where the project's machines keep the published traces (absent on a user's machine)."""
SHA256 = {
    "conversation": "d2fbc500dcca1fc51a12bad16cdb12a582fe0d04626f19339aebb5bacd6affb8",
    "synthetic": "48c6343cfe3474dd2c892c078b6289ef785ff8739cb3fe7db91a60a017f834f4",
}
LINES = [
    {"timestamp": 0, "input_length": 1030, "output_length": 5, "hash_ids": [7, 8, 9]},
    {"timestamp": 12, "input_length": 512, "output_length": 1, "hash_ids": [7]},
]


def write(path: Path, rows: Sequence[object], zipped: bool = False) -> Path:
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    if zipped:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_plain_and_gzip_read_alike(tmp_path: Path) -> None:
    plain = list(read_mooncake(write(tmp_path / "t.jsonl", LINES)))
    zipped = list(read_mooncake(write(tmp_path / "t.jsonl.gz", LINES, zipped=True)))
    # gzip is told by its magic bytes, not by the name
    renamed = list(read_mooncake(write(tmp_path / "t.txt", LINES, zipped=True)))
    assert plain == zipped == renamed == [Request(0.0, (7, 8, 9), 1030), Request(12.0, (7,), 512)]
    assert [plain[0].block_tokens(i) for i in range(3)] == [512, 512, 6]
    assert plain[1].block_tokens(0) == 512


@pytest.mark.parametrize(("name", "requests", "references", "distinct", "most"), [
    ("conversation", 12_031, 288_500, 182_790, 247),
    ("synthetic", 3_993, 121_877, 43_924, 374),
])
def test_the_carried_traces(name: str, requests: int, references: int, distinct: int,
                            most: int) -> None:
    """The package carries the published traces byte for byte, with the README's counts."""
    path = BUILTIN[name]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == SHA256[name]
    shared = SHARED / path.name
    if shared.is_file():
        assert shared.read_bytes() == path.read_bytes()
    trace = load(name)
    assert len(trace) == requests
    assert sum(len(r.blocks) for r in trace) == references
    assert distinct_blocks(trace) == distinct
    assert largest(trace) == most
    assert (path.parent / "README.md").read_text().count("Apache License") >= 1


def test_limit_keeps_the_first_requests() -> None:
    assert load("synthetic", limit=5) == load("synthetic")[:5]


@pytest.mark.parametrize(("line", "says"), [
    ("{not json", "not a JSON line"),
    ("[1, 2]", "must be a JSON object"),
    ('{"timestamp": 0, "input_length": 3}', "missing field(s) ['hash_ids']"),
    ('{"timestamp": -1, "input_length": 3, "hash_ids": [1]}', "timestamp must be"),
    ('{"timestamp": "0", "input_length": 3, "hash_ids": [1]}', "timestamp must be"),
    ('{"timestamp": 0, "input_length": 3, "hash_ids": [1, "x"]}', "list of ints"),
    ('{"timestamp": 0, "input_length": 3, "hash_ids": 1}', "list of ints"),
    ('{"timestamp": 0, "input_length": 513, "hash_ids": [1]}', "does not fit 1 block"),
    ('{"timestamp": 0, "input_length": 1024, "hash_ids": [1, 1]}', "names a block twice"),
])
def test_a_bad_line_is_named_with_its_number(tmp_path: Path, line: str, says: str) -> None:
    path = write(tmp_path / "bad.jsonl", [LINES[0], line])
    with pytest.raises(TraceError) as caught:
        load(str(path))
    assert f"{path}:2: " in str(caught.value)
    assert says in str(caught.value)


def test_requests_out_of_order_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", list(reversed(LINES)))
    with pytest.raises(TraceError, match="arrival order"):
        load(str(path))


def test_missing_empty_and_broken_files(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no trace file"):
        resolve(str(tmp_path / "nowhere.jsonl"))
    with pytest.raises(TraceError, match="holds no request"):
        load(str(write(tmp_path / "empty.jsonl", ["", "  "])))
    broken = tmp_path / "cut.jsonl.gz"
    whole = gzip.compress((json.dumps(LINES[1]) + "\n").encode() * 50)
    broken.write_bytes(whole[:-10])  # cut short: the gzip stream ends early
    with pytest.raises(TraceError, match="cannot read trace"):
        load(str(broken))


def test_spread_moves_simultaneous_arrivals_apart_in_order() -> None:
    requests = [Request(0.0, (1,), 5), Request(0.0, (2,), 5), Request(0.0, (3,), 5),
                Request(500.0, (4,), 5), Request(500.0, (5,), 5)]
    moved = spread(requests, 900.0)
    assert [(r.arrival_ms, r.blocks[0]) for r in moved] == [
        (0.0, 1), (300.0, 2), (500.0, 4), (600.0, 3), (950.0, 5)]
    assert spread(requests, 0.0) == requests
    with pytest.raises(TraceError, match="spread"):
        spread(requests, -1.0)


def test_another_format_fits_through_a_reader(tmp_path: Path) -> None:
    """A trace in another format (here: arrival, tokens, then block ids, comma-separated)
    is read by a small reader and simulated like Mooncake's."""
    from collections.abc import Iterator

    from kvoffload.conformance.traffic import simulate

    def read_csv(source: Path) -> Iterator[Request]:
        for line in source.read_text().splitlines():
            arrival, tokens, *ids = line.split(",")
            yield Request(float(arrival), tuple(ids), int(tokens))

    path = tmp_path / "t.csv"
    path.write_text("0,1024,a,b\n5,1500,a,b,c\n")
    trace = load(str(path), reader=read_csv)
    assert trace == [Request(0.0, ("a", "b"), 1024), Request(5.0, ("a", "b", "c"), 1500)]
    assert simulate(trace, 10).counters.hit_blocks == 2
