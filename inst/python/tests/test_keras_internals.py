"""Each Keras internal customgrad relies on (``_keras_internals``) exists
and behaves as relied on, on the installed Keras; and no other module of
the package reaches past Keras' public API.

A failure names the internal and the Keras version: that Keras release
changed it, and ``customgrad/_keras_internals.py`` needs updating.
"""

import ast
import contextlib
import pathlib

import keras
import numpy as np
import pytest
from keras import KerasTensor

from customgrad import _keras_internals as ki

_checked = set()


@contextlib.contextmanager
def relied_on(internal, what):
    """Fail with a message naming ``internal`` and the Keras version if the
    block raises (an assertion included)."""
    assert internal in ki.INTERNALS, f"{internal!r} is not in INTERNALS"
    _checked.add(internal)
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - any failure is the message
        raise pytest.fail.Exception(
            f"Keras {ki.keras_version()} changed {internal}, which customgrad "
            f"relies on: {what}.\n  {type(exc).__name__}: {exc}\n"
            "  Update inst/python/customgrad/_keras_internals.py.",
            pytrace=False,
        ) from None


def symbolic(shape=(2, 3), dtype="float32"):
    return KerasTensor(shape, dtype=dtype)


def test_keras_history_names_the_operation_and_its_node():
    x = symbolic()
    y = keras.ops.exp(x)
    with relied_on(
        "KerasTensor._keras_history",
        "a symbolic tensor's `_keras_history` has the `operation` that made "
        "it and the `node_index` of the call; an input's has none, or no "
        "operation",
    ):
        history = y._keras_history
        assert type(history.operation).__name__ == "Exp"
        assert isinstance(history.node_index, int)
        assert getattr(x._keras_history, "operation", None) is None


def test_inbound_nodes_hold_each_call():
    x = symbolic()
    op = keras.ops.exp(x)._keras_history.operation
    with relied_on(
        "Operation._inbound_nodes",
        "`operation._inbound_nodes[node_index]` is the node of the call "
        "that made a tensor",
    ):
        first = op._inbound_nodes[0]
        y = op.symbolic_call(x)
        node = op._inbound_nodes[y._keras_history.node_index]
        assert node is not first
        assert node.outputs == [y]


def test_nodes_hold_the_call():
    x, w = symbolic(), symbolic((3, 3))
    y = keras.ops.concatenate([keras.ops.matmul(x, w), x], axis=0)
    parts = keras.ops.split(symbolic((4, 3)), 2)
    with relied_on(
        "Node.operation / arguments / outputs",
        "a node has its `operation`, `arguments.args`, `arguments.kwargs`, "
        "`arguments.keras_tensors` (the symbolic tensors among them, flat) "
        "and `outputs` (flat)",
    ):
        call = ki.producing_call(y)
        assert type(call.operation).__name__ == "Concatenate"
        (tensors,) = call.args
        assert tensors[1] is x
        assert call.kwargs == {}
        assert len(call.inputs) == 2 and call.inputs[1] is x
        assert call.outputs == [y]
        assert ki.producing_call(x) is None
        # Several outputs: one call, every output listed.
        first, second = (ki.producing_call(p) for p in parts)
        assert first.key == second.key
        assert first.outputs == list(parts)


def test_an_operation_call_is_its_eager_body():
    x = symbolic()
    call = ki.producing_call(keras.ops.power(x, 2.0))
    with relied_on(
        "Operation.call",
        "`operation.call(*args, **kwargs)` computes what `keras.ops` computes "
        "on concrete tensors, with the arguments its node recorded",
    ):
        body = ki.eager_call(call.operation)
        concrete = keras.ops.convert_to_tensor([[1.0, -2.0, 3.0]] * 2)
        args = [concrete if a is x else a for a in call.args]
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(body(*args, **call.kwargs)),
            keras.ops.convert_to_numpy(keras.ops.power(concrete, 2.0)),
        )
        assert ki.operation_of(body) is call.operation
        assert ki.operation_of(keras.ops.exp) is None
        assert ki.operation_of(keras.layers.Dense(1).call) is None


