"""R's main thread serving calls from other threads.

R runs only on the main thread (reticulate aborts R elsewhere).  Where a
computation must run on another thread while it still needs R (a
TensorFlow graph whose host callbacks TensorFlow runs on its own threads),
:func:`serve` runs it on a thread of its own and has the main thread run,
meanwhile, the calls handed over with :func:`on_main`.  Only running is
handed over: a graph is traced on the main thread, where the caller's
thread-local state (TensorFlow's tapes and graph scopes, Keras' dtype
policy) is.  With no one serving, :func:`on_main`
refuses at once (``customgrad_error_thread``): never a wait that can't end.

The threads that run the work are kept, idle, for the next call: TensorFlow
keeps its per-thread context (a ``FunctionCallOptions`` and a list) of
every thread that ever ran a function, for good, so a thread per call grew
Python by 2 objects a served step (`make soak`, run of 2026-12-06).
"""

import queue
import threading

from customgrad.errors import ThreadError

_MAIN_THREAD = threading.main_thread()
_requests = queue.Queue()
_serving = [0]  # how many serve() calls wait on the main thread
_idle = []  # _Worker threads waiting for work (list.append / pop are atomic)


def is_main_thread():
    return threading.current_thread() is _MAIN_THREAD


def is_serving():
    """Whether the main thread serves calls handed over (:func:`on_main`)."""
    return _serving[0] > 0


def serve(fn, *args):
    """``fn(*args)`` on a thread of its own while the main thread runs the
    calls it hands over; on another thread, ``fn(*args)`` as it is."""
    if not is_main_thread():
        return fn(*args)
    done = threading.Event()
    result = []
    # One worker per serve() waiting: a nested call (R calling a served
    # function from a request) takes another.
    worker = _idle.pop() if _idle else _Worker()

    def work():
        try:
            result.append((True, fn(*args)))
        except BaseException as exc:  # noqa: BLE001 - re-raised on the main thread
            result.append((False, exc))
        finally:
            # Idle again only once its work is over (an interrupted serve()
            # leaves it finishing).
            _idle.append(worker)
            done.set()
            _requests.put(None)  # wakes the loop (or a nested one)

    _serving[0] += 1
    try:
        worker.jobs.put(work)
        # A loop nested in a request (R calling a served function again)
        # may take this one's wake-up: each loop checks its own flag.
        while not done.is_set():
            try:
                # A timeout, so that an interrupt from R reaches this loop.
                request = _requests.get(timeout=0.1)
            except queue.Empty:
                continue
            if request is not None:
                request.run()
    finally:
        _serving[0] -= 1
    ok, value = result[0]
    if not ok:
        raise value
    return value


def on_main(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on the main thread: here, or handed to
    :func:`serve`'s loop; its exception is raised here."""
    if is_main_thread():
        return fn(*args, **kwargs)
    if not is_serving():
        raise ThreadError(thread=threading.current_thread().name, host="run")
    request = _Request(fn, args, kwargs)
    _requests.put(request)
    request.event.wait()
    ok, result = request.result
    if not ok:
        raise result
    return result


class _Worker:
    """A daemon thread (an interrupted step must not hold R's exit) that
    runs the jobs put to it, one after another."""

    __slots__ = ("jobs",)

    def __init__(self):
        self.jobs = queue.SimpleQueue()
        threading.Thread(target=self._run, name="customgrad-serve", daemon=True).start()

    def _run(self):
        while True:
            self.jobs.get()()


class _Request:
    __slots__ = ("fn", "args", "kwargs", "event", "result")

    def __init__(self, fn, args, kwargs):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.event = threading.Event()
        self.result = None

    def run(self):
        try:
            self.result = (True, self.fn(*self.args, **self.kwargs))
        except BaseException as exc:  # noqa: BLE001 - re-raised on its thread
            self.result = (False, exc)
        self.event.set()
