"""op_grad()'s traced functions: R's f (here a Python stand-in) runs once
per signature, then the replay runs under the backend's autodiff."""

import keras
import numpy as np
import pytest

from customgrad import _autodiff, _messages
from customgrad._traced_function import TracedFunction
from customgrad.errors import NotScalarError, TraceError


class CountedF:
    """A stand-in for R's f: sum(x^3), counting its calls; ``fail`` makes
    it reply trace-failed while traced."""

    def __init__(self, fail=False):
        self.calls = 0
        self.fail = fail

    def __call__(self, x, tracing=False):
        self.calls += 1
        if tracing and self.fail:
            return {_messages.TRACE_FAILED: "It read a value."}
        return keras.ops.sum(x * x * x)


@pytest.fixture(autouse=True)
def no_programs_compiled_before():
    # Which programs compiled at a first call is process-wide: each test
    # starts as a fresh process would.
    _autodiff._compiled_kinds.clear()


def grad(fn, x):
    call = _autodiff.value_and_grad(fn, positions=[1])
    out = call(None, keras.ops.convert_to_tensor(x))
    return keras.ops.convert_to_numpy(out["grad"][0])


def test_a_trace_with_an_unknown_dimension_serves_every_size_there():
    f = CountedF()
    traced = TracedFunction(f)
    spec = traced.output_spec(keras.KerasTensor((None,), "float32"))
    assert spec.shape == () and f.calls == 1
    for x in ([1.0, 2.0], [3.0, -1.0, 0.5]):
        np.testing.assert_allclose(grad(traced, x), 3 * np.square(x), rtol=1e-6)
    assert f.calls == 1


def test_a_failed_trace_gives_each_calls_own_values():
    # R runs at every call: nothing of one call's values is kept (compiled).
    traced = TracedFunction(CountedF(fail=True))
    for x in ([2.0], [1.0], [-3.0], [0.5]):
        np.testing.assert_allclose(grad(traced, x), 3 * np.square(x), rtol=1e-6)


class CountedReplays(TracedFunction):
    """A traced function counting the Python runs of its replay."""

    runs = 0

    def __call__(self, *args):
        self.runs += 1
        return super().__call__(*args)


@pytest.mark.backend("tensorflow", "jax")
def test_a_replay_runs_compiled():
    f = CountedF()
    traced = CountedReplays(f)
    call = _autodiff.value_and_grad(traced, positions=[1])
    cubes = CountedReplays(lambda v, tracing=False: v * v * v)
    vjp = _autodiff.value_and_grad(cubes, positions=[1])
    upstream = keras.ops.convert_to_tensor([2.0, 0.5])
    for x in ([1.0, 2.0], [3.0, -1.0], [0.5, 4.0], [-2.0, 1.0]):
        t = keras.ops.convert_to_tensor(x)
        out = call(None, t)
        np.testing.assert_allclose(out["grad"][0], 3 * np.square(x), rtol=1e-6)
        np.testing.assert_allclose(out["value"], np.sum(np.power(x, 3)), rtol=1e-6)
        out = vjp(upstream, t)
        np.testing.assert_allclose(
            out["grad"][0], np.array([2.0, 0.5]) * 3 * np.square(x), rtol=1e-6
        )
    assert f.calls == 1
    if keras.config.backend() == "jax":
        # The first call traced f and compiled: the compiler's trace ran the
        # replay; every call ran the compiled program.
        assert (traced.runs, cubes.runs) == (1, 1)
    else:
        # The first call traced f and replayed eagerly; the compiler's trace
        # ran the replay once more; the other calls ran the compiled program.
        assert (traced.runs, cubes.runs) == (2, 2)


@pytest.mark.backend("jax")
def test_a_function_made_anew_runs_its_first_call_eagerly():
    # op_grad(loss)(w, x) in a loop: each new function's programs are those
    # compiled before, so its first call runs eagerly rather than compile
    # again; its second compiles; a function of other code compiles at once.
    x = keras.ops.convert_to_tensor([1.0, 2.0])
    runs = []
    for _ in range(3):
        traced = CountedReplays(CountedF())
        call = _autodiff.value_and_grad(traced, positions=[1])
        out = call(None, x)
        np.testing.assert_allclose(out["grad"][0], [3.0, 12.0], rtol=1e-6)
        runs.append(traced.runs)
    # Once each: in the compiler's trace the first time, eagerly after.
    assert runs == [1, 1, 1]
    for _ in range(2):
        out = call(None, x)
    np.testing.assert_allclose(out["grad"][0], [3.0, 12.0], rtol=1e-6)
    assert traced.runs == 2  # the compiler's trace, then the compiled program
    squares = CountedReplays(lambda v, tracing=False: keras.ops.sum(v * v))
    call = _autodiff.value_and_grad(squares, positions=[1])
    for _ in range(3):
        out = call(None, x)
    np.testing.assert_allclose(out["grad"][0], [2.0, 4.0], rtol=1e-6)
    assert squares.runs == 1


