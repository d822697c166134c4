"""TensorFlow's start-up log lines, silenced.

Importing TensorFlow writes lines straight to file descriptor 2 from C++
(absl's "All log messages before absl::InitializeLog()", oneDNN's notice,
cpu_feature_guard), before ``TF_CPP_MIN_LOG_LEVEL`` is read, so no setting
hides them. :func:`install` puts a finder on ``sys.meta_path`` that runs
TensorFlow's import with descriptor 2 pointed at /dev/null; errors still
raise as exceptions. It is installed when R starts Python, so it covers
whoever imports TensorFlow (Keras, keras3, the user), and only once.
"""

import contextlib
import importlib.abc
import importlib.machinery
import os
import sys


@contextlib.contextmanager
def _stderr_silenced():
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


class _QuietTensorFlow(importlib.abc.MetaPathFinder):
    """Finds ``tensorflow`` as the path finder does, with a loader that
    runs the import quietly. It stays until the import runs: a lookup
    without import (``importlib.util.find_spec``) must not use it up."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def quiet_exec_module(module):
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            with _stderr_silenced():
                exec_module(module)

        spec.loader.exec_module = quiet_exec_module
        return spec


def install():
    """Silence TensorFlow's start-up lines, unless it is imported already."""
    if "tensorflow" in sys.modules:
        return False
    if not any(isinstance(f, _QuietTensorFlow) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlow())
    return True
