"""Arranging processes and devices before a backend starts (_distributed),
and the import hooks it runs through (_import_hook)."""

import sys

import pytest

from customgrad import _distributed
from customgrad._import_hook import around_import
from customgrad.errors import DistributedStartedError


def test_device_count_flag_is_added_or_replaced():
    flag = "--xla_force_host_platform_device_count"
    assert _distributed._with_device_count("", 2) == f"{flag}=2"
    assert (
        _distributed._with_device_count(f"--xla_cpu_a=1 {flag}=8 --xla_cpu_b", 3)
        == f"--xla_cpu_a=1  --xla_cpu_b {flag}=3"
    )


@pytest.fixture
def fresh_module(tmp_path, monkeypatch):
    """The name of a module on the path that is not imported yet."""
    (tmp_path / "cg_fresh_module.py").write_text("order = ['module']\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "cg_fresh_module"
    sys.modules.pop("cg_fresh_module", None)


def test_around_import_nests_every_hook_registered(fresh_module):
    def first(exec_module, module):
        exec_module(module)
        module.order.append("first")

    def second(exec_module, module):
        exec_module(module)
        module.order.append("second")

    assert around_import(fresh_module, first)
    assert around_import(fresh_module, second)
    assert around_import(fresh_module, second)  # once only
    module = __import__(fresh_module)
    # The first registered is innermost: it sees the module's code run first.
    assert module.order == ["module", "first", "second"]
    assert not around_import(fresh_module, first)  # imported already


def test_arranging_a_started_backend_fails():
    # The tests' own backend has started by now.
    import keras

    keras.ops.ones((1,))
    backend = keras.config.backend()
    if backend == "torch":
        assert _distributed.arrange("torch", local_devices=2)  # nothing to do
        return
    with pytest.raises(DistributedStartedError) as info:
        _distributed.arrange(backend, local_devices=2)
    assert info.value.details == {"backend": {"jax": "JAX", "tensorflow": "TensorFlow"}[backend]}
