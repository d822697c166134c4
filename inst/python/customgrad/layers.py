"""A custom-gradient function as a Keras layer, saved with its traces.

:class:`CustomGradient` applies a custom-gradient function (what
``customgrad.custom_gradient`` makes; R's ``layer_custom_gradient()``
passes it) to its inputs.  Its config names the function and holds its
saved traces (``_saving``).  Loading finds the function, in this order:

1. ``custom_objects`` (or Keras' registered objects), by the saved name;
2. R, when R runs this Python: customgrad's ready-made ops by name, and an
   R function given in ``custom_objects`` (R's resolver, :func:`set_resolver`);
3. the saved traces alone, in any process (plain Python included): they
   serve the inputs they were traced for, general ones any batch size.

Without any of them, loading fails with :class:`FunctionNotFoundError`;
with saved traces of a format this customgrad doesn't read (saved by a
newer customgrad, say), with :class:`SavedFormatError`.
Importing this module registers the layer with Keras.
"""

import keras
import numpy as np

from customgrad import _backend, _bridge, _saving, _trace
from customgrad._keras_internals import auto_name
from customgrad.errors import FunctionNotFoundError, SavedFormatError, find_error


@keras.saving.register_keras_serializable(package="customgrad")
class CustomGradient(keras.Layer):
    """Applies ``function``, a custom-gradient function, to the inputs.

    ``function_name`` is the name the function is found by when a saved
    model is loaded; ``arguments`` are the options customgrad's ready-made
    ops are made with; ``traces`` are saved traces (set by loading).
    ``variables`` names Keras variables passed to ``function`` after the
    inputs, in order (a reversal's ``lambda`` that a callback assigns): the
    layer tracks them, so that they are saved with its weights and reach
    JAX's stateless training step.  A saved config holds, for each, a dict
    of its value, dtype and trainability, from which loading makes it.
    """

    def __init__(
        self,
        function=None,
        function_name=None,
        arguments=None,
        traces=None,
        variables=None,
        **kwargs,
    ):
        if kwargs.get("name") is None and function_name and "::" in function_name:
            # customgrad's ready-made layers are named after their op
            # ("gradient_reversal", "gradient_reversal_1", ...).
            kwargs["name"] = auto_name(function_name.rpartition("::")[2])
        super().__init__(**kwargs)
        self.function_name = function_name
        self.arguments = dict(arguments or {})
        self.variable_names = list(variables or {})
        # Tracked by Keras as the layer's weights.
        self.extra_variables = [
            self._variable(name, v) for name, v in (variables or {}).items()
        ]
        if function is None:
            # A ready-made op is made with its variables as arguments.
            found_with = {
                **self.arguments,
                **dict(zip(self.variable_names, self.extra_variables)),
            }
            function = _find_function(function_name, found_with, traces, self.name)
        self.function = function
        self.built = True

    def _variable(self, name, value):
        if isinstance(value, keras.Variable):
            return value
        # From a saved config: the saved weights then set its value.
        return self.add_weight(
            shape=np.shape(value["value"]),
            initializer=keras.initializers.Constant(value["value"]),
            dtype=value["dtype"],
            trainable=value["trainable"],
            name=name,
        )

    def call(self, inputs):
        return self.function(inputs, *self.extra_variables)

    def compute_output_spec(self, inputs):
        # The variables as symbolic tensors too: the trace made here is
        # then a general one (any batch size), saved with the model.
        symbolic = [keras.KerasTensor(v.shape, v.dtype) for v in self.extra_variables]
        return self.function.output_spec(inputs, *symbolic)

    @classmethod
    def from_config(cls, config):
        try:
            return super().from_config(config)
        except TypeError as exc:
            # Keras turns every error here into a TypeError: a missing
            # function stays a FunctionNotFoundError.
            found = find_error(exc)
            if found is None:
                raise
            raise found from None

    def get_config(self):
        config = super().get_config()
        config.update(
            function_name=self.function_name,
            arguments=self.arguments,
            traces=_saving.save_traces(self.function.core),
        )
        if self.variable_names:
            config["variables"] = {
                name: {
                    "value": keras.ops.convert_to_numpy(v).tolist(),
                    "dtype": v.dtype,
                    "trainable": v.trainable,
                }
                for name, v in zip(self.variable_names, self.extra_variables)
            }
        return config


_resolver = [None]


def set_resolver(resolve):
    """Keep R's callback ``resolve(name, arguments, found)`` (R sets it when
    Keras is imported; without R there is none)."""
    _resolver[0] = resolve


def freeze_imported():
    """Leave what Python holds now (Keras and its backend, once imported)
    out of its cyclic collections: R's opt-in, see ?customgrad-package."""
    import gc

    gc.collect()  # only live objects go
    gc.freeze()


def _find_function(name, arguments, traces, layer):
    found = _registered(name) if name else None
    if found is not None and hasattr(found, "core"):
        return found
    resolve = _resolver[0]
    if resolve is not None and name:
        resolved = _bridge.call_r(resolve, name, arguments, found, count=False)
        if resolved is not None:
            return resolved
    if traces:
        return saved_function(traces, name, layer)
    raise FunctionNotFoundError(function=name, layer=layer, reason="no_traces")


def _registered(name):
    """The object registered or in ``custom_objects`` under ``name`` (also
    as ``package>name``, the way keras3's ``register_keras_serializable()``
    registers it)."""
    found = keras.saving.get_registered_object(name)
    if found is not None:
        return found
    for key, obj in keras.saving.get_custom_objects().items():
        if key.endswith(">" + name):
            return obj
    return None


def saved_function(traces, name, layer):
    """A custom-gradient function that replays saved ``traces`` only: an
    input they can't serve is a :class:`FunctionNotFoundError`; traces of
    a format this customgrad doesn't read are a :class:`SavedFormatError`."""
    from customgrad import make_callable

    for data in traces:
        reason = _saving.format_problem(data)
        if reason is not None:
            raise SavedFormatError(
                function=name,
                layer=layer,
                reason=reason,
                format=_saving.trace_format(data),
                oldest=_saving.OLDEST_FORMAT,
                newest=_saving.FORMAT,
            )

    adapter = _backend.adapter()

    def missing(*args, **kwargs):
        raise FunctionNotFoundError(function=name, layer=layer, reason="new_signature")

    core = _trace.Traced(
        _trace.RCalls(missing, adapter.FILL_NONE),
        notify=None,
        warn_retrace=None,
        strict=True,
    )
    for data in traces:
        core.add_trace(_saving.load_trace(data, adapter.FILL_NONE))
    return make_callable(core, adapter)
