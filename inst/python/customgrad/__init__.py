"""The Python half of the customgrad R package.

R hands this module an R callback (``forward``) and gets back a Python
callable that is differentiable on the active Keras backend.  Everything
that depends on the backend's conventions lives here; everything that
depends on R (formals, conditions, S3) lives in the R package.
"""

from customgrad.errors import (
    CustomGradError,
    GradientCountError,
    GradientShapeError,
    GradientStructureError,
    RError,
    ThreadError,
    VariablesError,
    find_error,
)

__all__ = [
    "CustomGradError",
    "GradientCountError",
    "GradientShapeError",
    "GradientStructureError",
    "RError",
    "ThreadError",
    "VariablesError",
    "custom_gradient",
    "find_error",
]


def custom_gradient(forward, backend=None):
    """Wrap an R ``forward`` callback into a differentiable callable.

    ``forward(*inputs)`` must return ``[value, grad]``, where ``grad(upstream,
    variables)`` returns one gradient per input.  ``backend`` defaults to the
    active Keras backend.
    """
    import keras
    from keras.src.backend import any_symbolic_tensors, compute_output_spec

    from customgrad import _bridge, _memory

    if backend is None:
        backend = keras.config.backend()
    if backend == "tensorflow":
        from customgrad import _tensorflow as adapter
    elif backend == "jax":
        from customgrad import _jax as adapter
    elif backend == "torch":
        from customgrad import _torch as adapter
    else:
        raise CustomGradError(
            f"The Keras backend {backend!r} is not supported; "
            "use 'tensorflow', 'jax' or 'torch'."
        )
    differentiable = adapter.custom_gradient(forward)

    def call(*args):
        # Symbolic Keras tensors (functional models, output specs): run on
        # the backend's placeholders to get the output's shape and dtype.
        if any_symbolic_tensors(args):
            with _bridge.no_backward():
                return compute_output_spec(differentiable, *args)
        _memory.at_boundary()
        return _memory.handed_to_r(differentiable(*args))

    if backend == "tensorflow":
        # Inside tf.function, AutoGraph must leave the bridge as it is.
        import tensorflow as tf

        call = tf.autograph.experimental.do_not_convert(call)
    return call
