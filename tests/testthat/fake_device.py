"""A fake device allocator, for the memory tests of both suites
(tests/testthat/helper-memory.R and inst/python/tests/test_memory.py): it
counts the live bytes of the tensors it is told about (``track``), as a
GPU's allocator counts what is alive on it; ``peak`` is the most it held
at once, and ``reader`` reads ``used`` as customgrad._memory reads a
backend's device count."""

import weakref

from customgrad import _memory


class FakeDevice:
    def __init__(self):
        self.used, self.peak = 0, 0

    def track(self, x):
        n = _memory._nbytes(x)
        self.used += n
        self.peak = max(self.peak, self.used)
        weakref.finalize(x, self.release, n)
        return x

    def release(self, n):
        self.used -= n

    def reader(self, fresh=False):
        return self.used
