"""The layer and its saved traces: general traces serve every batch size,
and a saved model replays them without R's f (here a Python stand-in)."""

import json
import pathlib
import zipfile

import keras
import numpy as np
import pytest

import customgrad
import customgrad.layers
from customgrad import _saving
from customgrad.errors import (
    FunctionNotFoundError,
    NotSerializableError,
    SavedFormatError,
    find_error,
)

from test_trace import Counted, expected_grad
from test_adapters import grad_of, reply


def make_model(function):
    inputs = keras.Input(shape=(3,))
    hidden = keras.layers.Dense(4, kernel_initializer="ones")(inputs)
    hidden = customgrad.layers.CustomGradient(function, function_name="log1pexp")(hidden)
    return keras.Model(inputs, keras.layers.Dense(1, kernel_initializer="ones")(hidden))


def assert_replays_log1pexp(replayed, x):
    """``replayed`` gives log1pexp's value and gradient at ``x``."""
    (g,) = grad_of(replayed, x)
    np.testing.assert_allclose(g, expected_grad(x), rtol=1e-5)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(replayed(keras.ops.convert_to_tensor(x))),
        np.logaddexp(0, np.asarray(x, "float32")),
        rtol=1e-5,
    )


def test_a_general_trace_serves_every_batch_size():
    forward = Counted()
    h = customgrad.custom_gradient(forward)
    h.output_spec(keras.KerasTensor((None, 2)))
    assert forward.calls == 1
    for x in ([[0.5, 2.0]], [[1.0, -3.0], [0.0, 1.0], [2.0, 2.0]]):
        (g,) = grad_of(h, x)
        np.testing.assert_allclose(g, expected_grad(x), rtol=1e-6)
    assert forward.calls == 1
    # Another rank is another signature.
    grad_of(h, [1.0, 2.0])
    assert forward.calls == 2


def test_a_trace_round_trips_through_json():
    forward = Counted()
    h = customgrad.custom_gradient(forward)
    h.output_spec(keras.KerasTensor((None, 2)))
    saved = json.loads(json.dumps(_saving.save_traces(h.core)))
    assert len(saved) == 1
    replayed = customgrad.layers.saved_function(saved, "log1pexp", "layer")
    x = [[0.5, 2.0], [3.0, -4.0]]
    assert_replays_log1pexp(replayed, x)
    with pytest.raises(FunctionNotFoundError) as info:
        replayed(keras.ops.convert_to_tensor([1.0, 2.0]))
    assert info.value.details["reason"] == "new_signature"


def test_a_captured_variable_is_not_saved():
    v = keras.Variable(2.0)

    def forward(x, tracing=False, **hints):
        return reply(x * v, lambda upstream, variables: [upstream * v])

    h = customgrad.custom_gradient(forward)
    h.output_spec(keras.KerasTensor((None, 2)))
    assert h.core.n_cached == 1
    assert _saving.save_traces(h.core) == []


def test_a_saved_model_loads_with_its_traces_and_trains(tmp_path):
    model = make_model(customgrad.custom_gradient(Counted()))
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    x = np.random.default_rng(1).normal(size=(10, 3)).astype("float32")
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-6)
    loaded.compile(optimizer="sgd", loss="mse")
    history = loaded.fit(x, x.sum(axis=1), epochs=2, batch_size=4, verbose=0)
    assert all(np.isfinite(history.history["loss"]))


def test_a_function_in_custom_objects_is_used(tmp_path):
    model = make_model(customgrad.custom_gradient(Counted()))
    path = str(tmp_path / "model.keras")
    model.save(path)
    forward = Counted()
    loaded = keras.saving.load_model(
        path, custom_objects={"log1pexp": customgrad.custom_gradient(forward)}
    )
    loaded.predict(np.zeros((2, 3), "float32"), verbose=0)
    assert forward.calls == 1


def test_without_traces_or_function_loading_fails_with_the_class(tmp_path):
    v = keras.Variable(2.0)

    def forward(x, tracing=False, **hints):
        return reply(x * v, lambda upstream, variables: [upstream * v])

    model = make_model(customgrad.custom_gradient(forward))
    path = str(tmp_path / "model.keras")
    model.save(path)
    with pytest.raises(FunctionNotFoundError) as info:
        keras.saving.load_model(path)
    assert info.value.details == {
        "function": "log1pexp",
        "layer": model.layers[2].name,
        "reason": "no_traces",
    }
    # Met where R may not be: Python writes the message, for R and Python.
    message = str(info.value)
    assert 'layer "%s" needs its function `log1pexp`.' % model.layers[2].name in message
    assert "x It was saved without traces that run without it." in message
    assert "custom_objects = list(log1pexp = <function>)" in message
    assert "custom_objects={'log1pexp': <function>}" in message