def test_an_operation_keeps_its_arguments_as_attributes():
    x = symbolic()
    low = keras.ops.multiply(x, 0.0)
    call = ki.producing_call(keras.ops.clip(x, low, 1.0))
    with relied_on(
        "Operation attributes hold its constructor's arguments",
        "`Clip` keeps `x_min` as an instance attribute that `call` reads",
    ):
        assert ki.attributes(call.operation)["x_min"] is low
        concrete = keras.ops.convert_to_tensor([[-1.0, 0.5, 3.0]] * 2)
        floor = keras.ops.full((2, 3), 0.75)
        copied = ki.with_attributes(call.operation, {"x_min": floor})
        assert ki.attributes(call.operation)["x_min"] is low
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(ki.eager_call(copied)(concrete)),
            [[0.75, 0.75, 1.0]] * 2,
        )


# Each operation of ki._CALL_DIFFERS, as a user calls its function, on
# symbolic or concrete inputs of the given shapes.
_DIFFERING = {
    "ConvTranspose": (
        lambda x, k: keras.ops.conv_transpose(x, k, strides=2),
        [(1, 4, 4, 3), (3, 3, 2, 3)],
    ),
    "Histogram": (lambda x: keras.ops.histogram(x, bins=4)[0], [(12,)]),
    "GaussianBlur": (
        lambda x: keras.ops.image.gaussian_blur(x),
        [(1, 6, 6, 3)],
    ),
    "ViewAsComplex": (
        lambda x: keras.ops.real(keras.ops.view_as_complex(x)),
        [(3, 2)],
    ),
}


def _operation_named(result, name):
    """The operation called ``name`` in the graph that computed
    ``result``."""
    stack = [result]
    while stack:
        call = ki.producing_call(stack.pop())
        if type(call.operation).__name__ == name:
            return call
        stack.extend(call.inputs)
    raise AssertionError(f"no {name} in the graph")


@pytest.mark.parametrize("name", sorted(_DIFFERING))
def test_an_operation_whose_call_differs_replays_as_its_function(name):
    function, shapes = _DIFFERING[name]
    assert {cls for _, cls in ki._CALL_DIFFERS} == set(_DIFFERING)
    rng = np.random.default_rng(7)
    concrete = [rng.uniform(0.1, 1, shape).astype("float32") for shape in shapes]
    inputs = [symbolic(shape) for shape in shapes]
    with relied_on(
        "Operations whose call differs from their keras.ops function",
        f"`{name}` is recorded by its `keras.ops` function and replays as that "
        "function computes with the operation's config",
    ):
        call = _operation_named(function(*inputs), name)
        assert all(
            any(a is x for x in inputs) for a in call.args if isinstance(a, KerasTensor)
        ), "the test's graph: the operation reads the inputs directly"
        body = ki.eager_call(call.operation)
        args = [concrete[[id(x) for x in inputs].index(id(a))]
                if isinstance(a, KerasTensor) else a for a in call.args]
        replayed = body(*args, **call.kwargs)
        if name == "Histogram":
            replayed = replayed[0]
        if name == "ViewAsComplex":
            replayed = keras.ops.real(replayed)
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(replayed),
            keras.ops.convert_to_numpy(function(*concrete)),
            rtol=1e-6,
        )
        assert ki.operation_of(body) is call.operation


def test_an_operation_returning_otherwise_is_known():
    x = symbolic((2, 3), "int32")
    recorded = keras.ops.nonzero(x)
    call = ki.producing_call(recorded[0])
    concrete = keras.ops.convert_to_tensor([[0, 1, 1], [1, 0, 0]], "int32")
    with relied_on(
        "Operations whose eager result has another structure",
        "`nonzero()` returns a tuple of tensors except on PyTorch",
    ):
        eager = keras.ops.nonzero(concrete)
        assert isinstance(recorded, tuple) and len(recorded) == 2
        differs = not isinstance(eager, (tuple, list)) or len(eager) != 2
        assert ki.returns_otherwise(call.operation) == differs
        assert not ki.returns_otherwise(ki.producing_call(keras.ops.exp(x)).operation)


class _Double(keras.Operation):
    def call(self, x):
        return x * 2

    def compute_output_spec(self, x):
        return KerasTensor(x.shape, x.dtype)


