"""The Python side of ``make bench`` (bench/run.R): the naive log1pexp
written with ``keras.ops.custom_gradient``, and the loops that R's are
compared with, each run alone in its own process.

``python reference.py eager N STEPS`` runs STEPS gradient steps of
``sum(log1pexp(x))`` on N float32 elements as a Python user writes them
(a tape, ``jax.grad``, ``backward()``); ``python reference.py fit EPOCHS``
trains the MLP below.  Each prints one line of ``key=value`` pairs (see
:func:`report`).  bench/loop.R imports this module for the R loops: the
floor's log1pexp, the MLP and its data.
"""

import sys
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


def eager_step(x):
    """A function of no arguments: one gradient step of sum(log1pexp(x))."""
    if BACKEND == "tensorflow":
        import tensorflow as tf

        def step():
            with tf.GradientTape() as tape:
                tape.watch(x)
                s = ops.sum(log1pexp(x))
            return tape.gradient(s, x)

    elif BACKEND == "jax":
        import jax

        g = jax.grad(lambda v: ops.sum(log1pexp(v)))

        def step():
            return g(x).block_until_ready()

    else:
        x = x.detach().requires_grad_(True)

        def step():
            x.grad = None
            ops.sum(log1pexp(x)).backward()
            return x.grad

    return step


def peak_mb():
    """This process's peak resident set in MB (NaN without /proc)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def report(total, times, steps, **extra):
    """The line bench/run.R reads: the whole loop's mean per step
    (``total / steps``) and the per-step median and 10th/90th percentiles,
    in microseconds, then ``extra``."""
    times = sorted(times)

    def pct(p):
        return times[min(len(times) - 1, int(p * len(times)))] * 1e6

    values = dict(
        mean_us=total / steps * 1e6,
        median_us=pct(0.5),
        p10_us=pct(0.1),
        p90_us=pct(0.9),
        **extra,
    )
    print(" ".join(f"{k}={v:.6g}" for k, v in values.items()))


def eager(n, steps, warmup=20):
    """The loop at n elements; at n > 1, after ``warmup`` steps at one
    element, and the memory reported is the peak above the peak of those
    (``warmup=0``, a fresh process: above the loop's start). At n = 1 the
    loop is the first: its first step's trace is timed."""
    if n > 1 and warmup:
        small = eager_step(ops.ones((1,)) * 0.5)
        for _ in range(warmup):
            small()
    base = peak_mb()
    step = eager_step(ops.ones((int(n),)) * 0.5)
    total, times = timed(step, steps)
    report(total, times, steps, extra_mb=peak_mb() - base)


def timed(step, steps):
    """``(total seconds, per-call seconds)`` of ``steps`` calls of ``step``."""
    times = []
    started = time.perf_counter()
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return time.perf_counter() - started, times


# --- model.fit(): 32 -> Dense 64 -> log1pexp -> Dense 64 -> log1pexp ->
# Dense 1, 2048 samples, batch 64, SGD, no shuffling. The same seed gives
# the same initial weights, so R's model must train to the same losses.

FIT_SAMPLES = 2048
FIT_BATCH = 64


def fit_data(seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(FIT_SAMPLES, 32)).astype("float32")
    y = (np.sin(x[:, :1]) + 0.1 * x[:, 1:2] ** 2).astype("float32")
    return x, y


def make_mlp(activation, seed=1):
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


class EpochTimes(keras.callbacks.Callback):
    """Seconds per epoch (for the percentiles)."""

    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.times.append(time.perf_counter() - self.t0)


def fit(epochs):
    x, y = fit_data()
    model = make_mlp(log1pexp)
    timer = EpochTimes()
    timer.times = []
    steps_per_epoch = -(-FIT_SAMPLES // FIT_BATCH)
    started = time.perf_counter()
    history = model.fit(
        x, y, epochs=epochs, batch_size=FIT_BATCH, shuffle=False, verbose=0, callbacks=[timer]
    )
    total = time.perf_counter() - started
    per_step = [t / steps_per_epoch for t in timer.times]
    report(total, per_step, epochs * steps_per_epoch, loss=history.history["loss"][-1])


if __name__ == "__main__":
    if sys.argv[1] == "eager":
        eager(float(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "fresh":
        eager(float(sys.argv[2]), int(sys.argv[3]), warmup=0)
    else:
        fit(int(sys.argv[2]))
