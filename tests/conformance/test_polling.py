"""When the judge and the Python host poll before sleeping (target/polling.py), and the
host's reader of requests (target/host.py, ``Requests``)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator

import pytest

from kvoffload.conformance.config import CheckConfig
from kvoffload.conformance.target import polling
from kvoffload.conformance.target.host import Requests
from kvoffload.conformance.target.polling import PROBE_EVERY, Poller
from kvoffload.conformance.target.remote import RemoteTarget
from kvoffload.spec import Call, LookupResult, Op


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    yield read_end, write_end
    for fd in (read_end, write_end):
        with contextlib.suppress(OSError):
            os.close(fd)


class _Clocks:
    """The clocks a :class:`Poller` reads, advancing by fixed steps at each reading, so
    whether a poll had its core does not depend on how loaded the machine is."""

    def __init__(self, wall_step: float, cpu_step: float) -> None:
        self.wall = self.cpu = 0.0
        self.wall_step, self.cpu_step = wall_step, cpu_step

    def perf_counter(self) -> float:
        self.wall += self.wall_step
        return self.wall

    def thread_time(self) -> float:
        self.cpu += self.cpu_step
        return self.cpu


@pytest.fixture
def had_its_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every poll ran on a core of its own (its thread's CPU time kept up with the
    clock): the tests below then hold on a loaded machine too, where a real read of
    data already there is now and then preempted past :data:`polling.SHORT_S`."""
    monkeypatch.setattr(polling, "time", _Clocks(wall_step=1e-3, cpu_step=1e-3))


def test_with_one_core_nothing_is_polled(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    poller = Poller(0.01, cpus=1)
    os.write(write_end, b"x\n")
    assert poller.window == 0
    assert not poller.polling
    assert all(poller.poll(read_end) is None for _ in range(3 * PROBE_EVERY))
    assert os.read(read_end, 10) == b"x\n"  # never read by the poller


def test_a_negative_window_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 0 s"):
        Poller(-1.0, cpus=2)


def test_data_that_comes_is_read_and_polling_goes_on(pipe: tuple[int, int],
                                                     had_its_core: None) -> None:
    read_end, write_end = pipe
    poller = Poller(0.05, cpus=2)
    for round_ in range(40):
        os.write(write_end, b"%d\n" % round_)
        assert poller.poll(read_end) == b"%d\n" % round_
    assert poller.polling
    assert poller.score == 1.0


def test_polls_that_time_out_stop_polling_until_a_probe_pays(pipe: tuple[int, int],
                                                             had_its_core: None) -> None:
    read_end, write_end = pipe
    poller = Poller(0.001, cpus=2)
    timed_out = 0
    while poller.polling:
        assert poller.poll(read_end) is None
        timed_out += 1
    assert 3 <= timed_out <= 8  # about the last 16 count; 0.75 is lost in a few
    os.write(write_end, b"late\n")
    for _ in range(PROBE_EVERY - 1):  # not polled: the caller sleeps instead
        assert poller.poll(read_end) is None
    score = poller.score
    assert poller.poll(read_end) == b"late\n"  # the probe
    assert poller.score > score


def test_a_poll_that_did_not_have_its_core_does_not_pay(pipe: tuple[int, int],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The data came, but the poller's thread ran for a tenth of the poll: the core
    was wanted by others, so polling takes CPU from the process it waits for."""

    monkeypatch.setattr(polling, "time", _Clocks(wall_step=1e-3, cpu_step=1e-4))
    read_end, write_end = pipe
    poller = Poller(0.01, cpus=2)
    polls = 0
    while poller.polling:
        os.write(write_end, b"a\n")
        assert poller.poll(read_end) == b"a\n"
        polls += 1
    assert 3 <= polls <= 8


def test_requests_are_split_into_lines_across_reads(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    requests = Requests(read_end, Poller(0.001, cpus=2))
    os.write(write_end, b'{"a": 1}\n{"b"')
    assert requests.readline() == b'{"a": 1}\n'
    os.write(write_end, b': 2}\n{"c": 3}\n{"d": 4}\n{"tail"')
    assert [requests.readline() for _ in range(3)] == [b'{"b": 2}\n', b'{"c": 3}\n',
                                                       b'{"d": 4}\n']
    os.close(write_end)
    assert requests.readline() == b'{"tail"'  # a last line without its newline
    assert requests.readline() == b""


@pytest.mark.parametrize("polls", [True, False])
def test_a_request_written_later_is_waited_for(pipe: tuple[int, int], polls: bool) -> None:
    read_end, write_end = pipe
    poller = Poller(0.001, cpus=2)
    if not polls:
        poller.score = 0.0
    requests = Requests(read_end, poller)
    writer = threading.Timer(0.05, lambda: os.write(write_end, b"later\n"))
    writer.start()
    begun = time.perf_counter()
    assert requests.readline() == b"later\n"
    assert time.perf_counter() - begun >= 0.04
    writer.join()


def test_the_judge_writes_calls_as_it_posts_them_only_while_polling_pays() -> None:
    remote = RemoteTarget("kvoffload.impl:OffloadManager", CheckConfig())
    try:
        adapter = remote.prepare().make_adapter(4)
        host = remote.host
        assert host is not None
        host.poller.score = 1.0
        host.poller.window = 0.002
        adapter.post(Call(Op.LOOKUP, ("a",)))
        assert host.outgoing == []  # written at once
        host.poller.score = 0.0
        adapter.post(Call(Op.LOOKUP, ("b",)))
        assert len(host.outgoing) == 1  # waits for the next wait
        assert adapter.collect(Op.LOOKUP) is LookupResult.MISS
        assert adapter.collect(Op.LOOKUP) is LookupResult.MISS
        assert host.outgoing == []
    finally:
        remote.close()


def test_a_read_gives_what_is_there_and_none_at_its_deadline(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    poller = Poller(0.001, cpus=2)
    os.write(write_end, b"now\n")
    assert poller.read(read_end, time.monotonic() + 5) == b"now\n"
    begun = time.monotonic()
    assert poller.read(read_end, begun + 0.05) is None
    assert time.monotonic() - begun >= 0.05
    os.close(write_end)
    assert poller.read(read_end, time.monotonic() + 5) == b""  # the end