def test_symbolic_call_records_a_node():
    x = symbolic()
    op = _Double()
    with relied_on(
        "Operation.symbolic_call",
        "`operation.symbolic_call(*args)` records a call on symbolic tensors "
        "and returns `compute_output_spec()`'s tensors",
    ):
        y = ki.symbolic_call(op, x)
        assert isinstance(y, KerasTensor) and tuple(y.shape) == (2, 3)
        call = ki.producing_call(y)
        assert call.operation is op
        assert call.args == (x,)


def test_compute_output_spec_runs_on_placeholders():
    with relied_on(
        "keras.src.backend.compute_output_spec",
        "`compute_output_spec(fn, *args)` runs `fn` on placeholders for "
        "symbolic `args`, unknown dimensions included",
    ):
        spec = ki.compute_output_spec(
            lambda x: keras.ops.sum(x * 2.0, axis=1), symbolic((None, 3))
        )
        assert isinstance(spec, KerasTensor)
        assert tuple(spec.shape) == (None,)
        assert spec.dtype == "float32"


def test_float64_promotion_can_be_turned_off():
    with relied_on(
        "keras.src.backend.common.dtypes.BIT64_TO_BIT32_DTYPE",
        "Keras' type promotion maps float64 through `BIT64_TO_BIT32_DTYPE`, "
        "which customgrad sets to keep float64 on JAX and PyTorch",
    ):
        before = ki.float64_promotion()
        assert before in ("float32", "float64")
        previous = ki.float64_promotion_off()
        try:
            assert ki.float64_promotion() == "float64"
            assert keras.backend.result_type("float64", "float32") == "float64"
        finally:
            ki.restore_float64_promotion(previous)
        assert ki.float64_promotion() == before


def test_auto_name_makes_unique_names():
    with relied_on(
        "keras.src.utils.naming.auto_name",
        "`auto_name(prefix)` gives Keras' unique names: prefix, prefix_1, ...",
    ):
        first, second = ki.auto_name("cg_probe"), ki.auto_name("cg_probe")
        assert first.startswith("cg_probe") and second.startswith("cg_probe_")
        assert first != second


def test_arithmetic_operations_by_class_name():
    x, y = symbolic(), symbolic()
    made = {
        "add": [keras.ops.add(x, y), x + 1.0],
        "subtract": [keras.ops.subtract(x, y), x - y],
        "multiply": [keras.ops.multiply(x, 2.0), x * y],
        "divide": [keras.ops.divide(x, y), keras.ops.true_divide(x, y), x / 2.0],
    }
    with relied_on(
        "keras.ops arithmetic class names",
        "`keras.ops` records elementwise add, subtract, multiply and divide "
        "(and the tensor operators) with operations of the classes Add, "
        "Subtract, Multiply and Divide or TrueDivide",
    ):
        for name, tensors in made.items():
            for t in tensors:
                assert ki.arithmetic(ki.producing_call(t).operation) == name
        assert ki.arithmetic(ki.producing_call(keras.ops.exp(x)).operation) is None


class _Refused(Exception):
    pass


def _refuse():
    raise _Refused()


def test_serialize_keras_object_asks_get_build_config():
    def fn(x):
        return x

    ki.refuse_serialization(fn, _refuse)
    with relied_on(
        "serialize_keras_object asks get_build_config()",
        "`keras.saving.serialize_keras_object(fn)` calls `fn.get_build_config()` "
        "on a function that has one, also as a Lambda layer's function or a "
        "Dense layer's activation",
    ):
        with pytest.raises(_Refused):
            keras.saving.serialize_keras_object(fn)
        with pytest.raises(_Refused):
            keras.layers.Lambda(fn).get_config()
        with pytest.raises(_Refused):
            keras.layers.Dense(1, activation=fn).get_config()


def test_lambda_get_config_serialises_its_function_in_its_frame():
    seen = []

    def fn(x):
        return x

    ki.refuse_serialization(fn, lambda: seen.append(ki.lambda_layer_serialising()))
    with relied_on(
        "Lambda.get_config serialises its function",
        "`Lambda.get_config()` serialises the layer's function in a frame "
        "whose `self` is the layer",
    ):
        keras.layers.Lambda(fn, name="probe_lambda").get_config()
        assert seen == ["probe_lambda"]
    assert ki.lambda_layer_serialising() is None