@pytest.mark.backend("tensorflow", "jax")
def test_each_signature_compiles_apart_with_no_retracing_warning(caplog):
    traced = CountedReplays(CountedF())
    call = _autodiff.value_and_grad(traced, positions=[1])
    for n in range(1, 8):
        x = np.linspace(-1.0, 1.0, n)
        for _ in range(3):
            out = call(None, keras.ops.convert_to_tensor(x))
            np.testing.assert_allclose(out["grad"][0], 3 * np.square(x), rtol=1e-5)
    # Each signature's compiler's trace ran the replay, and on TensorFlow
    # its eager first call (JAX compiles from the first).
    assert traced.runs == (1 if keras.config.backend() == "jax" else 2) * 7
    assert not [r for r in caplog.records if "retracing" in r.getMessage()]


@pytest.mark.backend("jax")
def test_a_replay_jax_cant_compile_runs_eagerly_at_every_call():
    # nonzero()'s output shape depends on the values: jax.jit refuses it.
    def f(x, tracing=False):
        return keras.ops.sum(keras.ops.take(x, keras.ops.nonzero(x > 0)[0]) ** 2)

    traced = CountedReplays(f)
    call = _autodiff.value_and_grad(traced, positions=[1])
    for x in ([1.0, -2.0, 3.0], [-1.0, 2.0, 0.5], [4.0, 4.0, -4.0]):
        out = call(None, keras.ops.convert_to_tensor(x))
        x = np.array(x)
        np.testing.assert_allclose(out["grad"][0], 2 * x * (x > 0), rtol=1e-6)
        np.testing.assert_allclose(out["value"], np.sum(x[x > 0] ** 2), rtol=1e-6)
    # Eagerly at each of the three calls, and once in the refused compile.
    assert traced.runs == 4


def test_a_layer_drawing_on_keras_placeholders_is_replayed():
    # A layer whose output Keras infers by running it on placeholders
    # draws there, in a stateless scope: not a draw the trace keeps.
    # (A seed generator: JAX's placeholders refuse unseeded draws.)
    generator = keras.random.SeedGenerator(3)
    scaled = keras.layers.Lambda(
        lambda v: v * keras.random.uniform(keras.ops.shape(v), seed=generator)
    )
    calls = []

    def lambda_layer(x, tracing=False):
        calls.append(1)
        return keras.ops.sum(scaled(x))

    traced = TracedFunction(lambda_layer)
    draws = [grad(traced, [1.0] * 4) for _ in range(3)]
    assert len(calls) == 1
    assert not np.allclose(draws[1], draws[2])


def test_strict_raises_and_false_never_traces():
    with pytest.raises(TraceError):
        grad(TracedFunction(CountedF(fail=True), trace="strict"), [1.0])
    f = CountedF()
    untraced = TracedFunction(f, trace=False)
    grad(untraced, [1.0])
    grad(untraced, [1.0])
    assert f.calls == 2 and untraced.n_cached == 0
    # Untraced, an argument not differentiated may be any object (a model).
    scaled = TracedFunction(
        lambda x, model, tracing=False: keras.ops.sum(x * x) * model.scale, trace=False
    )
    model = type("Model", (), {"scale": 3.0})()
    call = _autodiff.value_and_grad(scaled, positions=[1], wrt=[0])
    for _ in range(2):
        out = call(None, keras.ops.convert_to_tensor([1.0, 2.0]), model)
        np.testing.assert_allclose(out["grad"][0], [6.0, 12.0], rtol=1e-6)


class RaisesWhileTraced(CountedF):
    """R's f raising one of customgrad's errors on symbolic tensors."""

    def __call__(self, x, tracing=False):
        self.calls += 1
        if isinstance(x, keras.KerasTensor):
            raise NotScalarError(shapes=["(2)"])
        return keras.ops.sum(x * x * x)


def test_an_error_r_raises_while_traced_is_raised_at_once_and_not_kept():
    # As for custom-gradient functions (one engine): R replies trace-failed
    # for what can't be traced; what it raises is meant.
    told = []
    f = RaisesWhileTraced()
    traced = TracedFunction(f, notify=told.append)
    for _ in range(2):
        with pytest.raises(NotScalarError):
            grad(traced, [2.0])
    assert f.calls == 2 and traced.n_cached == 0 and told == []
