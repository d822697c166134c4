import pathlib
import sys
import threading

import keras
import pytest

from customgrad import _memory

# The fake device allocator R's memory tests use too.
sys.path.insert(0, str(pathlib.Path(__file__).parents[3] / "tests" / "testthat"))
from fake_device import FakeDevice  # noqa: E402


def minor_collections(calls):
    """A collector recording its collections."""
    return lambda: calls.append(1)


@pytest.fixture(autouse=True)
def default_collector():
    """Each test leaves the collector as a session without R has it."""
    yield
    _memory.set_collector(None, 64 * 2**20)


@pytest.fixture
def calls():
    """The minor collections run by a collector over 1,000 bytes."""
    calls = []
    _memory.set_collector(minor_collections(calls), 1000)
    return calls


def test_results_are_counted_and_collected_at_the_next_boundary_only(calls):
    x = keras.ops.ones((100,))  # 400 bytes
    before = _memory.stats()["collections"]
    for _ in range(11):  # 4,400 bytes: due, however far past
        _memory.handed_to_r(keras.ops.exp(x))
    _memory.handed_to_r([keras.ops.ones((300,)), x])  # a nest: 1,600 more
    assert calls == []
    assert _memory.stats()["bytes"] == 6000
    _memory.at_boundary()
    assert calls == [1]
    assert _memory.stats()["collections"] == before + 1
    _memory.at_boundary()
    assert calls == [1]  # nothing due any more


def test_a_collection_due_at_a_call_from_r_is_left_to_r_once():
    calls, told = [], []
    _memory.set_collector(minor_collections(calls), 1000, lambda: told.append(1))
    _memory.collect_deferred()
    assert calls == []  # nothing was deferred
    _memory.handed_to_r(keras.ops.ones((500,)))  # 2,000 bytes: due
    _memory.at_boundary(from_r=True)
    assert (calls, told) == ([], [1])  # R is told, nothing runs yet
    _memory.collect_deferred()  # R, before its next call
    assert (calls, told) == ([1], [1])
    _memory.collect_deferred()
    assert calls == [1]  # run once
    # R did not collect before the next due boundary: it collects.
    _memory.handed_to_r(keras.ops.ones((500,)))
    _memory.at_boundary(from_r=True)
    _memory.handed_to_r(keras.ops.ones((500,)))
    _memory.at_boundary(from_r=True)
    assert (calls, told) == ([1, 1], [1, 1])


def test_without_r_to_tell_a_call_from_r_collects_at_once(calls):
    _memory.handed_to_r(keras.ops.ones((500,)))
    _memory.at_boundary(from_r=True)
    assert calls == [1]


def test_collections_are_timed_with_what_the_collector_runs(monkeypatch):
    # A clock that the collector moves on by 2 s: no sleeping, no bounds.
    clock = [100.0]
    monkeypatch.setattr(_memory.time, "perf_counter", lambda: clock[0])

    def collector():
        clock[0] += 2.0

    _memory.set_collector(collector, 1000)
    before = _memory.stats()
    _memory.handed_to_r(keras.ops.ones((300,)))  # 1,200 bytes: due
    _memory.at_boundary()
    after = _memory.stats()
    assert after["collections"] == before["collections"] + 1
    assert after["seconds"] - before["seconds"] == 2.0


def test_bytes_are_counted_by_size_and_dtype():
    x = keras.ops.ones((3, 4), dtype="float32")
    h = keras.ops.ones((5,), dtype="float16")
    assert _memory._nbytes(x) == 48
    assert _memory._nbytes(h) == 10
    assert _memory._nbytes([x, {"a": h, "b": (x, 1.5)}]) == 48 + 10 + 48


def test_memory_growth_makes_a_collection_due(monkeypatch, calls):
    used = [1_000_000]
    monkeypatch.setattr(_memory, "_memory_now", lambda fresh=False: used[0])
    _memory.at_boundary()  # takes the baseline
    used[0] += 1000
    _memory.at_boundary()
    assert calls == []  # grown by the threshold, not past it
    used[0] += 1
    _memory.at_boundary()
    assert calls == [1]
    _memory.at_boundary()
    assert calls == [1]  # the baseline moved to after the collection


