"""The names R calls (customgrad.R_INTERFACE): each one is found in the
module the table names, and importing customgrad imports no Keras."""

import os
import subprocess
import sys

import pytest

import customgrad


@pytest.mark.parametrize("name", sorted(customgrad.R_INTERFACE))
def test_each_name_r_calls_is_the_function_of_its_module(name):
    import importlib

    module = importlib.import_module("customgrad." + customgrad.R_INTERFACE[name])
    assert getattr(customgrad, name) is getattr(module, name)


def test_a_name_outside_the_interface_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'run_grad'"):
        customgrad.run_grad  # noqa: B018


def test_importing_customgrad_and_arrange_imports_no_keras():
    # use_distributed() arranges processes before Keras starts.
    code = "import sys, customgrad; customgrad.arrange; print('keras' in sys.modules)"
    path = os.path.dirname(customgrad.__path__[0])
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert out.stdout.strip() == "False"