def test_every_random_draw_reads_and_advances_its_seed_generators_state():
    with relied_on(
        "SeedGenerator's state is named seed_generator_state",
        "`keras.random` functions read a `SeedGenerator`'s state variable, "
        "named `seed_generator_state`, for a seed that is None (the global "
        "generator) or a `SeedGenerator`, not for an integer seed",
    ):
        for seed in (None, keras.random.SeedGenerator(1)):
            with Reads() as scope:
                keras.random.uniform((2,), seed=seed)
            assert {v.name for v in scope.read} == {"seed_generator_state"}
            assert all(ki.is_seed_state(v) for v in scope.read)
        with Reads() as scope:
            keras.random.uniform((2,), seed=3)
        assert scope.read == []
        assert not ki.is_seed_state(keras.Variable(1.0))


class Reads(keras.StatelessScope):
    """A stateless scope listing the variables whose values it was asked."""

    def __init__(self):
        super().__init__()
        self.read = []

    def get_current_value(self, variable):
        self.read.append(variable)
        return super().get_current_value(variable)


def test_shape_inference_is_seen():
    with relied_on(
        "keras.src.backend.common.symbolic_scope.in_symbolic_scope",
        "`in_symbolic_scope()` is true while `compute_output_spec()` runs a "
        "function on placeholders, false outside",
    ):
        seen = []

        def fn(x):
            seen.append(ki.in_symbolic_scope())
            return x

        assert not ki.in_symbolic_scope()
        ki.compute_output_spec(fn, keras.KerasTensor((2,), "float32"))
        assert seen == [True]
        assert not ki.in_symbolic_scope()


def test_every_use_of_a_variables_value_asks_the_stateless_scope():
    v = keras.Variable([1.0, 2.0])
    x = keras.ops.convert_to_tensor([3.0, 4.0])

    def reads(fn):
        with Reads() as scope:
            fn()
        return sum(1 for seen in scope.read if seen is v)

    with relied_on(
        "StatelessScope.get_current_value is asked for every use of a value",
        "an operation on a Keras variable and `np.asarray()` of one ask the "
        "stateless scope for its value (`get_current_value()`); its shape "
        "and dtype do not",
    ):
        assert reads(lambda: keras.ops.exp(v)) >= 1
        assert reads(lambda: keras.ops.multiply(x, v)) >= 1
        assert reads(lambda: np.asarray(v)) >= 1
        assert reads(lambda: (v.shape, v.dtype)) == 0


@pytest.mark.backend("tensorflow")
def test_tensorflows_steps_hold_their_tf_functions():
    with relied_on(
        "TensorFlow's step functions hold their tf.functions in their closure",
        "a compiled `train_function` / `test_function` calls the "
        "`tf.function` `multi_step_on_iterator` of its closure on a tf.data "
        "iterator, and `one_step_on_data` on each item of another; "
        "`predict_function` is a `tf.function`; run eagerly, none",
    ):
        import tensorflow as tf

        inputs = keras.Input((2,))
        model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
        x = np.ones((8, 2), "float32")
        for eager in (False, True):
            model.compile(optimizer="sgd", loss="mse", run_eagerly=eager)
            model.make_train_function()
            model.make_predict_function()
            iterator = iter(tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(4))
            traces, args = ki.step_graph_functions(model.train_function, (iterator,))
            assert args == (iterator,)
            batch = (x, x[:, :1], None)
            on_batch, on_batch_args = ki.step_graph_functions(
                model.train_function, (iter([batch]),)
            )
            predict, _ = ki.step_graph_functions(model.predict_function, ([x],))
            if eager:
                assert traces == [] and on_batch == [] and predict == []
                continue
            [(function, traced_args)] = traces
            assert function.python_function.__name__ == "multi_step_on_iterator"
            assert traced_args == (iterator,)
            [(one_step, (item,))] = on_batch
            assert one_step.python_function.__name__ == "one_step_on_data"
            assert item is batch and list(on_batch_args[0]) == [batch]
            assert predict[0][0] is model.predict_function
            # Traced here, the step's own call finds that trace.
            function.get_concrete_function(iterator)
            traces = function.experimental_get_tracing_count()
            model.train_function(iterator)
            assert function.experimental_get_tracing_count() == traces