def test_a_first_collection_before_any_baseline_takes_it(monkeypatch, calls):
    used = [1_000_000]
    monkeypatch.setattr(_memory, "_memory_now", lambda fresh=False: used[0])
    # Due by the bytes handed to R before any reading took the
    # baseline: the collection takes it.
    _memory.handed_to_r(keras.ops.ones((300,)))  # 1,200 bytes
    _memory.at_boundary()
    assert calls == [1]
    used[0] += 1000
    _memory.at_boundary()
    assert calls == [1]  # grown by the threshold from there, not past it
    used[0] += 1
    _memory.at_boundary()
    assert calls == [1, 1]


def test_the_memory_count_is_the_devices_where_the_backend_has_one(monkeypatch):
    adapter = _memory._backend.adapter()
    monkeypatch.setattr(adapter, "device_memory_in_use", lambda: lambda: 12345)
    monkeypatch.setattr(_memory, "_glibc_in_use", lambda: lambda: 99)
    assert _memory._find_memory_reader()() == 12345


def test_without_a_device_count_glibc_stands_in_or_nothing(monkeypatch):
    adapter = _memory._backend.adapter()
    monkeypatch.setattr(adapter, "device_memory_in_use", lambda: None)
    monkeypatch.setattr(_memory, "_glibc_in_use", lambda: lambda: 99)
    assert _memory._find_memory_reader()() == 99
    # macOS, Windows: no glibc
    monkeypatch.setattr(_memory, "_glibc_in_use", lambda: None)
    assert _memory._find_memory_reader() is None


def test_glibc_is_read_where_it_is_there():
    import sys

    reader = _memory._glibc_in_use()
    if sys.platform.startswith("linux") and reader is not None:
        assert reader() > 0
    else:
        assert reader is None


class FakeR:
    """R's references to Python objects: kept until R's collector runs
    (``collect``), as a loop's old results are garbage only to R."""

    def __init__(self):
        self.held, self.calls = [], []

    def collect(self):
        self.calls.append("minor")
        self.held.clear()


@pytest.mark.parametrize("device", [False, True])
def test_the_bound_holds_without_any_platform_probe(monkeypatch, device):
    # No glibc, no /proc (macOS, Windows); with a device allocator (a GPU)
    # or without one (a CPU on JAX or PyTorch). R holds a loop's results
    # until it collects: bytes handed to R bound them, and the device's
    # count bounds the temporaries customgrad never saw.
    fake, r = FakeDevice(), FakeR()
    adapter = _memory._backend.adapter()
    monkeypatch.setattr(
        adapter, "device_memory_in_use", lambda: (lambda: fake.used) if device else None
    )
    monkeypatch.setattr(_memory, "_glibc_in_use", lambda: None)
    monkeypatch.setattr(_memory, "_reader", [])
    # read at every call: the loop runs faster than the throttle's interval
    monkeypatch.setattr(_memory, "_at_most_every", lambda m, s: lambda fresh=False: m())
    threshold = 40_000
    _memory.set_collector(r.collect, threshold)
    x = keras.ops.ones((1000,))  # 4,000 bytes
    for _ in range(200):
        _memory.at_boundary()  # a custom-gradient call starts
        result = fake.track(keras.ops.exp(x))
        r.held.append(_memory.handed_to_r(result))
        # keras3's op_*() from R: never handed through customgrad
        r.held.append(fake.track(keras.ops.add(x, 1.0)))
    assert r.calls  # collections ran
    if device:
        # both counts: the device's passes the threshold first
        assert fake.peak <= threshold + 3 * 8000
    else:
        # the bytes handed to R alone: the untracked temporaries as many
        assert fake.peak <= 2 * threshold + 3 * 8000


