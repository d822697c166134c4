"""TensorFlow's start-up log lines, silenced.

Importing TensorFlow writes lines straight to file descriptor 2 from C++
(absl's "All log messages before absl::InitializeLog()", oneDNN's notice,
cpu_feature_guard), before ``TF_CPP_MIN_LOG_LEVEL`` is read, so no setting
hides them. :func:`install` has TensorFlow's import run with descriptor 2
pointed at /dev/null (see ``_import_hook``); errors still
raise as exceptions. It is installed when R starts Python, so it covers
whoever imports TensorFlow (Keras, keras3, the user), and only once.
"""

import contextlib
import os
import sys

from customgrad._import_hook import around_import


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


def _quietly(exec_module, module):
    with _stderr_silenced():
        exec_module(module)


def install():
    """Silence TensorFlow's start-up lines, unless it is imported already."""
    return around_import("tensorflow", _quietly)
