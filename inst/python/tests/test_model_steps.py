"""A model's compiled steps holding host ops (``_model_steps``): on
TensorFlow run where the main thread serves them, nothing changed for a
model without them, and a failure of ``f`` / ``grad`` classed as such."""

import threading

import keras
import numpy as np
import pytest

import customgrad
from customgrad import _model_steps
from customgrad.errors import RConditionError, ThreadError, WeightsLostError, find_error
from customgrad.layers import CustomGradient
from test_adapters import reply

X = np.linspace(0.5, 2.0, 32, dtype="float32").reshape(-1, 1)
Y = 1.3**3 * X**3


def cube(threads, fail=None):
    """x^3 with the rule 3 x^2, read as NumPy values (as R reads them);
    ``threads`` records where it runs; ``fail``, a list: where it holds "f"
    or "grad", that raises a stand-in for an R error (reticulate's
    exception has ``r_class``); "stop", an interrupt of R."""
    fail = [] if fail is None else fail

    def forward(x, tracing=False, **options):
        threads.append(threading.current_thread() is threading.main_thread())
        xv = keras.ops.convert_to_numpy(x)  # fails on symbolic tensors
        if "f" in fail:
            raise _r_error("boom in f")
        if "stop" in fail:
            raise KeyboardInterrupt

        def grad(upstream, variables):
            threads.append(threading.current_thread() is threading.main_thread())
            if "grad" in fail:
                raise _r_error("boom in grad")
            return [upstream * keras.ops.convert_to_tensor(3 * xv**2)]

        return reply(keras.ops.convert_to_tensor(xv**3), grad)

    return customgrad.custom_gradient(forward, trace=False, value_like=lambda x: x)


def _r_error(message):
    exc = RuntimeError(message)
    exc.r_class = "a capsule"
    return exc


def model_of(fn, **compile_options):
    inputs = keras.Input((1,))
    dense = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")
    model = keras.Model(inputs, CustomGradient(fn)(dense(inputs)))
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse", **compile_options)
    return model


@pytest.mark.backend("tensorflow")
def test_tensorflow_refuses_a_host_op_in_an_unserved_compiled_step():
    model = model_of(cube([]))
    with pytest.raises(Exception) as info:
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0)
    found = find_error(info.value)
    assert isinstance(found, ThreadError) and found.details["host"] == "staged"


@pytest.mark.backend("tensorflow")
def test_a_model_served_after_its_refused_fit_trains():
    # What the refusal's message says to do: the refused trace was the step's
    # first, and TensorFlow refuses variables in any later one.
    model = model_of(cube([]))
    with pytest.raises(Exception):
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0)
    _model_steps.serve_steps(model)
    model.fit(X, Y, batch_size=8, epochs=30, verbose=0)
    w = float(keras.ops.convert_to_numpy(model.weights[0])[0, 0])
    assert w == pytest.approx(1.3, abs=0.02)


def test_a_served_model_trains_evaluates_and_predicts_with_r_on_the_main_thread():
    threads = []
    model = _model_steps.serve_steps(model_of(cube(threads)))
    model.fit(X, Y, batch_size=8, epochs=30, verbose=0)
    w = float(keras.ops.convert_to_numpy(model.weights[0])[0, 0])
    assert w == pytest.approx(1.3, abs=0.02)
    loss = model.evaluate(X, Y, batch_size=8, verbose=0)
    np.testing.assert_allclose(loss, np.mean((w**3 * X**3 - Y) ** 2), rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(
        model.predict(X, batch_size=8, verbose=0), (w * X) ** 3, rtol=1e-5
    )
    # f and grad ran, on the main thread only.
    assert threads and all(threads)


@pytest.mark.backend("tensorflow")
def test_tensorflow_steps_more_than_one_per_execution_and_no_xla():
    threads = []
    model = _model_steps.serve_steps(model_of(cube(threads), steps_per_execution=3))
    history = model.fit(X, Y, batch_size=8, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2 and threads and all(threads)
    model = _model_steps.serve_steps(model_of(cube([]), jit_compile=True))
    with pytest.raises(Exception) as info:
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0)
    found = find_error(info.value)
    assert isinstance(found, ThreadError) and found.details["host"] == "xla"


@pytest.mark.backend("tensorflow")
def test_a_served_step_without_host_ops_runs_on_the_calling_thread():
    inputs = keras.Input((1,))
    seen = []

    class Where(keras.layers.Layer):
        def call(self, x):
            seen.append(threading.current_thread().name)
            return x

    model = keras.Model(inputs, Where()(keras.layers.Dense(1)(inputs)))
    model.compile(optimizer="sgd", loss="mse")
    _model_steps.serve_steps(model)
    model.fit(X, Y, batch_size=8, epochs=2, verbose=0)
    assert seen and "customgrad-serve" not in seen


@pytest.mark.backend("tensorflow")
def test_a_served_step_is_traced_on_the_callers_thread_with_its_keras_state():
    seen = []

    class Policy(keras.layers.Layer):
        def call(self, x):
            seen.append((threading.current_thread().name, keras.config.dtype_policy().name))
            return x

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        threads = []
        inputs = keras.Input((1,))
        dense = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")
        outputs = CustomGradient(cube(threads))(Policy()(dense(inputs)))
        model = _model_steps.serve_steps(keras.Model(inputs, outputs))
        model.compile(optimizer="sgd", loss="mse")
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0)
        model.evaluate(X, Y, batch_size=8, verbose=0)
        # 32 samples in batches of 12: a last batch of another size.
        out = model.predict(X, batch_size=12, verbose=0)
    finally:
        keras.config.set_dtype_policy(previous)
    assert out.dtype == np.float16 and threads and all(threads)
    assert len(seen) >= 3
    assert set(seen) == {(threading.main_thread().name, "mixed_float16")}


