"""The active backend's adapter module, chosen once.

Each adapter (``_tensorflow``, ``_jax``, ``_torch``) implements the same
interface: ``custom_gradient(fn)`` (a differentiable callable over
``fn.forward``, see ``_trace``), ``FILL_NONE`` (whether a missing gradient
must be zeros) and ``finish(call)`` (what the backend needs around the
callable handed out).
"""

import importlib

import keras

from customgrad.errors import CustomGradError

_ADAPTERS = {
    "tensorflow": "customgrad._tensorflow",
    "jax": "customgrad._jax",
    "torch": "customgrad._torch",
}
_chosen = {}


def adapter(backend=None):
    """The adapter module of ``backend`` (default: Keras' active backend)."""
    backend = backend or keras.config.backend()
    module = _chosen.get(backend)
    if module is None:
        if backend not in _ADAPTERS:
            raise CustomGradError(
                f"The Keras backend {backend!r} is not supported; "
                "use 'tensorflow', 'jax' or 'torch'."
            )
        module = _chosen[backend] = importlib.import_module(_ADAPTERS[backend])
    return module
