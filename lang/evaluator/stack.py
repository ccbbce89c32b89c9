"""Room for deep recursion: the rest of a deep computation runs on a thread with a large stack.

A tapeml call nests several Python frames, and a call that goes through a builtin (map, grad,
sort_by, ...) also nests C frames of the Python interpreter, which the thread's C stack must
hold: 8 MB on the main thread, and a recursion through map that deep used to overflow it and
kill the process (a segfault) long before the language's limit of 20,000 nested calls. So every time
the calls nest another HOP_DEPTH deep, the evaluator (lang/evaluator/calls.py) runs the rest of
that call on a fresh *deep* thread, whose stack (STACK_BYTES of address space, touched only as
deep as the program goes) holds the next HOP_DEPTH calls through any builtin, and waits for it
(Python 3.12 and 3.13 also count C recursion per thread, with a limit that about a thousand calls
through map reach: a chain of threads keeps each one's count low).
Programs that never nest that deep never leave their thread (so a window opened by show() in the
REPL stays on the main thread), and one that does pays one hand-over (15 to 50 microseconds)
each time its calls cross that depth.

The deep thread runs in the session state of the thread it works for (lang/array/context.py), in a
copy of its context variables and with its NumPy error state (tapeml ignores floating-point
warnings: 1 / 0 is inf without a word), with Python's recursion limit raised to DEEP_LIMIT while it runs (a budget of about 1 KB of C stack
per Python frame, many times what any path of the evaluator takes, so Python's RecursionError
comes before the stack runs out). Ctrl-C (and the command line's SIGTERM and SIGHUP) arrives in
the thread that started the computation, which waits; it is raised in whichever deep thread runs
the computation at that moment (PyThreadState_SetAsyncExc, _Chain), however many hand-overs deep:
the computation unwinds there as it would have here, each waiting thread raises it in turn, and
the first one raises the signal's own exception (within milliseconds at 19,000 calls; only a
single long NumPy call, which no signal interrupts, delays it).

`SHALLOW_LIMIT` is Python's recursion limit for the part of a program that runs on the ordinary
thread: the command line and the kernel set it for the process, a Session while it runs
(`running`, which also ignores NumPy's floating-point warnings in the calling thread, as the
command line does: NumPy keeps that setting per thread). This module needs nothing of tapeml
but the session state.
"""
from __future__ import annotations

import contextvars
import sys
import threading
import time

import numpy as np

from tapeml.array import context

HOP_DEPTH = 250                 # tapeml calls nested on one thread before the next hand-over: about
                                # 0.13 MB of C stack through map (the deepest path); Python 3.12's
                                # C recursion count stops a thread near 1,000 such calls (measured)
STACK_BYTES = 64 << 20          # a deep thread's stack (address space; pages are used on touch),
                                # for HOP_DEPTH calls: hundreds of times what they take
FALLBACK_BYTES = (16 << 20, 4 << 20)      # when the system refuses a stack that large
BYTES_PER_FRAME = 1024          # the C stack allowed for each Python frame on the deep thread
DEEP_LIMIT = STACK_BYTES // BYTES_PER_FRAME     # about 65,000 Python frames per thread
SHALLOW_LIMIT = 200_000         # Python's recursion limit while tapeml runs on an ordinary thread
KEEP_IDLE = 2                   # deep threads kept waiting for the next hand-over
RETIRE_AFTER_S = 0.05           # a deep thread that worked this long may have touched much stack:
                                # it ends, which gives its stack back


_TLS = threading.local()


def on_deep_stack() -> bool:
    """True on a deep thread (its calls never hand over again)."""
    return getattr(_TLS, "deep", False)


# ---- Python's recursion limit, raised while something needs it --------------------------------
_LIMIT_LOCK = threading.Lock()
_WANTED: list[int] = []         # the limits asked for by the runs in progress
_SAVED = [0]                    # the limit before the first of them


def _raise_limit(n: int) -> None:
    with _LIMIT_LOCK:
        if not _WANTED:
            _SAVED[0] = sys.getrecursionlimit()
        _WANTED.append(n)
        if sys.getrecursionlimit() < n:
            sys.setrecursionlimit(n)


def _lower_limit(n: int) -> None:
    with _LIMIT_LOCK:
        _WANTED.remove(n)
        want = max(_WANTED, default=_SAVED[0])
        if sys.getrecursionlimit() > want:
            try:
                sys.setrecursionlimit(want)
            except RecursionError:       # this thread is deeper than that: keep the higher limit
                pass


class running:
    """`with running(state):` a Session's method: its state is the thread's current one, NumPy's
    floating-point warnings are off in this thread and Python's recursion limit is at least
    SHALLOW_LIMIT (as on the command line), all put back after (the limit when no other run
    needs it)."""
    __slots__ = ("state", "errstate")

    def __init__(self, state: context.State):
        self.state = state
        # NumPy's, whatever the session's device: host NumPy code (files, printing, limits) runs on
        # every backend, and torch has no floating-point error state (its operations are quiet)
        self.errstate = np.errstate(all="ignore")

    def __enter__(self):
        _raise_limit(SHALLOW_LIMIT)
        self.errstate.__enter__()
        self.state.enter()
        return self

    def __exit__(self, *exc):
        self.state.leave()
        self.errstate.__exit__(*exc)
        _lower_limit(SHALLOW_LIMIT)
        return False


