"""Custom-gradient functions that call themselves, in f and in grad,
with Python stand-ins for R's callbacks (see test_adapters)."""

import keras
import numpy as np
import pytest

import customgrad
from customgrad import _trace
from customgrad.errors import RecursionLimitError

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


@pytest.mark.parametrize("trace", [True, False])
def test_f_calling_itself_three_levels(trace):
    h, state = make_cube(trace)
    x = [1.5, -2.0]
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(h(keras.ops.convert_to_tensor(np.float32(x)))),
        np.power(x, 3),
        rtol=1e-6,
    )
    (g,) = grad_of(h, x)
    np.testing.assert_allclose(g, 3 * np.square(x), rtol=1e-6)
    np.testing.assert_allclose(grad_grad_of(h, x), 6 * np.asarray(x), rtol=1e-6)
    if trace:
        calls = state["calls"]
        grad_of(h, x)
        h(keras.ops.convert_to_tensor(np.float32(x)))
        assert state["calls"] == calls  # replayed, without R
        # The nested levels were traced inside it: not cached by signature.
        assert h.core.n_cached <= 2


def make_selfexp(trace):
    """exp, whose gradient is written with the function itself."""
    runs = {"f": 0}
    h = None

    def forward(x, **hints):
        runs["f"] += 1
        e = keras.ops.exp(x)
        return reply(e, lambda upstream, variables: [upstream * h(x)])

    h = customgrad.custom_gradient(forward, trace=trace)
    return h, runs


@pytest.mark.parametrize("trace", [True, False])
def test_grad_calling_itself(trace):
    h, runs = make_selfexp(trace)
    x = [0.0, 1.0]
    (g,) = grad_of(h, x)
    np.testing.assert_allclose(g, np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(grad_grad_of(h, x), np.exp(x), rtol=1e-6)
    if trace:
        # A trace of the eager signature and one of the symbolic one, whose
        # grad's own call is that trace again.
        assert runs["f"] <= 4


def test_a_trace_never_replays_itself():
    h, state = make_cube(True)
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
def test_unbounded_recursion_is_a_recursion_error(trace, monkeypatch):
    monkeypatch.setattr(_trace, "MAX_DEPTH", 5)
    h = None

    def forward(x, **hints):
        return reply(h(x), lambda upstream, variables: [upstream])

    h = customgrad.custom_gradient(forward, trace=trace)
    with pytest.raises(Exception) as info:
        h(keras.ops.convert_to_tensor(np.float32([1.0])))
    found = customgrad.find_error(info.value)
    assert isinstance(found, RecursionLimitError)
    assert found.details == {"depth": 6, "limit": 5}
    assert _trace._depth[0] == 0
    # The next call works.
    def double(x, **hints):
        return reply(x * 2.0, lambda upstream, variables: [upstream * 2.0])

    ok = customgrad.custom_gradient(double, trace=trace)
    (g,) = grad_of(ok, [1.0])
    np.testing.assert_allclose(g, [2.0])


@pytest.mark.parametrize("trace", [True, False])
def test_grad_calling_itself_on_growing_inputs(trace, monkeypatch):
    # Traced, each level's grad is traced with its f, without end: the
    # signature falls back to running the stand-in for R at every call,
    # where grad's call only runs forward, as untraced.
    monkeypatch.setattr(_trace, "MAX_DEPTH", 8)
    h = None

    def forward(x, **hints):
        def grad(upstream, variables):
            return [upstream * keras.ops.sum(h(keras.ops.concatenate([x, x])))]

        return reply(x * 2.0, grad)

    reasons = []
    h = customgrad.custom_gradient(forward, trace=trace, notify=reasons.append)
    (g,) = grad_of(h, [1.0, 2.0])
    np.testing.assert_allclose(g, [12.0, 12.0])
    assert len(reasons) == (1 if trace else 0)
    assert _trace._depth[0] == 0
