"""Tracing: R's f and grad (here Python stand-ins) run once per signature,
then the compiled programs replay them in Python."""

import keras
import numpy as np
import pytest

import customgrad
from customgrad import _program, _trace
from customgrad._traced_function import TracedFunction

from test_adapters import reply, grad_of


class Counted:
    """A stand-in for R's forward that counts its calls and may read values."""

    def __init__(self, read_value=False):
        self.calls = 0
        self.grad_calls = 0
        self.read_value = read_value

    def __call__(self, x, tracing=False, **hints):
        self.calls += 1
        if self.read_value:
            float(keras.ops.convert_to_numpy(keras.ops.sum(x)))  # fails on symbols
        e = keras.ops.exp(x)

        def grad(upstream, variables):
            self.grad_calls += 1
            return [upstream * (1.0 - 1.0 / (1.0 + e))]

        return reply(keras.ops.log(1.0 + e), grad)


def expected_grad(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, "float32")))


def test_untrace_runs_r_for_every_signature_from_then_on():
    forward = Counted()
    h = customgrad.custom_gradient(forward)
    grad_of(h, [1.0, 2.0])
    grad_of(h, [1.0, 2.0])
    assert (forward.calls, forward.grad_calls) == (1, 1)
    h.core.untrace()  # R saw a captured value change (captures.R)
    for x in ([1.0, 2.0], [0.5]):
        (g,) = grad_of(h, x)
        np.testing.assert_allclose(g, expected_grad(x), rtol=1e-6)
    assert forward.calls == 3 and h.core.traces == 1


def test_value_read_falls_back_and_notifies_once():
    forward = Counted(read_value=True)
    reasons = []
    h = customgrad.custom_gradient(forward, notify=reasons.append)
    for x in ([0.5, 2.0], [1.0, -3.0]):
        (g,) = grad_of(h, x)
        np.testing.assert_allclose(g, expected_grad(x), rtol=1e-6)
    assert len(reasons) == 1
    assert forward.calls == 3  # the failed trace, then once per call


class Noisy(Counted):
    """A stand-in for R's forward adding Keras random noise drawn on a
    shape (``seed``: Keras' seed argument)."""

    def __init__(self, seed=None):
        super().__init__()
        self.seed = seed

    def __call__(self, x, tracing=False, **hints):
        self.calls += 1
        noise = keras.random.uniform(tuple(x.shape), seed=self.seed)
        return reply(keras.ops.add(x, noise), lambda upstream, variables: [upstream])


def test_a_seed_generator_draw_falls_back_and_an_integer_seed_draw_is_traced():
    x = keras.ops.zeros((4,))
    # A seed generator draws through the same function as an unseeded draw:
    # it falls back; an integer seed draws the same numbers at every call,
    # so its trace is kept.
    generator = Noisy(seed=keras.random.SeedGenerator(5))
    customgrad.custom_gradient(generator)(x)
    customgrad.custom_gradient(generator)(x)
    assert generator.calls == 4  # the failed trace, then the call, each
    seeded = Noisy(seed=7)
    h = customgrad.custom_gradient(seeded)
    first = keras.ops.convert_to_numpy(h(x))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(h(x)), first)
    assert seeded.calls == 1


def test_a_random_draw_is_seen_under_a_profiler_too():
    # Draws were counted by a profile hook, which a running profiler
    # (cProfile) switched off: the trace then kept one draw.
    import cProfile

    reasons = []
    forward = Noisy()
    h = customgrad.custom_gradient(forward, notify=reasons.append)
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        x = keras.ops.zeros((4,))
        first, second = (keras.ops.convert_to_numpy(h(x)) for _ in range(2))
    finally:
        profiler.disable()
    assert not np.allclose(first, second)
    assert len(reasons) == 1 and "random" in reasons[0]