# ---- the deep threads ------------------------------------------------------------------------
class _Chain:
    """The threads of one computation: the thread that started it (which Ctrl-C reaches) waits on
    a deep thread, which may wait on another, and so on; exactly one of them, `active`, runs the
    computation at any moment. An interrupt that reaches a waiting thread is raised in the active
    one (and kept in `interrupt`: a deep thread that starts later, or a waiting one whose job ends
    without it, raises it), so it stops the computation within one bytecode however deep it is,
    and unwinds there as it would have on the main thread.

    An exception raised in a thread that way is lost when it lands in a finalizer (__del__, a
    weakref or gc callback: Python prints "Exception ignored" and goes on), so the thread that
    started the computation raises it again in the running thread when that one has not handed
    the computation back within RESEND_S (unwinding 250 calls takes milliseconds)."""
    __slots__ = ("lock", "active", "interrupt", "sent_to", "sent_at", "starting", "deferred")

    def __init__(self):
        self.lock = threading.Lock()            # guards the rest
        self.active = threading.get_ident()
        self.interrupt = None                   # the class of the first interrupt, once one came
        self.sent_to = None                     # the thread it was raised in last, and when
        self.sent_at = 0.0
        # Python 3.11 gives a thread being started the id of the thread starting it until it runs,
        # and PyThreadState_SetAsyncExc raises in the first thread with the id, the newest: an
        # interrupt sent then killed the new thread before it said it had started, and its
        # starter waited for ever. While the running thread starts one, an interrupt waits.
        self.starting = False
        self.deferred = False

    def forward(self, exc: BaseException) -> None:
        """`exc` (KeyboardInterrupt, Terminated) was raised in this thread while it waited."""
        with self.lock:
            if self.interrupt is None:
                self.interrupt = type(exc)
            self._send()

    def resend(self) -> None:
        """Raise the interrupt again in the running thread if it has run on without it for
        RESEND_S (not while it handles it: an `except` or `finally` of the unwinding)."""
        with self.lock:
            if self.deferred:
                self._send()
            elif self.active != self.sent_to:     # it went on in another thread: it is unwinding
                self.sent_to, self.sent_at = self.active, time.monotonic()
            elif time.monotonic() - self.sent_at > RESEND_S:
                if isinstance(sys._current_exceptions().get(self.active), self.interrupt):
                    self.sent_at = time.monotonic()
                else:
                    self._send()

    def _send(self) -> None:
        self.deferred = self.starting
        if self.starting:
            return
        if self.active != threading.get_ident():
            _set_async_exc(self.active, self.interrupt)
        self.sent_to, self.sent_at = self.active, time.monotonic()


class _Job:
    __slots__ = ("fn", "args", "state", "variables", "errors", "chain", "parent", "over", "done",
                 "result", "error")

    def __init__(self, fn, args, state, chain: _Chain):
        self.fn, self.args, self.state, self.chain = fn, args, state, chain
        self.variables = contextvars.copy_context()     # the caller's context variables
        self.errors = np.geterr()                       # and NumPy error state
        self.parent = threading.get_ident()             # the thread that waits for it
        self.over = False                               # set by the deep thread when it is over,
        self.done = threading.Lock()                    # which then releases this lock
        self.done.acquire()
        self.result = self.error = None


class _Worker(threading.Thread):
    def __init__(self, stack_bytes: int):
        super().__init__(name="tapeml-deep-stack", daemon=True)
        import queue
        self.jobs = queue.SimpleQueue()
        self.limit = stack_bytes // BYTES_PER_FRAME

    def run(self):
        _TLS.deep = True
        while True:
            try:
                job = self.jobs.get()
                if job is None:
                    return
                self.work(job)
            except BaseException:   # noqa: BLE001 - (no interrupt is raised here: see work)
                continue

    def work(self, job: _Job):
        chain = job.chain
        _TLS.chain = chain
        _raise_limit(self.limit)        # (this thread's; nothing is raised in it before `active`)
        job.state.enter()
        try:
            with chain.lock:
                cancel = chain.interrupt
                if cancel is None:
                    chain.active = self.ident   # from here on an interrupt is raised in this thread
            if cancel is not None:
                raise cancel()
            job.result = job.variables.run(_call_with_errstate, job.errors, job.fn, job.args)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread, which raises it
            job.error = e           # (first: an interrupt lands only after a call)
        # The computation goes back to the waiting thread: from here on no interrupt is raised in
        # this one, and one raised just before is cleared (it may also land in these lines: they
        # repeat until they are through). The waiting thread raises the chain's interrupt.
        while True:
            try:
                with chain.lock:
                    chain.active = job.parent
                    _set_async_exc(self.ident, None)
                break
            except BaseException:   # noqa: BLE001
                continue
        if isinstance(job.error, (KeyboardInterrupt, chain.interrupt or KeyboardInterrupt)):
            # its frames here are of no use to anyone (the faces print one line for it): freed
            # now, not held by a traceback through 20,000 calls while it unwinds
            job.error.__traceback__ = None
        job.state.leave()
        _lower_limit(self.limit)
        _TLS.chain = None
        job.over = True
        job.done.release()


