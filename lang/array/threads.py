"""How many threads NumPy's BLAS (OpenBLAS, MKL, BLIS, ...) runs matrix products on.

tapeml runs them on ONE thread unless told otherwise (`tapeml --threads N`, `TAPEML_THREADS=N`,
`tapeml.Session(threads=N)`). Measured for issue 28 on a shared 2-core machine (tests/perf/threads.py,
the README's Performance section): with other work on the cores, NumPy's default (a thread per
core) made a minigpt training step 3.6x (load 4) to 11x (load 8) slower than one thread, because
OpenBLAS's threads spin waiting for each other while the cores are taken; one thread was the
fastest setting at every size from 16x16 to 1024x1024 there. Several threads pay only for large
products on idle cores, which `--threads N` asks for.

The count belongs to the process (each BLAS library keeps one), so it is set through
threadpoolctl, the library scikit-learn and SciPy use to set it at run time:

- `apply(n)`: the command line, the REPL and the Jupyter kernel set it once at start-up: `n`
  from `--threads`, else `TAPEML_THREADS`, else the count the environment gives BLAS
  (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, MKL_NUM_THREADS, ...) when one is set, else DEFAULT;
- `limited(n)`: a Session sets it around each of its methods and puts the host program's count
  back after (Sessions running at once in several threads share the process's count: the last
  one set holds).
"""
from __future__ import annotations

import os
import threading

DEFAULT = 1
# environment variables through which a user may already have told BLAS its thread count
BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                  "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")

_libraries: list | None = None
_lock = threading.Lock()
_active = 0          # Session methods running with a count of their own
_saved: list = []    # the counts before the first of them started
_local = threading.local()      # .depth: such blocks open in this thread


def parse(text: str) -> int:
    """A thread count as written on the command line or in TAPEML_THREADS: a whole number >= 1
    (ValueError otherwise, with the words for the usage message)."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1 or str(n) != text.strip():
        raise ValueError(f"--threads needs a whole number >= 1, got '{text}'")
    return n


def _blas() -> list:
    """threadpoolctl's controllers of the BLAS libraries loaded in this process (NumPy's)."""
    global _libraries
    if _libraries is None:
        import numpy  # noqa: F401  (BLAS is loaded with NumPy: found only once it is)
        from threadpoolctl import ThreadpoolController
        _libraries = ThreadpoolController().select(user_api="blas").lib_controllers
    return _libraries


def current() -> int | None:
    """The BLAS thread count now (the first library's), or None when no BLAS was found."""
    libs = _blas()
    return libs[0].get_num_threads() if libs else None


def set_threads(n: int) -> None:
    """Run BLAS on n threads from now on (every BLAS library of the process)."""
    for lib in _blas():
        if lib.get_num_threads() != n:
            lib.set_num_threads(n)


def wanted(n: int | None = None) -> int | None:
    """The count to run on: n when given, else TAPEML_THREADS, else None when the environment
    already tells BLAS a count, else DEFAULT. A bad TAPEML_THREADS is a ValueError."""
    if n is not None:
        return n
    env = os.environ.get("TAPEML_THREADS", "").strip()
    if env:
        try:
            return parse(env)
        except ValueError:
            raise ValueError(f"TAPEML_THREADS needs a whole number >= 1, got '{env}'") from None
    if any(os.environ.get(v, "").strip() for v in BLAS_VARIABLES):
        return None
    return DEFAULT


def apply(n: int | None = None) -> None:
    """Set the process's count for a face (command line, REPL, kernel): see `wanted`."""
    n = wanted(n)
    if n is not None:
        set_threads(n)


class limited:
    """`with limited(n):` BLAS runs on n threads (nothing changes for n None). When the block
    ends, the count it found comes back if it is inside another such block of its thread;
    the count from before any block, when the last block of the process ends (blocks running at
    once in other threads keep theirs meanwhile)."""
    __slots__ = ("n", "outer")

    def __init__(self, n: int | None):
        self.n = n
        self.outer = None

    def __enter__(self):
        global _active, _saved
        if self.n is None:
            return self
        with _lock:
            libs = _blas()
            counts = [lib.get_num_threads() for lib in libs]
            if _active == 0:
                _saved = counts
            _active += 1
            depth = getattr(_local, "depth", 0)
            self.outer = counts if depth else None
            _local.depth = depth + 1
            for lib, n in zip(libs, counts):
                if n != self.n:
                    lib.set_num_threads(self.n)
        return self

    def __exit__(self, *exc):
        global _active
        if self.n is None:
            return False
        with _lock:
            _active -= 1
            _local.depth -= 1
            back = _saved if _active == 0 else self.outer
            if back is not None:
                for lib, n in zip(_blas(), back):
                    if lib.get_num_threads() != n:
                        lib.set_num_threads(n)
        return False
