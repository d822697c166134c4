"""The Python side of ``make bench``'s R host op loops (bench/host.R): the
same host op written in Python with NumPy (SciPy for the Bessel function),
through the backend's own mechanism under its own custom gradient, as a
Python user writes it: ``jax.pure_callback`` in ``jax.custom_vjp``,
``tf.numpy_function`` in ``tf.custom_gradient``, NumPy in a
``torch.autograd.Function``.

``python host_reference.py KERNEL MODE N STEPS`` runs STEPS calls of the
value and gradient of ``sum(op(x))`` on N float32 elements (KERNEL ``exp``
or ``besselk``, MODE ``eager`` or ``compiled``: ``tf.function`` /
``jax.jit``; PyTorch has no compiled mode here, and runs eagerly);
``python host_reference.py fit EPOCHS`` trains the one-weight model of
bench/host.R with Keras' default compilation.  Each prints one line of
``key=value`` pairs (reference.py's ``report``).
"""

import sys
import time

import keras
import numpy as np
from scipy import special

from reference import BACKEND, report, timed

NU = 1.5
KERNELS = {
    # value, derivative
    "exp": (np.exp, np.exp),
    "besselk": (
        lambda x: special.kv(NU, x),
        lambda x: -(special.kv(NU - 1, x) + special.kv(NU + 1, x)) / 2,
    ),
}


def host_op(kernel):
    """The host op of ``kernel`` on the active backend."""
    value, slope = KERNELS[kernel]

    def fwd_np(x):
        return value(x).astype(x.dtype)

    def bwd_np(x, g):
        return (g * slope(x)).astype(x.dtype)

    if BACKEND == "jax":
        import jax

        @jax.custom_vjp
        def op(x):
            spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
            return jax.pure_callback(fwd_np, spec, x, vmap_method="sequential")

        def fwd(x):
            return op(x), x

        def bwd(x, g):
            spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
            return (jax.pure_callback(bwd_np, spec, x, g, vmap_method="sequential"),)

        op.defvjp(fwd, bwd)
        return op
    if BACKEND == "tensorflow":
        import tensorflow as tf

        @tf.custom_gradient
        def op(x):
            y = tf.numpy_function(fwd_np, [x], x.dtype, stateful=False)
            y.set_shape(x.shape)

            def grad(g):
                d = tf.numpy_function(bwd_np, [x, g], x.dtype, stateful=False)
                d.set_shape(x.shape)
                return d

            return y, grad

        return op
    import torch

    class Op(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.from_numpy(fwd_np(x.detach().numpy()))

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return torch.from_numpy(bwd_np(x.detach().numpy(), g.numpy()))

    return Op.apply


def value_and_grad_step(op, x, mode):
    """A function of no arguments: the value and gradient of sum(op(x))."""
    if BACKEND == "jax":
        import jax

        vg = jax.value_and_grad(lambda v: keras.ops.sum(op(v)))
        if mode == "compiled":
            vg = jax.jit(vg)

        def step():
            return jax.block_until_ready(vg(x))

        return step
    if BACKEND == "tensorflow":
        import tensorflow as tf

        def vg(v):
            with tf.GradientTape() as tape:
                tape.watch(v)
                s = tf.reduce_sum(op(v))
            return s, tape.gradient(s, v)

        if mode == "compiled":
            vg = tf.function(vg)
        return lambda: vg(x)

    x = x.detach().requires_grad_(True)

    def step():
        x.grad = None
        s = op(x).sum()
        s.backward()
        return s, x.grad

    return step


def run_calls(kernel, mode, n, steps):
    x = keras.ops.convert_to_tensor(np.linspace(0.5, 2.0, n).astype("float32"))
    step = value_and_grad_step(host_op(kernel), x, mode)
    # The first call's compile is timed, as in the R loop.
    total, times = timed(step, steps)
    report(total, times, steps)


# The model of bench/host.R: one dense weight, then besselK(., 1.5).
FIT_SAMPLES = 256
FIT_BATCH = 32


def fit_data():
    rng = np.random.default_rng(1)
    x = rng.uniform(0.5, 2.0, (FIT_SAMPLES, 1)).astype("float32")
    return x, special.kv(NU, 1.3 * x).astype("float32")


def make_model(op):
    """The one-weight model around ``op`` (a Keras layer or a function)."""
    layer = op if isinstance(op, keras.layers.Layer) else keras.layers.Lambda(op)
    model = keras.Sequential(
        [
            keras.Input((1,)),
            keras.layers.Dense(1, use_bias=False, kernel_initializer="ones"),
            layer,
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    return model


def run_fit(epochs):
    x, y = fit_data()
    model = make_model(host_op("besselk"))
    # One fit(), timed whole, its first step's compile included, as
    # bench/host.R times keras3's.
    started = time.perf_counter()
    history = model.fit(x, y, epochs=epochs, batch_size=FIT_BATCH, shuffle=False, verbose=0)
    total = time.perf_counter() - started
    steps = epochs * -(-FIT_SAMPLES // FIT_BATCH)
    report(total, [total / steps], steps, loss=history.history["loss"][-1])


if __name__ == "__main__":
    if sys.argv[1] == "fit":
        run_fit(int(sys.argv[2]))
    else:
        run_calls(sys.argv[1], sys.argv[2], int(float(sys.argv[3])), int(sys.argv[4]))