def test_a_lambda_layer_holding_a_function_refuses_to_save(tmp_path):
    # What R hands Keras for a custom-gradient function (keras3's
    # layer_lambda(log1pexp)): saved, it would name a function that loading
    # can't find.
    h = customgrad.custom_gradient(Counted())
    held = customgrad.held_by_python(h, owner=None)
    inputs = keras.Input(shape=(3,))
    outputs = keras.layers.Lambda(held, name="softplus")(inputs)
    model = keras.Model(inputs, outputs)
    with pytest.raises(NotSerializableError) as info:
        model.save(str(tmp_path / "model.keras"))
    assert info.value.details["layer"] == "softplus"
    # R writes its message (saving happens where R made the function).
    assert str(info.value) == "customgrad_error_not_serializable: layer='softplus'"
    # Elsewhere in a model (a Dense layer's activation), without a layer name.
    with pytest.raises(NotSerializableError) as info:
        keras.layers.Dense(2, activation=held).get_config()
    assert info.value.details["layer"] is None
    # The callable Keras gets for a layer is not refused.
    make_model(h).get_config()


def test_keras_rewrapped_errors_keep_the_class_and_find_the_original():
    original = FunctionNotFoundError(function=None, layer="l", reason="new_signature")
    try:
        try:
            raise original
        except FunctionNotFoundError as exc:
            raise type(exc)("Keras' message") from None
    except FunctionNotFoundError as rewrapped:
        assert rewrapped.details is None
        assert find_error(rewrapped) is original


# --- The format of saved traces ----------------------------------------------

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def with_trace_format(path, format, out):
    """Copy the saved model ``path`` to ``out`` with every saved trace's
    format number set to ``format`` (None: no number, as customgrad 0.1.0
    saved them)."""
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "config.json":
                config = json.loads(data)
                for layer in config["config"]["layers"]:
                    for trace in layer["config"].get("traces", []):
                        trace.pop("format", None)
                        if format is not None:
                            trace["format"] = format
                data = json.dumps(config)
            dst.writestr(item, data)
    return out


def saved_model(tmp_path):
    model = make_model(customgrad.custom_gradient(Counted()))
    path = str(tmp_path / "model.keras")
    model.save(path)
    return model, path


def test_saved_traces_carry_their_format():
    h = customgrad.custom_gradient(Counted())
    h.output_spec(keras.KerasTensor((None, 2)))
    (saved,) = _saving.save_traces(h.core)
    assert saved["format"] == _saving.FORMAT
    assert _saving.format_problem(saved) is None


def test_traces_saved_without_a_format_number_load(tmp_path):
    # customgrad 0.1.0 saved format 1 without its number.
    model, path = saved_model(tmp_path)
    unnumbered = with_trace_format(path, None, str(tmp_path / "unnumbered.keras"))
    loaded = keras.saving.load_model(unnumbered)
    x = np.linspace(-2, 2, 12, dtype="float32").reshape(4, 3)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-6)


@pytest.mark.parametrize(
    "format, reason, says",
    [
        (_saving.FORMAT + 1, "newer", "saved by a newer customgrad"),
        (_saving.OLDEST_FORMAT - 1, "older", "saved by an older customgrad"),
        ("one", "unknown", "has saved traces of an unknown format"),
    ],
)
def test_traces_of_a_format_not_read_fail_with_the_class(tmp_path, format, reason, says):
    model, path = saved_model(tmp_path)
    tampered = with_trace_format(path, format, str(tmp_path / "tampered.keras"))
    with pytest.raises(SavedFormatError) as info:
        keras.saving.load_model(tampered)
    details = info.value.details
    assert details["reason"] == reason
    assert details["format"] == format
    assert (details["oldest"], details["newest"]) == (_saving.OLDEST_FORMAT, _saving.FORMAT)
    assert details["layer"] == model.layers[2].name
    assert says in str(info.value)
    assert "custom_objects={'log1pexp': <function>}" in str(info.value)
    # The function, supplied, stands in for the traces.
    forward = Counted()
    loaded = keras.saving.load_model(
        tampered, custom_objects={"log1pexp": customgrad.custom_gradient(forward)}
    )
    loaded.predict(np.zeros((2, 3), "float32"), verbose=0)
    assert forward.calls == 1


def test_a_trace_saved_by_customgrad_0_1_0_and_keras_3_15_replays():
    # Saved by customgrad 0.1.0 with Keras 3.15.1 (log1pexp, any batch
    # size): a Keras that can't load its operations' configs fails here.
    traces = json.loads((FIXTURES / "log1pexp-traces-0.1.0.json").read_text())
    assert "format" not in traces[0]
    replayed = customgrad.layers.saved_function(traces, "log1pexp", "layer")
    x = [[0.5, 2.0, -1.0, 3.0], [3.0, -4.0, 0.0, 1.0]]
    assert_replays_log1pexp(replayed, x)