@pytest.mark.parametrize("where", ["f", "grad"])
def test_an_error_of_f_or_grad_stops_fit_classed_as_such(where):
    # PyTorch runs f while Keras builds the model: it fails from then on.
    fail = []
    model = _model_steps.serve_steps(model_of(cube([], fail=fail)))
    fail.append(where)
    with pytest.raises(RConditionError) as info:
        model.fit(X, Y, batch_size=8, epochs=1, verbose=0)
    assert type(info.value).__name__ == f"customgrad_error_{where}"
    assert str(info.value) == f"boom in {where}"
    assert info.value.r_class == "a capsule"


@pytest.mark.parametrize("method", ["fit", "predict"])
def test_an_interrupt_in_r_stops_a_step_as_an_interrupt(method):
    # JAX's runtime reports a callback's interrupt as its XlaRuntimeError.
    fail = []
    model = _model_steps.serve_steps(model_of(cube([], fail=fail)))
    fail.append("stop")
    data = (X, Y) if method == "fit" else (X,)
    with pytest.raises(KeyboardInterrupt):
        getattr(model, method)(*data, batch_size=8, verbose=0)


def test_an_r_error_of_another_layer_keeps_its_class():
    armed = []

    class Failing(keras.layers.Layer):
        # As a layer_lambda() of an R function that fails: not a custom
        # gradient's f.
        def call(self, x):
            if armed:
                raise _r_error("lambda failed")
            return x

    inputs = keras.Input((1,))
    model = keras.Model(inputs, Failing()(inputs))
    model.compile(optimizer="sgd", loss="mse")
    _model_steps.serve_steps(model)
    armed.append(True)
    with pytest.raises(Exception) as info:
        model.predict(X, batch_size=8, verbose=0)
    assert not isinstance(info.value, RConditionError)
    assert find_error(info.value).r_class == "a capsule"


@pytest.mark.backend("tensorflow")
def test_the_on_batch_methods_are_served_too():
    threads = []
    model = _model_steps.serve_steps(model_of(cube(threads)))
    before = model.predict_on_batch(X[:8])
    loss = model.train_on_batch(X[:8], Y[:8])
    w = float(keras.ops.convert_to_numpy(model.weights[0])[0, 0])
    assert w != 1.0
    np.testing.assert_allclose(loss, np.mean((X[:8] ** 3 - Y[:8]) ** 2), rtol=1e-4)
    np.testing.assert_allclose(before, X[:8] ** 3, rtol=1e-5)
    # Keras 3.14 keeps train_on_batch()'s loss in the mean test_on_batch()
    # reports; 3.15 resets it.
    model.reset_metrics()
    np.testing.assert_allclose(
        model.test_on_batch(X[:8], Y[:8]), np.mean(((w * X[:8]) ** 3 - Y[:8]) ** 2), rtol=1e-3
    )
    assert threads and all(threads)


@pytest.mark.backend("jax")
@pytest.mark.parametrize("failing", ["fit", "evaluate", "predict"])
def test_a_model_whose_failed_jax_step_lost_its_weights_says_so(failing):
    fail = []
    model = _model_steps.serve_steps(model_of(cube([], fail=fail)))
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0)
    weights = model.get_weights()
    fail.append("f")
    run = {
        "fit": lambda: model.fit(X, Y, batch_size=8, epochs=1, verbose=0),
        "evaluate": lambda: model.evaluate(X, Y, batch_size=8, verbose=0),
        "predict": lambda: model.predict(X, batch_size=8, verbose=0),
    }
    with pytest.raises(RConditionError):
        run[failing]()
    fail.clear()
    for use in run.values():
        with pytest.raises(WeightsLostError):
            use()
    model.set_weights(weights)
    np.testing.assert_allclose(
        model.predict(X, batch_size=8, verbose=0), (weights[0][0, 0] * X) ** 3, rtol=1e-5
    )

