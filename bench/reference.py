"""Pure-Python references and step harnesses for bench/bench-backend.R.

The "python" implementation is log1pexp written with keras.ops.custom_gradient
in Python. The R implementations (plain reticulate pass-through, customgrad)
are R functions ``h``; the harness around them is the same for both and is
written here, so that both pay the same fixed cost per step.
"""

import ctypes
import gc
import os
import resource
import time

import keras

BACKEND = keras.config.backend()
ops = keras.ops


@ops.custom_gradient
def log1pexp(x):
    e = ops.exp(x)

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        return ops.multiply(upstream, 1.0 - 1.0 / ops.add(1, e))

    return ops.log(1 + e), grad


def make_input(n):
    x = ops.ones((int(n),), dtype="float32") * 0.5
    if BACKEND == "torch":
        x = x.detach().requires_grad_(True)
    return x


def _sync(x):
    if BACKEND == "jax":
        x.block_until_ready()
    return x


# --- eager steps: sum(h(x)) forward and backward ---------------------------

if BACKEND == "tensorflow":
    import tensorflow as tf

    def start(x):
        tape = tf.GradientTape()
        tape.__enter__()
        tape.watch(x)
        return tape

    def finish(state, y, x):
        s = tf.reduce_sum(y)
        state.__exit__(None, None, None)
        return state.gradient(s, x)

    def eager_step(h, x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            s = tf.reduce_sum(h(x))
        return tape.gradient(s, x)

elif BACKEND == "torch":

    def start(x):
        x.grad = None
        return None

    def finish(state, y, x):
        y.sum().backward()
        return x.grad

    def eager_step(h, x):
        x.grad = None
        h(x).sum().backward()
        return x.grad

else:
    import jax
    import jax.numpy as jnp

    def jax_grad_step(h, x):
        """jax.grad of sum(h(x)): eager JAX traces h on every call."""
        return _sync(jax.grad(lambda v: jnp.sum(h(v)))(x))

    def eager_step(h, x):
        return jax_grad_step(h, x)


def python_eager(x):
    return eager_step(log1pexp, x)


# --- compiled steps ---------------------------------------------------------


def compile_step(h):
    """The step of h compiled: tf.function around the tape step, jax.jit of
    the gradient; None on torch (eager only)."""
    if BACKEND == "tensorflow":
        return tf.function(lambda x: eager_step(h, x))
    if BACKEND == "jax":
        return jax.jit(jax.grad(lambda v: jnp.sum(h(v))))
    return None


def timed(fn, *args):
    """Microseconds that fn(*args) takes, timed here in Python."""
    t0 = time.perf_counter()
    _sync(fn(*args))
    return (time.perf_counter() - t0) * 1e6


def rss_mb():
    """Resident set size of this process, in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def collect():
    """Collect Python's garbage (reference cycles) and hand the allocator's
    free memory back to the system, so that RSS counts memory in use."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def pid():
    return os.getpid()


# --- model$fit(): the MLP of issue "R runs only when tracing" ---------------
# 32 -> Dense 64 -> activation -> Dense 64 -> activation -> Dense 1, 2048
# samples, batch 64, SGD, no shuffling: the same seed gives the same initial
# weights, so models that differ only in how the activation is written must
# train to the same losses.

FIT_SAMPLES = 2048
FIT_BATCH = 64


def fit_data(seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(FIT_SAMPLES, 32)).astype("float32")
    y = (np.sin(x[:, :1]) + 0.1 * x[:, 1:2] ** 2).astype("float32")
    return x, y


def make_mlp(activation, seed=1):
    """The MLP with ``activation`` (a callable) after each hidden layer."""
    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.Input((32,)),
            keras.layers.Dense(64),
            keras.layers.Lambda(activation),
            keras.layers.Dense(64),
            keras.layers.Lambda(activation),
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01), loss="mse")
    return model


def fit_epoch(model, x, y):
    """One epoch of model.fit(): [microseconds per step, loss]."""
    steps = -(-len(x) // FIT_BATCH)
    t0 = time.perf_counter()
    history = model.fit(x, y, epochs=1, batch_size=FIT_BATCH, shuffle=False, verbose=0)
    elapsed = time.perf_counter() - t0
    return [elapsed * 1e6 / steps, float(history.history["loss"][-1])]


# --- peak memory of an eager loop (bench/peak.R's twin) ---------------------


def _status_mb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def eager_loop_peak(n, steps):
    """The peak resident memory of ``steps`` eager steps of log1pexp on n
    elements above the resident set after three steps on 4 elements, in
    MB, and the seconds per step: what bench/peak.R measures for R."""
    small = make_input(4)
    for _ in range(3):
        python_eager(small)
    base = _status_mb("VmRSS")
    x = make_input(n)
    t0 = time.perf_counter()
    for _ in range(int(steps)):
        _sync(python_eager(x))
    seconds = (time.perf_counter() - t0) / int(steps)
    return _status_mb("VmHWM") - base, seconds


if __name__ == "__main__":
    import sys

    peak, seconds = eager_loop_peak(float(sys.argv[1]), int(sys.argv[2]))
    print(f"{peak:.1f} {seconds:.4f}")
