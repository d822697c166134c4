import keras
import pytest

from customgrad import _memory


def minor_collections(calls):
    """A collector recording its minor collections (a full one may follow
    each, as the process's memory moves by more than these tests' tiny
    thresholds)."""
    return lambda full: None if full else calls.append(1)


def test_results_count_bytes_and_collect_at_four_times_the_threshold():
    calls = []
    _memory.set_collector(minor_collections(calls), 1000)
    try:
        x = keras.ops.ones((100,))  # 400 bytes
        before = _memory.stats()["collections"]
        for _ in range(11):  # 4,400 bytes: one collection past 4x
            _memory.handed_to_r(keras.ops.exp(x))
        assert len(calls) == 1
        assert _memory.stats()["collections"] == before + 1
    finally:
        _memory.set_collector(None, 64 * 2**20)


def test_a_due_collection_waits_for_the_boundary():
    calls = []
    _memory.set_collector(minor_collections(calls), 1000)
    try:
        _memory.handed_to_r([keras.ops.ones((300,)), keras.ops.ones((100,))])
        assert calls == []  # 1,600 bytes: due, not run
        _memory.at_boundary()
        assert calls == [1]
        _memory.at_boundary()
        assert calls == [1]  # nothing due any more
    finally:
        _memory.set_collector(None, 64 * 2**20)


def test_collections_are_timed_with_what_the_collector_runs(monkeypatch):
    # A clock that the collector moves on by 2 s: no sleeping, no bounds.
    clock = [100.0]
    monkeypatch.setattr(_memory.time, "perf_counter", lambda: clock[0])

    def collector(full):
        clock[0] += 2.0

    _memory.set_collector(collector, 1000)
    try:
        before = _memory.stats()
        _memory.handed_to_r(keras.ops.ones((300,)))  # 1,200 bytes: due
        _memory.at_boundary()
        after = _memory.stats()
        assert after["collections"] == before["collections"] + 1
        # one collection, or two when a full one follows the minor one
        assert after["seconds"] - before["seconds"] in (2.0, 4.0)
    finally:
        _memory.set_collector(None, 64 * 2**20)


def test_bytes_are_counted_by_size_and_dtype():
    x = keras.ops.ones((3, 4), dtype="float32")
    h = keras.ops.ones((5,), dtype="float16")
    assert _memory._nbytes(x) == 48
    assert _memory._nbytes(h) == 10
    assert _memory._nbytes([x, {"a": h, "b": (x, 1.5)}]) == 48 + 10 + 48


def test_resident_memory_growth_makes_a_collection_due(monkeypatch):
    calls = []
    rss = [1_000_000]
    monkeypatch.setattr(
        _memory, "_memory_now", lambda fresh=False: [rss[0], 5_000_000]
    )
    monkeypatch.setattr(_memory, "_in_use", [False, True])
    _memory.set_collector(minor_collections(calls), 1000)
    try:
        _memory.at_boundary()  # takes the baseline
        rss[0] += 1000
        _memory.at_boundary()
        assert calls == []  # grown by the threshold, not past it
        rss[0] += 1
        _memory.at_boundary()
        assert calls == [1]
        _memory.at_boundary()
        assert calls == [1]  # the baseline moved to after the collection
    finally:
        _memory.set_collector(None, 64 * 2**20)


class FakeCollector:
    """R's collector over fake memory readings: records ``"minor"`` and
    ``"full"`` in ``calls`` and takes ``freed[full]`` off the first
    reading."""

    def __init__(self, readings, freed):
        self.readings, self.freed, self.calls = readings, freed, []

    def __call__(self, full):
        self.calls.append("full" if full else "minor")
        self.readings[0] -= self.freed[full]


@pytest.fixture
def fake_memory(monkeypatch):
    """``fake_memory(readings, in_use, freed)``: measures reading
    ``readings`` (a list the test changes), ``in_use`` saying which fall when
    memory is freed, and a FakeCollector registered with a threshold of
    1,000 bytes."""

    def fake(readings, in_use, freed):
        monkeypatch.setattr(_memory, "_memory_now", lambda fresh=False: list(readings))
        monkeypatch.setattr(_memory, "_in_use", in_use)
        collector = FakeCollector(readings, freed)
        _memory.set_collector(collector, 1000)
        return collector

    yield fake
    _memory.set_collector(None, 64 * 2**20)


def test_a_full_collection_follows_a_minor_one_that_kept_much(fake_memory):
    used = [1_000_000]
    # Only a full one frees much.
    collector = fake_memory(used, [True], {False: 200, True: 1500})
    _memory.at_boundary()  # takes the baselines
    used[0] += 1001
    _memory.at_boundary()
    assert collector.calls == ["minor", "full"]  # kept 801 of the 1001: > 500
    used[0] += 1001
    _memory.at_boundary()  # the level after the full one is the base
    assert collector.calls == ["minor", "full", "minor", "full"]