def test_what_f_assigns_while_traced_is_assigned():
    # The trace runs in a stateless scope, which keeps assignments: they
    # reach the variable when the trace ends, once per run of f.
    counter = keras.Variable(0.0)
    seen = []

    def f(x, tracing=False):
        counter.assign(counter + 1.0)
        seen.append(float(keras.ops.convert_to_numpy(counter)))
        return keras.ops.sum(x)

    traced = TracedFunction(f, notify=lambda reason: None)
    traced(keras.ops.convert_to_tensor([1.0, 2.0]))
    # The trace (which read the counter: it falls back), then the call.
    assert seen == [1.0, 2.0]
    assert float(keras.ops.convert_to_numpy(counter)) == 2.0


def test_a_trace_begun_in_a_stateless_scope_sees_the_values_it_maps():
    # Keras' JAX training step runs R's function in a stateless scope that
    # maps the variables to this step's values: a value read there is this
    # step's, not one to keep.
    v = keras.Variable(0.0)
    reasons = []

    def f(x, tracing=False):
        return keras.ops.sum(x * keras.ops.exp(v))

    traced = TracedFunction(f, notify=reasons.append)
    x = keras.ops.convert_to_tensor([1.0, 2.0])
    with keras.StatelessScope([(v, 1.0)]):
        inside = keras.ops.convert_to_numpy(traced(x))
    np.testing.assert_allclose(inside, 3.0 * np.e, rtol=1e-6)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(traced(x)), 3.0)
    assert len(reasons) == 1 and "variable" in reasons[0]


def test_nested_args_and_multi_output_ops_compile():
    def forward(x, tracing=False, **hints):
        a, b = keras.ops.split(x, 2)
        y = keras.ops.concatenate([b, a], axis=0)

        def grad(upstream, variables):
            u1, u2 = keras.ops.split(upstream, 2)
            return [keras.ops.concatenate([u2, u1], axis=0)]

        return reply(y * 1.0, grad)

    h = customgrad.custom_gradient(forward)
    x = [1.0, 2.0, 3.0, 4.0]
    out = keras.ops.convert_to_numpy(h(keras.ops.convert_to_tensor(x)))
    np.testing.assert_allclose(out, [3.0, 4.0, 1.0, 2.0])
    (g,) = grad_of(
        lambda t: h(t) * keras.ops.convert_to_tensor([1.0, 2.0, 3.0, 4.0]), x
    )
    np.testing.assert_allclose(g, [3.0, 4.0, 1.0, 2.0])
    assert h.core.traces >= 1 and not any(
        isinstance(e, _trace.Fallback) for e in h.core.cache.values()
    )


def test_a_program_runs_each_kind_of_step():
    from customgrad._program import Program, Step, Nested, Slot

    steps = [
        # a slot, a constant and a keyword argument
        Step(
            lambda a, b, scale=1: (a + b) * scale,
            (None, 2),
            {"scale": 3},
            [(0, 0)],
            False,
            [1],
        ),
        # a list holding slots, and two outputs
        Step(
            lambda pair: [pair[1], pair[0]],
            (Nested([Slot(0), Slot(1)]),),
            {},
            [],
            True,
            [2, 3],
        ),
        # one output, returned in a tuple
        Step(lambda a: (a * 2,), (None,), {}, [(0, 3)], False, [4]),
    ]
    values = [1, None, None, None, None]
    Program(steps, keep=[1, 2, 3, 4]).run(values)
    assert values == [1, 9, 9, 1, 2]
    unchanged = [5]
    Program([], keep=[]).run(unchanged)
    assert unchanged == [5]
    # Slots the steps wrote go once no later step reads them (slot 2 at
    # once: nothing reads it); the input and the kept slot stay.
    values = [1, None, None, None, None]
    Program(steps, keep=[4]).run(values)
    assert values == [1, None, None, None, 2]


def test_graph_from_another_source_is_refused():
    stranger = keras.KerasTensor((1,), "float32")
    with pytest.raises(_program.GraphError):
        _program.compile_programs(
            [keras.KerasTensor((1,), "float32")], [keras.ops.exp(stranger)], [], []
        )
