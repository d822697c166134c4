"""Gradient checks: autodiff against central finite differences in float64.

The value of ``fn`` is reduced to one number with fixed weights (ones for a
one-element value, else pseudo-random numbers in [0.5, 1.5] from seed 0),
so that one vector-Jacobian product and two evaluations of ``fn`` per input
element check every input element against every output element at once.
"""

import keras
import numpy as np

from customgrad import _autodiff, _backend, _bridge, _messages
from customgrad._structure import flatten
from customgrad.errors import GradcheckError

__all__ = ["gradcheck"]


def gradcheck(fn, args, eps, positions=None, progress=None, backend=None):
    """Autodiff and numeric gradients of the R ``fn`` at ``args``.

    ``args`` is a list of arguments (nests of tensors allowed); they are cast
    to float64.  Returns :func:`_messages.gradcheck_reply`: one entry per
    leaf tensor of ``args`` in flattening order.  ``progress(done)``, if given,
    is called after each element.
    """
    leaves, spec = flatten(list(args))
    tensors = _autodiff.differentiable_inputs(leaves, spec, positions)
    tensors = [keras.ops.cast(t, "float64") for t in tensors]
    flat_fn, _ = _autodiff.flat_function(fn, spec)
    weights = []

    def make_upstream(values):
        weights.extend(_weights(values))
        return [
            keras.ops.convert_to_tensor(w, dtype=keras.backend.standardize_dtype(v.dtype))
            for w, v in zip(weights, values)
        ]

    _, grads = _autodiff.vjp_for(backend)(flat_fn, tensors, make_upstream)
    analytic = [_numpy(g).ravel() for g in grads]
    base = [_numpy(t) for t in tensors]

    def objective(flat):
        values = flat_fn(*flat)
        if len(values) != len(weights):
            raise GradcheckError(expected=len(weights), returned=len(values))
        return sum(float(np.sum(w * _numpy(v))) for w, v in zip(weights, values))

    numeric = []
    done = 0
    with _backend.adapter(backend).no_grad():
        for i, x in enumerate(base):
            g = np.zeros(x.size)
            for k in range(x.size):
                up = objective(_perturbed(tensors, base, i, k, eps))
                down = objective(_perturbed(tensors, base, i, k, -eps))
                g[k] = (up - down) / (2.0 * eps)
                done += 1
                if progress is not None:
                    _bridge.call_r(progress, done)
            numeric.append(g)
    shapes = [[int(d) for d in x.shape] for x in base]
    return _messages.gradcheck_reply(analytic, numeric, shapes)


def _weights(values):
    if len(values) == 1 and int(np.prod(_shape(values[0]))) == 1:
        return [np.ones(_shape(values[0]))]
    rng = np.random.default_rng(0)
    return [rng.uniform(0.5, 1.5, size=_shape(v)) for v in values]


def _shape(x):
    return tuple(int(d) for d in x.shape)


def _numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x), dtype=np.float64)


def _perturbed(tensors, base, i, k, delta):
    x = base[i].copy()
    x.flat[k] += delta
    flat = list(tensors)
    flat[i] = keras.ops.convert_to_tensor(x, dtype="float64")
    return flat