def test_minor_collections_that_keep_little_run_alone_up_to_eight_thresholds(
    fake_memory,
):
    used = [1_000_000]
    freed = {False: 0, True: 7000}
    collector = fake_memory(used, [True], freed)
    _memory.at_boundary()  # takes the baselines
    for _ in range(20):
        added = _memory._state["due_at"] + 1
        freed[False] = added - 400  # a minor one keeps 400
        used[0] += added
        _memory.at_boundary()
    # 400 more in use after each: past 8,000 at the 21st
    assert collector.calls == ["minor"] * 20
    used[0] += added
    _memory.at_boundary()
    assert collector.calls == ["minor"] * 21 + ["full"]


def test_the_growth_that_makes_a_collection_due_adapts(fake_memory):
    # Doubled after each collection that needed no full one, up to four
    # thresholds; back to the threshold after a full one.
    used = [1_000_000]
    freed = {False: 0, True: 0}
    fake_memory(used, [True], freed)
    _memory.at_boundary()  # takes the baselines
    due = []
    for _ in range(4):
        due.append(_memory._state["due_at"])
        before = _memory.stats()["collections"]
        used[0] += due[-1]
        _memory.at_boundary()
        assert _memory.stats()["collections"] == before  # not past it
        used[0] += 1
        freed[False] = due[-1] + 1  # a minor one frees all
        _memory.at_boundary()
        assert _memory.stats()["collections"] == before + 1
    assert due == [1000, 2000, 4000, 4000]
    used[0] += 4001
    freed[False] = 0  # a minor one keeps all: a full one follows
    freed[True] = 4001
    _memory.at_boundary()
    assert _memory._state["due_at"] == 1000


def test_a_first_collection_before_any_baseline_takes_them(fake_memory):
    used = [1_000_000]
    # A minor one keeps everything.
    collector = fake_memory(used, [True], {False: 0, True: 2500})
    # Past four thresholds handed to R before any boundary took the
    # baselines: a collection at once, which takes them.
    _memory.handed_to_r(keras.ops.ones((1100,)))  # 4,400 bytes
    assert collector.calls == ["minor"]
    used[0] += 2500  # past the threshold, doubled after that one
    _memory.at_boundary()
    assert collector.calls == ["minor", "minor", "full"]  # kept 2,500: > 500


def test_the_resident_set_makes_no_full_collection_due(fake_memory):
    # It stays high on the allocators' free lists: what a minor collection
    # freed does not show there.
    readings = [1_000_000, 1_000_000]  # glibc's bytes in use, resident set
    collector = fake_memory(readings, [True, False], {False: 1000, True: 1000})
    _memory.at_boundary()  # takes the baselines
    readings[0] += 1001
    readings[1] += 5000
    _memory.at_boundary()
    assert collector.calls == ["minor"]


def test_resident_memory_is_read_on_linux():
    import sys

    if sys.platform.startswith("linux"):
        # glibc's bytes in use, the resident set (and TensorFlow's count)
        now = _memory._memory_now()
        assert len(now) >= 2
        assert now[0] > 0 and now[1] > 0  # TensorFlow's may be 0


def test_a_slow_measure_is_read_at_most_every_interval():
    readings = []

    def measure():
        readings.append(1)
        return len(readings)

    throttled = _memory._at_most_every(measure, 60)
    assert [throttled() for _ in range(5)] == [1] * 5
    assert len(readings) == 1


def test_no_collection_off_the_main_thread():
    import threading

    calls = []
    _memory.set_collector(minor_collections(calls), 1000)
    try:
        _memory.handed_to_r(keras.ops.ones((1000,)))
        worker = threading.Thread(target=_memory.at_boundary)
        worker.start()
        worker.join()
        assert calls == []  # R can't run there
        _memory.at_boundary()
        assert calls == [1]
    finally:
        _memory.set_collector(None, 64 * 2**20)


def test_calls_from_python_collect_when_due():
    # R may hold tensors of the code around a call from Python (a loop of
    # jax$grad() run from R): the call collects them when due.
    import customgrad
    from test_adapters import log1pexp_forward

    calls = []
    h = customgrad.custom_gradient(log1pexp_forward)
    _memory.set_collector(minor_collections(calls), 1000)
    try:
        _memory.handed_to_r(keras.ops.ones((1000,)))
        h(keras.ops.convert_to_tensor([1.0]))
        assert calls == [1]
    finally:
        _memory.set_collector(None, 64 * 2**20)
