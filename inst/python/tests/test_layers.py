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
    SavedFormatError,
    find_error,
)

from test_trace import Counted, expected_grad
from test_adapters import grad_of, reply


def make_model(function):
    inputs = keras.Input(shape=(3,))
    hidden = keras.layers.Dense(4, kernel_initializer="ones")(inputs)
    hidden = customgrad.layers.CustomGradient(function, function_name="log1pexp")(
        hidden
    )
    return keras.Model(inputs, keras.layers.Dense(1, kernel_initializer="ones")(hidden))


def saved_model(tmp_path):
    model = make_model(customgrad.custom_gradient(Counted()))
    path = str(tmp_path / "model.keras")
    model.save(path)
    return model, path


def assert_replays_log1pexp(replayed, x):
    """``replayed`` gives log1pexp's value and gradient at ``x``."""
    (g,) = grad_of(replayed, x)
    np.testing.assert_allclose(g, expected_grad(x), rtol=1e-5)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(replayed(keras.ops.convert_to_tensor(x))),
        np.logaddexp(0, np.asarray(x, "float32")),
        rtol=1e-5,
    )


def test_a_function_in_custom_objects_is_used(tmp_path):
    _, path = saved_model(tmp_path)
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
    layer = model.layers[2].name
    assert f'layer "{layer}" needs its function `log1pexp`.' in message
    assert "x It was saved without traces that run without it." in message
    assert "custom_objects = list(log1pexp = <function>)" in message
    assert "custom_objects={'log1pexp': <function>}" in message


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


@pytest.mark.parametrize(
    "format, reason, says",
    [
        (_saving.FORMAT + 1, "newer", "saved by a newer customgrad"),
        (_saving.OLDEST_FORMAT - 1, "older", "saved by an older customgrad"),
        ("one", "unknown", "has saved traces of an unknown format"),
    ],
)
def test_traces_of_a_format_not_read_fail_with_the_class(
    tmp_path, format, reason, says
):
    model, path = saved_model(tmp_path)
    tampered = with_trace_format(path, format, str(tmp_path / "tampered.keras"))
    with pytest.raises(SavedFormatError) as info:
        keras.saving.load_model(tampered)
    details = info.value.details
    assert details["reason"] == reason
    assert details["format"] == format
    assert (details["oldest"], details["newest"]) == (
        _saving.OLDEST_FORMAT,
        _saving.FORMAT,
    )
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
