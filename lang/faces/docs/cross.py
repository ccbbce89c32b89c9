"""The docs as another machine prints them: `tapeml docs check` also builds the docs in a
subprocess that computes as another machine would, and compares that build with this process's,
line by line. A printed digit that moves between the two is rounding noise (a 1e-17 where 0 is
meant, the condition number of a singular matrix): the page would differ on a machine with
another CPU, so the check fails naming the page and the line.

The other machine differs from this one in three ways:
- another OpenBLAS kernel (OPENBLAS_CORETYPE, read when NumPy loads OpenBLAS, so only a new
  process can change it): another order of the sums inside matmul and LAPACK;
- NumPy's dispatched SIMD off (NPY_DISABLE_CPU_FEATURES): the baseline loops of an older CPU;
- every result of matmul and of NumPy's LAPACK (np.linalg) moved by about one rounding unit at
  its own scale (`nudge_blas`): what a BLAS that this machine cannot run (another CPU family,
  MKL, Accelerate) may return instead. Past rounding, a page that prints the same is the same on
  every machine; exact results stay exact (a sum of whole numbers, a zero with no nonzero
  term, the zeros LAPACK writes below a triangle).
"""
from __future__ import annotations

import ctypes
import difflib
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

DEFAULT_KERNELS = ("PRESCOTT",)     # OpenBLAS's oldest x86-64 kernel: the farthest from a modern CPU's
CORENAME = ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename64_",
            "openblas_get_corename")
FIX = ("a printed digit depends on the machine's BLAS kernel or SIMD: print round(x, 10) or a property "
       "(max(abs(A @ inv(A) - eye(n))) < 1e-12) instead of rounding noise, and keep computed noise out of "
       "error messages")


# ---- which machine this process computes as ------------------------------------------------------
def _openblas_paths() -> list[str]:
    """The OpenBLAS libraries this process has loaded (Linux: /proc/self/maps), else those that
    ship in NumPy's wheel."""
    import numpy as np
    paths = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                p = line.split(maxsplit=5)[-1].strip()
                if "openblas" in os.path.basename(p).lower() and p not in paths:
                    paths.append(p)
    except OSError:
        pass
    if not paths:
        base = os.path.dirname(os.path.dirname(np.__file__))
        for pattern in ("numpy.libs/*openblas*", "numpy/.dylibs/*openblas*", "scipy_openblas*/lib/*openblas*"):
            paths += sorted(glob.glob(os.path.join(base, pattern)))
    return paths


def blas_core() -> str | None:
    """The OpenBLAS kernel NumPy's BLAS runs ("Haswell", "SkylakeX"; OPENBLAS_CORETYPE=PRESCOTT
    shows as "Katmai"), or None when NumPy's BLAS is not an OpenBLAS whose core can be read."""
    for path in _openblas_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sym in CORENAME:
            f = getattr(lib, sym, None)
            if f is not None:
                f.restype = ctypes.c_char_p
                name = f()
                return name.decode() if name else None
    return None