def test_no_collection_off_the_main_thread(calls):
    _memory.handed_to_r(keras.ops.ones((1000,)))
    worker = threading.Thread(target=_memory.at_boundary)
    worker.start()
    worker.join()
    assert calls == []  # R can't run there
    _memory.at_boundary()
    assert calls == [1]


def test_calls_from_python_collect_when_due(calls):
    # R may hold tensors of the code around a call from Python (a loop of
    # jax$grad() run from R): the call collects them when due.
    import customgrad
    from test_adapters import log1pexp_forward

    h = customgrad.custom_gradient(log1pexp_forward)
    _memory.handed_to_r(keras.ops.ones((1000,)))
    h(keras.ops.convert_to_tensor([1.0]))
    assert calls == [1]


def test_the_device_count_sees_a_new_tensor():
    reader = _memory._backend.adapter().device_memory_in_use()
    if reader is None:
        # PyTorch counts nothing on a CPU, nor TensorFlow without its
        # allocator's statistics; JAX counts its live arrays there.
        assert keras.config.backend() != "jax"
        return
    before = reader()
    x = keras.ops.ones((1_000_000,))
    # 4,000,000 bytes, less small arrays of earlier tests freed meanwhile
    # (584 bytes were, once).
    assert reader() - before > 3_990_000
    del x


class _FakeGPU:
    """A device whose allocator reports 4,242 bytes in use."""

    device = "cuda:0"

    def memory_stats(self):
        return {"bytes_in_use": 4242}


@pytest.mark.backend("torch")
def test_torch_reads_its_gpu_allocator(monkeypatch):
    import torch

    adapter = _memory._backend.adapter()
    monkeypatch.setattr(keras.ops, "zeros", lambda shape: _FakeGPU())
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: 4242)
    assert adapter.device_memory_in_use()() == 4242


@pytest.mark.backend("jax")
def test_jax_reads_its_gpu_allocator(monkeypatch):
    import jax

    adapter = _memory._backend.adapter()
    monkeypatch.setattr(jax, "local_devices", lambda: [_FakeGPU()])
    assert adapter.device_memory_in_use()() == 4242


@pytest.mark.backend("tensorflow")
def test_tensorflow_reads_its_gpu_allocator(monkeypatch):
    import tensorflow as tf

    adapter = _memory._backend.adapter()
    monkeypatch.setattr(tf.config, "list_logical_devices", lambda kind: ["GPU:0"])
    monkeypatch.setattr(
        tf.config.experimental,
        "get_memory_info",
        lambda device: {"current": 4242 if device == "GPU:0" else 0},
    )
    assert adapter.device_memory_in_use()() == 4242


@pytest.fixture
def told():
    """The times R was told to collect before its next call."""
    return []


@pytest.fixture
def bytes_only(monkeypatch, told):
    """Collections due by the bytes handed to R alone, over a threshold of
    1,000 bytes: the list of minor collections run."""
    monkeypatch.setattr(_memory, "_memory_now", lambda fresh=False: None)
    calls = []
    _memory.set_collector(minor_collections(calls), 1000, lambda: told.append(1))
    return calls


def test_a_rule_collects_when_due_and_calls_after_it_leave_that_to_rules(
    bytes_only,
):
    _memory.handed_to_r(keras.ops.ones((400,)))  # 1,600 bytes: due
    _memory.at_backward()
    assert bytes_only == [1]
    _memory.handed_to_r(keras.ops.ones((400,)))
    _memory.at_boundary()
    assert bytes_only == [1]  # left to the next rule
    _memory.at_backward()
    assert bytes_only == [1, 1]


