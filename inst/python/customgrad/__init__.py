"""The Python half of the customgrad R package.

R hands this module an R callback (``forward``) and gets back a Python
callable that is differentiable on the active Keras backend.  ``forward``
returns ``[value, grad]``: ``value`` a nest of tensors, ``grad`` the handle
of the R gradient function, which R's ``run_grad`` callback runs in the
backward pass (see ``_bridge``).  Everything
that depends on the backend's conventions lives here; everything that
depends on R (formals, conditions, S3) lives in the R package.
"""

from customgrad.errors import (
    CustomGradError,
    GradientCountError,
    GradientShapeError,
    GradientStructureError,
    ThreadError,
    VariablesError,
    find_error,
    r_condition_fields,
)

__all__ = [
    "CustomGradError",
    "GradientCountError",
    "GradientShapeError",
    "GradientStructureError",
    "ThreadError",
    "VariablesError",
    "custom_gradient",
    "find_error",
    "r_condition_fields",
]


def custom_gradient(forward, backend=None):
    """Wrap an R ``forward`` callback into a differentiable callable.

    ``forward(*inputs)`` returns ``[value, grad_handle]``; in the backward
    pass R's grad runner is called with the handle, the upstream gradient
    and the variables ``f`` read, and returns one gradient per input.
    ``backend`` defaults to the active Keras backend.
    """
    import keras
    from keras.src.backend import any_symbolic_tensors, compute_output_spec

    from customgrad import _memory

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
            return compute_output_spec(differentiable, *args)
        _memory.at_boundary()
        return _memory.handed_to_r(differentiable(*args))

    if backend == "tensorflow":
        # Inside tf.function, AutoGraph must leave the bridge as it is.
        import tensorflow as tf

        call = tf.autograph.experimental.do_not_convert(call)
    return call