def simd_features() -> list[str]:
    """NumPy's dispatched CPU features in use here (beyond its compiled baseline)."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:
        return []
    return [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]


def machine() -> dict:
    return {"core": blas_core(), "simd": simd_features()}


def describe_machine(m: dict) -> str:
    core = f"OpenBLAS core {m['core']}" if m.get("core") else "BLAS core unknown (not OpenBLAS?)"
    simd = " ".join(m.get("simd") or []) or "baseline only"
    return f"{core}, NumPy SIMD {simd}"


def other_env(kernel: str) -> dict:
    """The environment of the other machine: the OpenBLAS kernel, NumPy's SIMD beyond its
    baseline off, no progress bar."""
    env = dict(os.environ)
    env["OPENBLAS_CORETYPE"] = kernel
    off = simd_features()
    if off:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(off)
    env["TAPEML_PROGRESS"] = "0"
    return env


# ---- rounding noise of another BLAS ------------------------------------------------------------
def nudge_blas() -> None:
    """Make this process's np.matmul and np.linalg factorizations return results moved by one
    rounding unit at their scale, as another BLAS would (for the other machine's build only).
    matmul: element ij moves by +-eps/2 * (|A| @ |B|)_ij, the scale of its rounding error, unless
    both operands hold whole numbers (then every BLAS is exact); a zero of nonzero terms moves too.
    np.linalg results: each nonzero entry moves by +-eps/2 * the largest magnitude of its matrix.
    The sign is a hash of the value's bits, as a real BLAS's rounding is a fixed function of its
    inputs: the same call moves the same way every time, and f(x + h) and f(x - h) move
    independently (the finite differences of check_grad see another machine's noise)."""
    import functools
    import numpy as np

    def sign(x):
        bits = np.array(x, order="C").view(np.uint64 if x.dtype.itemsize == 8 else np.uint32).astype(np.uint64)
        return 1.0 - 2.0 * (((bits * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(63)).astype(np.float64))

    def moved(x, scale):
        if x.dtype.kind == "c":
            return moved(x.real, scale) + 1j * moved(x.imag, scale)
        with np.errstate(all="ignore"):
            d = sign(x) * (np.finfo(x.dtype).eps / 2) * scale
            return np.where(np.isfinite(d), x + d, x).astype(x.dtype)

    def at_own_scale(x):
        if not (isinstance(x, np.ndarray) and x.dtype.kind in "fc" and x.size) or not np.isfinite(x).all():
            return x
        mag = np.abs(x)
        scale = mag.max(axis=(-2, -1), keepdims=True) if x.ndim >= 2 else mag.max(axis=-1, keepdims=True)
        return np.where(x != 0, moved(x, scale), x)

    def whole(a):
        a = np.asarray(a)
        return a.dtype.kind in "biu" or (a.dtype.kind == "f" and bool(np.all(a == np.round(a))))

    matmul = np.matmul

    @functools.wraps(matmul)
    def nudged_matmul(a, b, *args, **kwargs):
        r = matmul(a, b, *args, **kwargs)
        if not isinstance(r, (np.ndarray, np.floating)) or r.dtype.kind != "f" or not r.size or args or kwargs \
                or (whole(a) and whole(b)):
            return r
        m = moved(np.asarray(r), matmul(np.abs(a), np.abs(b)))
        return m if isinstance(r, np.ndarray) else r.dtype.type(m)     # a vector . vector stays a scalar

    def wrap(f, keep=()):
        @functools.wraps(f)
        def g(*args, **kwargs):
            r = f(*args, **kwargs)
            if isinstance(r, tuple):
                parts = [v if i in keep else at_own_scale(v) for i, v in enumerate(r)]
                return type(r)(*parts) if hasattr(r, "_fields") else tuple(parts)
            return at_own_scale(r)
        return g

    np.matmul = nudged_matmul
    for name in ("svd", "inv", "solve", "qr", "eigh", "eig", "eigvals", "eigvalsh", "cholesky", "pinv", "det",
                 "lstsq"):
        setattr(np.linalg, name, wrap(getattr(np.linalg, name), keep=(2,) if name == "lstsq" else ()))
    np.linalg.slogdet = wrap(np.linalg.slogdet, keep=(0,))     # the sign stays exact


# ---- the build in a subprocess ---------------------------------------------------------------
@dataclass
class Child:
    kernel: str
    out: str                       # the subprocess builds into out/docs
    proc: subprocess.Popen
    label: str = ""

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.out, ignore_errors=True)


CHILD_CODE = "import sys; from tapeml.faces.docs.cross import child_main; sys.exit(child_main(sys.argv[1:]))"


def start(kernel: str, source_root: str, nudge: bool = True) -> Child:
    """Start building the docs of source_root in a subprocess under `kernel` (and `nudge_blas`);
    it runs alongside."""
    out = tempfile.mkdtemp(prefix=f"tapeml-docs-{kernel.lower()}-")
    env = other_env(kernel)
    # the child computes as this process does but for the machine: the same recursion limit (the
    # CLI raises it), so a page that shows a deep recursion's error reads the same
    proc = subprocess.Popen([sys.executable, "-c", CHILD_CODE, out, source_root, str(sys.getrecursionlimit()),
                             "nudge" if nudge else "plain"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    label = f"OPENBLAS_CORETYPE={kernel}" + (f" NPY_DISABLE_CPU_FEATURES=\"{env['NPY_DISABLE_CPU_FEATURES']}\""
                                             if "NPY_DISABLE_CPU_FEATURES" in env else "") \
        + (" with BLAS results moved by a rounding unit" if nudge else "")
    return Child(kernel, out, proc, label)


def child_main(argv: list[str]) -> int:
    """In the subprocess: build into argv[0] from the sources of argv[1] under the recursion limit
    argv[2], with nudge_blas when argv[3] is "nudge"; write what machine it computed as to
    argv[0]/machine.json; the build's failures on stderr."""
    out, source_root, limit, how = argv
    sys.setrecursionlimit(int(limit))
    if how == "nudge":
        nudge_blas()
    from tapeml.faces.docs.render import build
    failures = build(out, source_root=source_root)
    with open(os.path.join(out, "machine.json"), "w", encoding="utf-8") as f:
        json.dump(machine(), f)
    for e in failures:
        print(f"{e.where}: {e.message}", file=sys.stderr)
    return 1 if failures else 0


def finish(child: Child, here_docs: str, timeout: float = 900) -> tuple[list[str], str]:
    """Wait for the child and compare its build with here_docs: (problems, a note on what ran)."""
    try:
        _, err = child.proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.close()
        return [f"the build under {child.label} took over {timeout:.0f}s"], ""
    try:
        there = {}
        try:
            with open(os.path.join(child.out, "machine.json"), encoding="utf-8") as f:
                there = json.load(f)
        except (OSError, ValueError):
            pass
        if child.proc.returncode != 0:
            tail = "\n".join("    " + x for x in err.strip().split("\n")[-30:])
            problems = [f"the build under {child.label} failed (exit {child.proc.returncode}):\n{tail}"]
        else:
            problems = compare_builds(here_docs, os.path.join(child.out, "docs"), child.label)
        here = machine()
        note = f"{child.label}: {describe_machine(there)}; here: {describe_machine(here)}"
        if there and there == here:
            note += " (the same machine: this comparison shows nothing)"
        return problems, note
    finally:
        child.close()


# ---- comparing two builds ----------------------------------------------------------------------
def _tree(base: str) -> set[str]:
    out = set()
    for dirpath, _, files in os.walk(base):
        for f in files:
            if f.endswith((".md", ".png")):
                out.add(os.path.relpath(os.path.join(dirpath, f), base))
    return out


def compare_builds(here: str, there: str, label: str, limit: int = 6) -> list[str]:
    """Every difference between two builds of docs/ (this process's, the other machine's), one
    entry per page, naming the page and its lines as this build numbers them. The gradient
    bounds are compared by pass/fail only, as `check` compares them: the nudged BLAS gives finite
    differences up to 7 times the error of this machine's (real kernels: under 2 times), and the
    bounds carry their own margin (run.error_bound); the clean-copy test rebuilds them under
    another real kernel, byte for byte."""
    from tapeml.faces.docs.run import normalize_page, same_png
    problems = []
    a, b = _tree(here), _tree(there)
    for f in sorted(a ^ b):
        problems.append(f"docs/{f}: made only {'here' if f in a else 'on the other machine (' + label + ')'}")
    for f in sorted(a & b):
        pa, pb = os.path.join(here, f), os.path.join(there, f)
        if f.endswith(".png"):
            if not same_png(pa, pb):
                problems.append(f"docs/{f}: the figure differs on the other machine ({label})")
            continue
        with open(pa, encoding="utf-8") as fa, open(pb, encoding="utf-8") as fb:
            old, new = normalize_page(fa.read()).split("\n"), normalize_page(fb.read()).split("\n")
        if old == new:
            continue
        lines = []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            if tag == "equal":
                continue
            for k in range(max(i2 - i1, j2 - j1)):
                mine = old[i1 + k] if i1 + k < i2 else "(no line)"
                theirs = new[j1 + k] if j1 + k < j2 else "(no line)"
                lines.append(f"docs/{f}:{min(i1 + k, max(i2 - 1, i1)) + 1}: here {mine.strip()!r}, "
                             f"there {theirs.strip()!r}")
        shown = lines[:limit] + ([f"... ({len(lines) - limit} more lines of docs/{f})"] if len(lines) > limit else [])
        problems.append(f"docs/{f}: differs on the other machine ({label}):\n" + "\n".join("    " + x for x in shown))
    return problems