def test_a_call_whose_rule_never_comes_collects_at_twice_the_threshold(
    bytes_only,
):
    _memory.at_backward()  # a rule ran, nothing due
    _memory.handed_to_r(keras.ops.ones((400,)))  # 1,600 bytes
    _memory.at_boundary()
    assert bytes_only == []
    _memory.handed_to_r(keras.ops.ones((200,)))  # 2,400 bytes
    _memory.at_boundary()
    assert bytes_only == [1]
    # No rule since then: the start of a call collects again.
    _memory.handed_to_r(keras.ops.ones((400,)))
    _memory.at_boundary()
    assert bytes_only == [1, 1]


def test_a_rule_off_rs_thread_leaves_the_collection_to_the_next_call(
    bytes_only,
):
    _memory.handed_to_r(keras.ops.ones((400,)))  # due
    thread = threading.Thread(target=_memory.at_backward)
    thread.start()
    thread.join()
    assert bytes_only == []
    _memory.at_boundary()  # no rule ran on R's thread
    assert bytes_only == [1]


def test_rules_inside_a_call_from_r_leave_the_collection_to_r(bytes_only, told):
    calls = bytes_only
    x = keras.ops.ones((400,))
    _memory.handed_to_r(x)  # 1,600 bytes: due

    def call(v):
        _memory.at_backward()  # the rule of a gradient R asked for
        return v

    assert _memory.call_from_r(call, x) is x
    assert (calls, told) == ([], [1])  # R collects before its next call
    _memory.collect_deferred()
    assert calls == [1]
    # Such rules do not take the collections from the calls' starts.
    _memory.handed_to_r(keras.ops.ones((400,)))
    _memory.at_boundary()
    assert calls == [1, 1]


def test_calls_from_r_keep_their_own_rule_after_a_rule_ran(bytes_only, told):
    calls = bytes_only
    _memory.at_backward()  # a rule ran, nothing due
    _memory.handed_to_r(keras.ops.ones((400,)))  # 1,600 bytes: due
    _memory.at_boundary(from_r=True)
    assert (calls, told) == ([], [1])
    # R did not collect before the next due call from R: it collects.
    _memory.at_boundary(from_r=True)
    assert calls == [1]


def test_a_traced_rule_takes_the_collections_from_the_calls_starts(bytes_only, told):
    calls = bytes_only
    assert not _memory.rule_traced()  # nothing due: the rule needs no callback
    _memory.handed_to_r(keras.ops.ones((400,)))  # 1,600 bytes: due
    _memory.at_boundary()
    assert calls == []  # left to the rule
    assert _memory.rule_traced()  # due: the rule is to collect
    _memory.at_backward()  # its callback, in the backward pass
    assert calls == [1]
    # Inside a call from R the rule leaves it to R, before R's next call.
    _memory.handed_to_r(keras.ops.ones((400,)))
    assert _memory.call_from_r(lambda: _memory.rule_traced()) is False
    assert (calls, told) == ([1], [1])


@pytest.mark.backend("jax")
def test_jax_runs_a_due_collection_in_the_eager_backward_pass(monkeypatch):
    import jax
    import customgrad
    from test_adapters import log1pexp_forward

    # Whether the step's forward code had returned at each collection.
    returned, seen = [False], []
    monkeypatch.setattr(_memory, "_memory_now", lambda fresh=False: None)
    _memory.set_collector(lambda: seen.append(returned[0]), 1000)
    h = customgrad.custom_gradient(log1pexp_forward)

    def loss(v):
        returned[0] = False
        out = keras.ops.sum(h(v))
        returned[0] = True
        return out

    x = keras.ops.convert_to_tensor([0.0, 1.0])
    for _ in range(2):
        _memory.handed_to_r(keras.ops.ones((400,)))  # due
        g = jax.grad(loss)(x)
    # The first step collects at the call's start (no rule traced yet),
    # the second in the backward pass.
    assert seen == [False, True]
    assert keras.ops.convert_to_numpy(g) == pytest.approx([0.5, 0.7310586])
    # Traced under jit, JAX runs the rule where R can't be told: none.
    _memory.handed_to_r(keras.ops.ones((400,)))
    assert "callback" not in str(jax.make_jaxpr(jax.grad(loss))(x))
