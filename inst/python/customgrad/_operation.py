"""A custom-gradient function as a Keras operation.

Called on Keras symbolic tensors (a functional model being built, or
another custom-gradient function's ``f`` being traced), the function must
record a node in Keras' graph, as every ``keras.ops`` function does, so
that the caller's graph stays connected and replays it: its eager ``call``
is the differentiable callable.  A traced function records each call with
an operation of its own, bound to the trace made for those inputs
(:func:`record`), so that the replay runs that trace and never looks one up
by signature: the lookup could find the trace that recorded the call.
"""

import keras

from customgrad import _trace
from customgrad._keras_internals import compute_output_spec, symbolic_call
from customgrad._structure import flatten


class CustomGradientOp(keras.Operation):
    """The operation of one custom-gradient function."""

    def __init__(self, differentiable, core):
        super().__init__(name="custom_gradient")
        self.differentiable = differentiable
        self.core = core

    def call(self, *args):
        return self.differentiable(*args)

    def compute_output_spec(self, *args):
        leaves, in_spec = flatten(list(args))
        output_spec = getattr(self.core, "output_spec", None)
        if output_spec is not None and all(
            isinstance(x, keras.KerasTensor) for x in leaves
        ):
            spec = output_spec(leaves, in_spec)
            if spec is not None:
                return spec
        # Untraced (or a trace that failed): run on the backend's
        # placeholders, which runs R's f.
        return compute_output_spec(self.differentiable, *args)


class _BoundOp(CustomGradientOp):
    """One recorded call of a traced function, bound to its entry."""

    def __init__(self, differentiable, core, entry):
        super().__init__(differentiable, core)
        self.entry = entry

    def compute_output_spec(self, *args):
        spec = _trace.value_spec(self.entry)
        if spec is not None:
            return spec
        return compute_output_spec(self.differentiable, *args)


def record(operation, adapter, args):
    """Record a call of ``operation``'s function on symbolic ``args`` in
    Keras' graph; return its symbolic value."""
    core = operation.core
    leaves, in_spec = flatten(list(args))
    if not isinstance(core, _trace.Traced) or not all(
        isinstance(x, keras.KerasTensor) for x in leaves
    ):
        return symbolic_call(operation, *args)
    entry = core.bind(leaves, in_spec)
    bound = _trace.Bound(core, entry)
    return symbolic_call(_BoundOp(adapter.custom_gradient(bound), bound, entry), *args)
