"""Custom-gradient functions that call themselves, in f and in grad,
with Python stand-ins for R's callbacks (see test_adapters)."""

import sys

import keras
import numpy as np
import pytest

import customgrad

from test_adapters import BACKEND, grad_of, reply


def grad_grad_of(fn, x):
    """The second derivative of sum(fn(x)) with the backend's autodiff."""
    x = keras.ops.convert_to_tensor(np.asarray(x, "float32"))
    if BACKEND == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = keras.ops.sum(fn(x))
            g = inner.gradient(y, x)
        return np.asarray(outer.gradient(g, x))
    if BACKEND == "jax":
        import jax

        first = jax.grad(lambda t: keras.ops.sum(fn(t)))
        return np.asarray(jax.grad(lambda t: keras.ops.sum(first(t)))(x))
    import torch

    x = x.detach().requires_grad_(True)
    (g,) = torch.autograd.grad(keras.ops.sum(fn(x)), x, create_graph=True)
    (gg,) = torch.autograd.grad(keras.ops.sum(g), x)
    return gg.numpy()


def make_cube(trace):
    """x^3 as x * (x * x), each level a call of the function itself, the
    depth kept in Python state as R would keep it; grad uses the inner
    level's value, so second derivatives go through the inner levels'
    gradients."""
    state = {"depth": 0, "calls": 0}
    h = None

    def forward(x, **hints):
        state["depth"] += 1
        state["calls"] += 1
        try:
            k = state["depth"]
            if k == 3:
                return reply(x * 1.0, lambda upstream, variables: [upstream])
            inner = h(x)

            def grad(upstream, variables):
                return [upstream * (4.0 - k) * inner]

            return reply(x * inner, grad)
        finally:
            state["depth"] -= 1

    h = customgrad.custom_gradient(forward, trace=trace)
    return h, state


def make_selfexp(trace):
    """exp, whose gradient is written with the function itself."""
    state = {"calls": 0}
    h = None

    def forward(x, **hints):
        state["calls"] += 1
        e = keras.ops.exp(x)
        return reply(e, lambda upstream, variables: [upstream * h(x)])

    h = customgrad.custom_gradient(forward, trace=trace)
    return h, state


@pytest.mark.parametrize("trace", [True, False])
@pytest.mark.parametrize(
    "make, derivatives, max_calls",
    [
        # f calling itself three levels deep: x^3
        (make_cube, (lambda x: x**3, lambda x: 3 * x**2, lambda x: 6 * x), None),
        # grad calling the function itself: exp; a trace of the eager
        # signature and one of the symbolic one, whose grad's own call is
        # that trace again
        (make_selfexp, (np.exp, np.exp, np.exp), 4),
    ],
    ids=["f_calling_itself", "grad_calling_itself"],
)
def test_recursive_functions_native_derivatives(make, derivatives, max_calls, trace):
    h, state = make(trace)
    x = np.float32([1.5, -2.0])
    value, first, second = derivatives
    y = keras.ops.convert_to_numpy(h(keras.ops.convert_to_tensor(x)))
    np.testing.assert_allclose(y, value(x), rtol=1e-6)
    (g,) = grad_of(h, x)
    np.testing.assert_allclose(g, first(x), rtol=1e-6)
    np.testing.assert_allclose(grad_grad_of(h, x), second(x), rtol=1e-6)
    if trace:
        calls = state["calls"]
        assert max_calls is None or calls <= max_calls
        grad_of(h, x)
        h(keras.ops.convert_to_tensor(x))
        assert state["calls"] == calls  # replayed, without R
        # The nested levels were traced inside it: not cached by signature.
        assert h.core.n_cached <= 2


def test_a_trace_never_replays_itself():
    h, _ = make_cube(True)
    x = keras.ops.convert_to_tensor(np.float32([2.0]))
    h(x)
    (entry,) = h.core.cache.values()
    steps = entry.compiled.forward.steps
    bound = [
        getattr(step.fn, "__self__", None) for step in steps
    ]  # fmt: skip
    bound = [op.entry for op in bound if hasattr(op, "entry")]
    assert bound and all(e is not entry for e in bound)


@pytest.mark.parametrize("trace", [True, False])
def test_endless_recursion_stops_before_pythons_limit(trace, monkeypatch):
    """Where R can't measure its stack, nesting stops while Python still has
    frames for the error to unwind through: RecursionLimitError, never
    Python's own RecursionError."""
    from customgrad import _trace
    from customgrad.errors import RecursionLimitError

    monkeypatch.setattr(_trace, "MAX_DEPTH", 10_000)  # Python's limit decides
    h = None

    def forward(x, **hints):
        return reply(h(x), lambda upstream, variables: [upstream])

    h = customgrad.custom_gradient(forward, trace=trace)
    with pytest.raises(RecursionLimitError) as caught:
        h(keras.ops.convert_to_tensor(np.float32([1.0])))
    details = caught.value.details
    assert details["python_limit"] == sys.getrecursionlimit()
    assert details["depth"] > _trace._COUNT_FROM
    assert _trace.nesting_depth() == 0