@pytest.mark.backend("jax")
def test_a_jax_steps_purged_variables_hold_no_value():
    with relied_on(
        "A JAX step's purged variables hold no value and no initializer",
        "Keras' JAX trainer purges a model's variables (`_value` None) "
        "while its compiled steps hold them, and an initialized variable "
        "keeps no `_initializer`",
    ):
        inputs = keras.Input((2,))
        model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
        model.compile(optimizer="sgd", loss="mse")
        x = np.ones((8, 2), "float32")
        model.fit(x, x[:, :1], verbose=0)
        assert not ki.weights_lost(model)
        weights = model.get_weights()
        model._purge_model_variables(trainable_variables=True)
        assert ki.weights_lost(model)
        with pytest.raises(TypeError):
            model.predict(x, verbose=0)
        model.set_weights(weights)
        assert not ki.weights_lost(model)


def test_a_models_steps_are_made_by_its_make_functions_and_looked_up_per_step():
    with relied_on(
        "A trainer's steps are made by make_*_function() and looked up per step",
        "`fit()`, `evaluate()` and `predict()` call the step that "
        "`model.make_<kind>_function()` set as `model.<kind>_function`, at "
        "every step, also after `compile()` again",
    ):
        calls = []

        def wrap(kind, fn):
            def step(*args, **kwargs):
                calls.append(kind)
                return fn(*args, **kwargs)

            step.customgrad_wraps = True
            return step

        inputs = keras.Input((2,))
        model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
        ki.wrap_steps(model, wrap)
        ki.wrap_steps(model, wrap)  # once is enough
        x = np.ones((8, 2), "float32")
        y = np.ones((8, 1), "float32")
        for _ in range(2):
            model.compile(optimizer="sgd", loss="mse")
            model.fit(x, y, batch_size=4, epochs=1, verbose=0)
        model.evaluate(x, y, batch_size=4, verbose=0)
        model.predict(x, batch_size=4, verbose=0)
        assert calls.count("train") == 4
        assert calls.count("test") == 2
        assert calls.count("predict") == 2
        # Each fit() and evaluate() begins with the build (TensorFlow's
        # only under a distribution strategy: else its step's trace builds).
        builds = 0 if keras.config.backend() == "tensorflow" else 3
        assert calls.count("build") == builds


# Internals only one backend's code relies on, checked on that backend.
_BACKEND_ONLY = {
    "TensorFlow's step functions hold their tf.functions in their closure": "tensorflow",
    "A JAX step's purged variables hold no value and no initializer": "jax",
}


def test_every_internal_is_checked():
    # Runs last in this file (pytest keeps the order of definition).
    backend = keras.config.backend()
    expected = {i for i in ki.INTERNALS if _BACKEND_ONLY.get(i, backend) == backend}
    assert _checked == expected


# --- Only _keras_internals reaches past Keras' public API --------------------

# Attributes of Keras objects that only _keras_internals may read.
_INTERNAL_ATTRIBUTES = {
    "_keras_history",
    "_inbound_nodes",
    "_outbound_nodes",
    "symbolic_call",
    "keras_tensors",
    "__self__",
}
# Names under which objects other than Keras operations have a `call`.
_OWN_CALL = {"ctx", "self"}


def _reaches_keras_internals(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "keras.src"
        ):
            yield node.lineno, f"from {node.module} import ..."
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("keras.src"):
                    yield node.lineno, f"import {alias.name}"
        elif isinstance(node, ast.Attribute):
            if node.attr in _INTERNAL_ATTRIBUTES:
                yield node.lineno, f".{node.attr}"
            elif node.attr == "call" and not (
                isinstance(node.value, ast.Name) and node.value.id in _OWN_CALL
            ):
                yield node.lineno, ".call"
            elif node.attr == "src" and getattr(node.value, "id", None) == "keras":
                yield node.lineno, "keras.src"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.startswith("keras.src") or node.value in _INTERNAL_ATTRIBUTES:
                yield node.lineno, repr(node.value)


def test_no_other_module_reaches_keras_internals():
    package = pathlib.Path(ki.__file__).parent
    found = []
    for path in sorted(package.glob("*.py")):
        if path.name == "_keras_internals.py":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        found.extend(f"{path.name}:{line}: {what}" for line, what in _reaches_keras_internals(tree))
    assert not found, (
        "Keras internals reached outside _keras_internals.py (move them "
        "there, behind a named function with a check here):\n  " + "\n  ".join(found)
    )