def _call_with_errstate(errors, fn, args):
    with np.errstate(**errors):
        return fn(*args)


_POOL_LOCK = threading.Lock()
_IDLE: list[_Worker] = []


def _start_worker(chain: _Chain | None):
    """A new deep thread, or None when the system gives none (then the caller runs the work).
    No interrupt is raised in this thread while it starts one (_Chain.starting)."""
    with _POOL_LOCK:                    # threading.stack_size is process-wide
        for size in (STACK_BYTES,) + FALLBACK_BYTES:
            try:
                old = threading.stack_size(size)
            except (ValueError, RuntimeError):
                continue
            try:
                worker = _Worker(size)
                try:
                    if chain is not None:
                        with chain.lock:
                            chain.starting = True
                    worker.start()
                finally:
                    if chain is not None:
                        with chain.lock:
                            chain.starting = False
                return worker
            except RuntimeError:        # "can't start new thread": no memory for this stack
                continue
            finally:
                threading.stack_size(old)
    return None


def _set_async_exc(ident: int, exc) -> None:
    """Raise `exc` (a class) in the thread `ident` at its next instruction; None clears one."""
    import ctypes
    arg = ctypes.py_object(exc) if exc is not None else ctypes.c_void_p(0)
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), arg)


WAIT_S = 0.05           # how often the thread that started a computation looks at its signals:
                        # one noted without waking it (_thread.interrupt_main, a signal delivered
                        # to another thread) is handled within this time
RESEND_S = 0.5          # an interrupt not acted on in this time was lost: it is raised again


def run_deep(fn, *args):
    """fn(*args) on a fresh deep thread, in the calling thread's session state; returns its result
    or raises its exception. A deep thread hands over again (each thread then holds at most
    HOP_DEPTH nested calls: Python 3.12 and later count C recursion per thread and stop it long
    before 20,000 calls through a builtin); when no thread can be made, runs it here.

    An interrupt (Ctrl-C, the command line's SIGTERM) that arrives while this thread waits is
    raised in the thread running the computation (_Chain), and raised here when the job is over.
    The waiting is written so that an interrupt landing at any instruction of it neither loses
    the job nor leaves before the job is over (the deep thread would run on unseen)."""
    with _POOL_LOCK:
        worker = _IDLE.pop() if _IDLE else None
    deep = on_deep_stack()
    if worker is None:
        worker = _start_worker(_TLS.chain if deep else None)
        if worker is None:
            return fn(*args)
    chain = _TLS.chain if deep else _Chain()
    job = _Job(fn, args, context.current(), chain)
    interrupted = None
    start = time.monotonic()
    sent = False
    # A plain lock and flags: an interrupt can land only after a call into C returns (never between
    # setting a flag and the call after it), and no Python code of threading's runs in between.
    while not job.over:
        try:
            if not sent:
                sent = True
                worker.jobs.put(job)
            # the deep threads that wait are woken by their job's end (the interrupts that reach
            # them come from the thread that started the computation, only as that job ends)
            if deep:
                job.done.acquire()
            elif not job.done.acquire(timeout=WAIT_S) and interrupted is not None:
                chain.resend()
        except BaseException as e:  # noqa: BLE001 - Ctrl-C, SIGTERM: the running thread gets it
            interrupted = interrupted or e
            try:
                chain.forward(e)
            except BaseException as again:  # noqa: BLE001 - a second one, in the forwarding
                interrupted = interrupted or again
    keep = time.monotonic() - start < RETIRE_AFTER_S
    placed = False
    while True:                     # the job is over: the thread waits for the next or ends
        try:
            if not placed:
                with _POOL_LOCK:
                    keep = keep and len(_IDLE) < KEEP_IDLE
                    placed = True
                    if keep:
                        _IDLE.append(worker)
                    else:
                        worker.jobs.put(None)
            break
        except BaseException as e:  # noqa: BLE001
            interrupted = interrupted or e
    error, result = job.error, job.result
    job.error = job.result = None
    if interrupted is not None and not deep:
        raise interrupted           # the signal's own exception (SIGHUP's Terminated keeps its number)
    if error is not None:
        try:
            raise error
        finally:
            error = None
    if interrupted is not None:
        raise interrupted
    if chain.interrupt is not None:
        raise chain.interrupt()     # it reached the deep thread as its job ended: it goes on here
    return result
