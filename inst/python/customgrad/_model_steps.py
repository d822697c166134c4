"""A Keras model's compiled steps, where they hold R's custom gradients.

:func:`serve_steps` wraps the steps Keras' trainer makes for one model
(``train_function``, ``test_function``, ``predict_function``, and the
symbolic build before them: see ``_keras_internals.wrap_steps``), nothing
in Keras' classes:

* on TensorFlow, a step whose graph holds R host ops runs where R's main
  thread serves them (the adapter's ``ServedStep``); JAX and PyTorch call
  R from the step's own thread already;
* an error of R's ``f`` or ``grad`` stops the step as one of class
  ``customgrad_error_f`` / ``customgrad_error_grad`` that keeps the R
  error's own classes, where the backend's runtime (JAX's
  ``XlaRuntimeError``) or Keras' re-raise of a layer's error (as
  ``RuntimeError`` where it can't remake the error's class) would hand R
  another class; an interrupt in R (Esc / Ctrl+C) stops it as an
  interrupt, where JAX's runtime would report it as its own error; on
  JAX, where such an error loses the model's weights
  (Keras donates them to its compiled steps: fit's, evaluate's and
  predict's alike, measured with Keras 3.15), using the model again is an
  error of class ``customgrad_error_weights_lost``, not Keras' raw one.
"""

import keras

from customgrad import _backend, _keras_internals
from customgrad.errors import (
    CustomGradError,
    WeightsLostError,
    carries_r_condition,
    find_error,
    r_classes_of,
    raise_host_stop,
    r_condition_type,
)


def serve_steps(model):
    """``model``, whose steps from now on are wrapped (see above)."""
    _keras_internals.wrap_steps(model, _Step, _check_weights)
    return model


def _check_weights(model):
    """Refuses a model whose weights a failed JAX step consumed (Keras
    donates them to its compiled step), where Keras would fail reading
    them with a raw ``TypeError``."""
    if keras.config.backend() == "jax" and _keras_internals.weights_lost(model):
        raise WeightsLostError()


class _Step:
    """One step function of a model, wrapped."""

    customgrad_wraps = True

    def __init__(self, kind, fn):
        self.kind = kind
        served = getattr(_backend.adapter(), "ServedStep", None)
        self.run = served(fn) if served is not None and kind != "build" else fn

    def __call__(self, *args, **kwargs):
        try:
            return self.run(*args, **kwargs)
        except Exception as exc:
            raise_host_stop(exc)
            classed = _classed(exc)
            if classed is None or classed is exc:
                raise
            raise classed from classed.__cause__


def _classed(exc):
    """What R should get for a step's error ``exc``: customgrad's own error
    or the R condition in its chain, as one of ``customgrad_error_f`` /
    ``_grad`` where it left R's ``f`` or ``grad``; None where neither is."""
    found = find_error(exc)
    if found is None or isinstance(found, CustomGradError):
        return found
    classes = r_classes_of(found)
    # Marked where it left R's f or grad (an R function of another layer,
    # a layer_lambda()'s, is not a custom gradient's).
    what = getattr(found, "customgrad_in", None)
    if what is None or "customgrad_error" in classes or not carries_r_condition(found):
        return found
    classed = r_condition_type(
        (f"customgrad_error_{what}", "customgrad_error", *classes)
    )(str(found))
    # The R condition's fields (message, call, R's classes), as reticulate
    # attached them: R signals it again from these (Keras' fit() drops
    # the cause: ``raise ... from None``).
    classed.__dict__.update(found.__dict__)
    classed.__cause__ = found
    return classed
