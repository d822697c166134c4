"""A custom-gradient function as a Keras operation.

Called on Keras symbolic tensors (a functional model being built, or
another custom-gradient function's ``f`` being traced), the function must
record a node in Keras' graph, as every ``keras.ops`` function does, so
that the caller's graph stays connected and replays it: its eager ``call``
is the differentiable callable, which replays its own traces.
"""

import keras
from keras.src.backend import compute_output_spec

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
