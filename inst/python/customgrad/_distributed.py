"""Settings a run over several processes or devices needs before the
backend starts.

JAX joins a multi-process run with ``jax.distributed.initialize()``, which
must come before anything initialises XLA's backends; TensorFlow splits a
CPU into logical devices with ``tf.config.set_logical_device_configuration``,
which must come before its runtime starts.  From R both are too late once
Keras is imported: keras3's import hook converts a tensor at once.  So
:func:`arrange` runs them inside the backend module's own import (see
``_import_hook``), before reticulate's import hooks, whoever imports it;
where the module is imported already and not yet started, at once.
"""

import os
import re
import sys

from customgrad._import_hook import around_import
from customgrad.errors import DistributedStartedError

_DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
_arranged = {}  # backend -> the settings arranged for it


def arrange(backend, num_processes=1, process_id=0, coordinator=None, local_devices=None):
    """Arrange ``backend`` to run as process ``process_id`` of
    ``num_processes`` (JAX, with the coordinator at ``coordinator``) and
    with ``local_devices`` CPU devices in this process (None: as many as
    the backend finds).  Returns True once arranged; raises
    :class:`DistributedStartedError` when the backend has started with
    other settings."""
    settings = {
        "num_processes": int(num_processes),
        "process_id": int(process_id),
        "coordinator": coordinator,
        "local_devices": None if local_devices is None else int(local_devices),
    }
    if _arranged.get(backend) == settings:
        return True
    if backend == "jax":
        _arrange_jax(settings)
    elif backend == "tensorflow":
        _arrange_tensorflow(settings)
    _arranged[backend] = settings
    return True


def arranged(backend):
    """The settings arranged for ``backend``, or None."""
    return _arranged.get(backend)


def _arrange_jax(settings):
    jax = sys.modules.get("jax")
    if jax is not None and _jax_started():
        raise DistributedStartedError(backend="JAX")
    if settings["local_devices"] is not None:
        # Read by XLA when it starts its CPU backend.
        os.environ["XLA_FLAGS"] = _with_device_count(
            os.environ.get("XLA_FLAGS", ""), settings["local_devices"]
        )

    def join(jax):
        # gloo: CPU collectives across processes (JAX's default from 0.4.36
        # on, named for older releases).
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        if settings["num_processes"] > 1:
            jax.distributed.initialize(
                coordinator_address=settings["coordinator"],
                num_processes=settings["num_processes"],
                process_id=settings["process_id"],
            )

    if jax is not None:
        join(jax)
    else:
        around_import("jax", _after(join))


def _jax_started():
    from jax._src import xla_bridge

    return bool(xla_bridge._backends)


def _with_device_count(flags, count):
    flags = re.sub(_DEVICE_COUNT_FLAG + r"=\S*", "", flags).strip()
    return f"{flags} {_DEVICE_COUNT_FLAG}={count}".strip()


def _arrange_tensorflow(settings):
    def split(tf):
        if settings["local_devices"] is None:
            return
        cpus = tf.config.list_physical_devices("CPU")
        try:
            tf.config.set_logical_device_configuration(
                cpus[0],
                [tf.config.LogicalDeviceConfiguration()] * settings["local_devices"],
            )
        except RuntimeError as exc:  # the runtime has started
            raise DistributedStartedError(backend="TensorFlow") from exc

    tf = sys.modules.get("tensorflow")
    if tf is not None:
        split(tf)
    else:
        around_import("tensorflow", _after(split))


def _after(then):
    """An ``around`` for :func:`around_import` that runs ``then(module)``
    once the module's code has run."""

    def around(exec_module, module):
        exec_module(module)
        then(module)

    return around
