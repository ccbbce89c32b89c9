"""The backend seam: where the matrices of a session live (NumPy on the CPU, or PyTorch tensors on
the CPU or a GPU), and everything about them that differs between the two, in one place.

    from tapeml.array import backend as B
    be = B.current()                 # the session's backend: the one that makes new matrices
    x = be.asarray([[1, 2], [3, 4]], be.float_dtype())
    xp = B.xp_of(a, b)               # the namespace that computes on a and b
    B.is_array(x)                    # a matrix of any backend (type(x) in B.ARRAYS, inline)
    B.to_numpy(x)                    # the one boundary: printing, files, plots, the Python API

A `Backend` knows
- its array type and how to recognise it (`array_type`; `ARRAYS` holds every loaded backend's);
- its namespace `xp`: the NumPy module itself for NumPy (NumPy 2 follows the array API standard
  in the names the portable code uses), array-api-compat's wrapper of torch for PyTorch;
- the dtype table: the session's float type is named the NumPy way (`context.LIVE["dtype"]` is
  np.float64 or np.float32 on every backend); `dtype(np_type)` gives the backend's own;
- creation from Python or NumPy data on its device (`asarray`) and conversion back (`to_numpy`);
- floating-point error state (`errstate()`: NumPy's warnings off; torch has none);
- the operations the standard lacks (`add_at`, ...), each written once per backend;
- how much memory its device has (the size guard's limit).

The NumPy backend is the default and imports nothing more; the PyTorch one is made on first use
of a `torch:...` device (torch is an optional extra, `pip install tapeml[torch]`), with torch's
autograd never asked for: tapeml's tape is the only autodiff on every backend.

A session's backend is the slot "backend" (lang/array/context.py): `tapeml --device`,
`tapeml.Session(device=...)` and `set_device(...)` choose it; TAPEML_DEVICE sets the default
of the process (the tests run the suite on `torch:cpu` that way).
"""
from __future__ import annotations

import os
import math
import re

import numpy as np

from tapeml.array import context

# math.erf and math.erfc as ufuncs on object arrays, made once (NumPy has neither)
_ERF, _ERFC = np.frompyfunc(math.erf, 1, 1), np.frompyfunc(math.erfc, 1, 1)

ARRAYS: set = {np.ndarray}          # the array types of every backend loaded so far


class Matrix(metaclass=__import__("abc").ABCMeta):
    """`isinstance(x, Matrix)`: a matrix of any backend (each backend's array type is registered)."""


Matrix.register(np.ndarray)
_BY_TYPE: dict = {}                 # array type -> the Backend that computes on it


class DeviceError(ValueError):
    """A device that cannot be used: an unknown name, torch missing, no GPU."""


class Backend:
    """NumPy on the CPU: the default backend."""
    name = "numpy"
    device = "cpu"
    array_type = np.ndarray
    xp = np
    # what a failed factorization raises (np.linalg.LinAlgError; torch's own for torch)
    linalg_errors: tuple = (np.linalg.LinAlgError,)
    # what a shape mismatch raises inside a primitive (torch says RuntimeError)
    shape_errors: tuple = (ValueError,)

    def __repr__(self):
        return f"<tapeml backend {self.name}>"

    # ---- dtypes -------------------------------------------------------------------------------
    def dtype(self, np_type):
        """The backend's dtype for a NumPy scalar type or dtype (np.float64, np.bool_, ...)."""
        return np.dtype(np_type)

    def float_dtype(self):
        """The session's float type, as this backend names it."""
        return self.dtype(context.LIVE["dtype"])

    def np_dtype(self, dtype) -> np.dtype:
        """The NumPy dtype of one of this backend's dtypes."""
        return np.dtype(dtype)

    def wide(self, dtype):
        """The float type a reduction accumulates in (rms_norm's mean square): float64, or the
        type itself on a device without float64 (MPS)."""
        return np.dtype(np.float64)

    def is_bool(self, a) -> bool:
        return a.dtype == np.bool_

    def is_float(self, a) -> bool:
        return a.dtype.kind == "f"

    # ---- crossing -----------------------------------------------------------------------------
    def asarray(self, obj, dtype=None):
        """A matrix of this backend from Python numbers, nested lists, NumPy arrays or this
        backend's own arrays (`dtype` a NumPy type or None to keep the data's)."""
        context.LIVE["made"] = True
        return np.asarray(obj, dtype=dtype)

    def to_numpy(self, a) -> np.ndarray:
        return a

    def item(self, a):
        """A 0-d array's value as a Python float or bool."""
        v = a[()] if type(a) is np.ndarray else a
        return bool(v) if isinstance(v, (bool, np.bool_)) else float(v)

    def contiguous(self, a):
        """`a` with its elements in row-major order in memory (a copy where they are not)."""
        return np.ascontiguousarray(a)

    def owned(self, a):
        """`a`, or a copy of it when it is a broadcast view (elements sharing memory): a matrix
        handed to the user (a gradient) holds its own memory."""
        return a if a.flags.writeable else a.copy()

    # ---- state --------------------------------------------------------------------------------
    def errstate(self):
        """A context where overflow, 0/0 and invalid operations give inf and NaN quietly."""
        return np.errstate(all="ignore")

    def memory_bytes(self) -> int | None:
        """The memory of the device the arrays live on (None: the host's, as limits.py reads it)."""
        return None

    def synchronize(self) -> None:
        """Wait for the device's queued work (timing); nothing to wait for on the CPU."""

    # ---- beyond the array API standard --------------------------------------------------------
    def erf(self, x):
        """The error function elementwise (NumPy has none: math.erf per element)."""
        return np.asarray(_ERF(x), dtype=x.dtype if x.dtype.kind == "f" else np.float64)

    def erfc(self, x):
        """1 - erf(x) without the cancellation, elementwise (math.erfc per element)."""
        return np.asarray(_ERFC(x), dtype=x.dtype if x.dtype.kind == "f" else np.float64)

    def ldexp(self, x, e):
        """x * 2^e exactly (e whole numbers: an integer array or a number)."""
        return np.ldexp(x, e)

    def add_at(self, target, index, values):
        """A copy of `target` with `values` added at `index` (repeated positions add up):
        np.add.at; `index` an integer array or a tuple of them."""
        out = target.copy()
        np.add.at(out, index, values)
        return out

    def frexp(self, x):
        """(mantissa, exponent) elementwise: x = m 2^e with |m| in [0.5, 1), e an int32 array
        (0 and m = x where x is 0, inf or nan)."""
        m, e = np.frexp(x)
        return m, e.astype(np.int32)

    # ---- the kernel table ---------------------------------------------------------------------
    # What genuinely differs per backend beside the array API, by name; the primitives are written
    # once against the namespace of their inputs (softmax_ops.py, norm_ops.py, dense_ops.py,
    # attention_ops.py, elementwise_ops.py) and ask their inputs' backend for a kernel by one lookup,
    # `B.of(x).softmax`. An entry is None where the backend has no such kernel: the caller's
    # portable code runs instead (for NumPy that code is the kernel: nn's values are NumPy's).
    #
    #   name                      NumPy                               PyTorch
    #   reduce_sum, _max, _min    np.add/maximum/minimum.reduce (2)   xp.sum, xp.max, xp.min
    #   softmax                   in place on one fresh array (1)     torch.softmax
    #   log_softmax               one pass on x - max (1)             torch.log_softmax
    #   softmax_backward          y (g - sum(g y))                    _softmax_backward_data
    #   log_softmax_backward      g - exp(y) sum(g)                   _log_softmax_backward_data
    #   layer_norm                None (norm_ops' two passes)         native_layer_norm
    #   layer_norm_backward       None                                native_layer_norm_backward
    #   linear                    None (matmul, + b)                  addmm (nn.Linear's)
    #   relu, relu_backward       maximum, where                      threshold, threshold_backward
    #   flash_attention, _backward  None (attention_ops' scores)      the CPU flash kernel (else None)
    #
    # (1) the rows' max m given by the caller where it has it: rows whose max is finite only; the
    # NumPy entries keep what the twin NumPy code measured (issue 39's note gives the figures).
    # (2) (x, axis, keepdims=False): the ufuncs' own reductions, without the Python layer of np.sum
    # and np.max (1 us a call: a tenth of an 8x16 layer_norm's time); the same numbers.
    reduce_sum = staticmethod(np.add.reduce)
    reduce_max = staticmethod(np.maximum.reduce)
    reduce_min = staticmethod(np.minimum.reduce)

    def softmax(self, x, dim, m=None):
        """softmax along dim of float rows whose max m (taken when None) is finite: x - m, its
        exponentials and their division in place on that one fresh array."""
        e = np.subtract(x, x.max(axis=dim, keepdims=True) if m is None else m)
        np.exp(e, out=e)
        e /= np.add.reduce(e, dim, keepdims=True)      # each row's sum is at least exp(0) = 1
        return e

    def log_softmax(self, x, dim, m=None):
        """log_softmax along dim of float rows whose max m (taken when None) is finite."""
        z = np.subtract(x, x.max(axis=dim, keepdims=True) if m is None else m)
        return z - np.log(np.add.reduce(np.exp(z), dim, keepdims=True))

    def softmax_backward(self, g, y, dim):
        """softmax's VJP from its output y: y (g - sum(g y))."""
        return y * (g - (g * y).sum(axis=dim, keepdims=True))

    def log_softmax_backward(self, g, y, dim):
        """log_softmax's VJP from its output y: g - exp(y) sum(g)."""
        return g - np.exp(y) * g.sum(axis=dim, keepdims=True)

    # layer_norm(x, gamma, beta, eps) -> (out, mean, 1/std) over the last axis, gamma and beta (or
    # None) of shape [D], eps > 0, mean and 1/std keeping the axis as 1; layer_norm_backward(g, x,
    # mean, rstd, gamma, beta, which) -> the cotangents of x, gamma, beta (None where `which` says
    # False). NumPy has none: norm_ops' two-pass statistics are its values.
    layer_norm = None
    layer_norm_backward = None
    # linear(x, w, b): x @ w + b for x [..., K], w [K, N], b [N] or None in one fused product.
    linear = None
    # flash_attention(q, k, v, causal, scale) -> (softmax(q k' scale) v, the rows' log-sum-exp) for
    # q, k, v [B, H, L, d] in one pass that never forms the scores (or None where the kernel does
    # not apply); flash_attention_backward(g, q, k, v, out, lse, causal, scale) -> (gq, gk, gv).
    flash_attention = None
    flash_attention_backward = None

    def relu(self, x):
        """max(x, 0) of a float matrix: +0 where x is 0 or -0, NaN where x is NaN."""
        return np.maximum(x, 0.0)

    def relu_backward(self, g, ans):
        """relu's VJP from its output: g where ans > 0, else 0 (also where ans is NaN, and where
        g is infinite against a 0 slope)."""
        return np.where(ans > 0, g, 0.0)


NUMPY = Backend()
_BY_TYPE[np.ndarray] = NUMPY


# ---- PyTorch --------------------------------------------------------------------------------
_TORCH = {}         # device string -> TorchBackend


class TorchBackend(Backend):
    """PyTorch tensors on one device (cpu, cuda:N, mps). torch's autograd is never asked for:
    no tensor is made with requires_grad, and the tape records the operations itself."""

    def __init__(self, device: str):
        import torch
        import array_api_compat.torch as xp
        self.torch = torch
        self.xp = xp
        self.device = device
        self.name = f"torch:{device}"
        aten = torch.ops.aten       # the overloads themselves: a packet resolves one on every call
        self._ln_backward = aten.native_layer_norm_backward.default
        self._threshold_backward = aten.threshold_backward.default
        self._flash = aten._scaled_dot_product_flash_attention_for_cpu.default
        self._flash_backward = aten._scaled_dot_product_flash_attention_for_cpu_backward.default
        self.array_type = torch.Tensor
        self.linalg_errors = (torch.linalg.LinAlgError, np.linalg.LinAlgError)
        self.shape_errors = (ValueError, RuntimeError)
        self._dtypes = {np.dtype(np.float64): torch.float64, np.dtype(np.float32): torch.float32,
                        np.dtype(np.bool_): torch.bool, np.dtype(np.int64): torch.int64,
                        np.dtype(np.int32): torch.int32, np.dtype(np.uint8): torch.uint8,
                        np.dtype(np.float16): torch.float16, np.dtype(np.int8): torch.int8,
                        np.dtype(np.int16): torch.int16, np.dtype(np.complex128): torch.complex128}
        self._np = {v: k for k, v in self._dtypes.items()}

    def dtype(self, np_type):
        if isinstance(np_type, self.torch.dtype):
            return np_type
        try:
            t = self._dtypes[np.dtype(np_type)]
        except KeyError:
            raise DeviceError(f"{self.name} has no {np.dtype(np_type).name} matrices") from None
        if t is self.torch.float64 and self.device == "mps":
            raise DeviceError("torch:mps has float32 matrices only: call set_dtype(\"float32\") "
                              "(or tapeml --dtype float32) before any matrix exists")
        return t

    def np_dtype(self, dtype) -> np.dtype:
        return self._np[dtype] if isinstance(dtype, self.torch.dtype) else np.dtype(dtype)

    def wide(self, dtype):
        return dtype if self.device == "mps" else self.torch.float64

    def is_bool(self, a) -> bool:
        return a.dtype == self.torch.bool

    def is_float(self, a) -> bool:
        return a.dtype.is_floating_point

    def asarray(self, obj, dtype=None):
        torch = self.torch
        context.LIVE["made"] = True
        t = None if dtype is None else self.dtype(dtype)
        if type(obj) is torch.Tensor:
            return obj.to(device=self.device, dtype=t if t is not None else obj.dtype)
        if type(obj) is not np.ndarray:
            obj = np.asarray(obj)
        if obj.dtype.kind == "f" and t is None:
            t = self.dtype(obj.dtype)
        if not obj.flags.writeable or not (obj.flags.c_contiguous or obj.flags.f_contiguous) \
                or any(s < 0 for s in obj.strides):
            obj = np.array(obj, order="C")      # a copy (ascontiguousarray keeps a read-only array as it is)
        return torch.as_tensor(obj, device=self.device, dtype=t)

    def to_numpy(self, a) -> np.ndarray:
        if type(a) is np.ndarray:
            return a
        return a.detach().to("cpu").numpy()

    def item(self, a):
        v = a.item()
        return v if type(v) is bool else float(v)

    def contiguous(self, a):
        return a.contiguous()

    def owned(self, a):
        if any(st == 0 and n > 1 for st, n in zip(a.stride(), a.shape)):
            return a.contiguous()         # an expanded tensor (torch's broadcast view)
        return a

    def errstate(self):
        import contextlib
        return contextlib.nullcontext()

    def memory_bytes(self) -> int | None:
        if self.device.startswith("cuda"):
            free, total = self.torch.cuda.mem_get_info(self.torch.device(self.device))
            return int(total)
        return None

    def synchronize(self) -> None:
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize(self.device)
        elif self.device == "mps":
            self.torch.mps.synchronize()

    def erf(self, x):
        return self.torch.special.erf(x)

    def erfc(self, x):
        return self.torch.special.erfc(x)

    def ldexp(self, x, e):
        torch = self.torch
        if type(e) is not torch.Tensor:
            e = torch.as_tensor(np.asarray(e), device=x.device)
        if tuple(x.shape) != tuple(e.shape):        # torch.ldexp writes into x's shape: broadcast first
            x, e = torch.broadcast_tensors(x, e)
        return torch.ldexp(x, e).to(x.dtype)

    def add_at(self, target, index, values):
        out = target.clone()
        if not isinstance(index, tuple):
            index = (index,)
        out.index_put_(tuple(self.asarray(i) for i in index), self.asarray(values, None).to(out.dtype),
                       accumulate=True)
        return out

    def frexp(self, x):
        return self.torch.frexp(x)

    def reduce_sum(self, x, axis=0, keepdims=False):
        return self.xp.sum(x, axis=axis, keepdims=keepdims)

    def reduce_max(self, x, axis=0, keepdims=False):
        return self.xp.max(x, axis=axis, keepdims=keepdims)

    def reduce_min(self, x, axis=0, keepdims=False):
        return self.xp.min(x, axis=axis, keepdims=keepdims)

    def softmax(self, x, dim, m=None):
        return self.torch.softmax(x, dim)

    def log_softmax(self, x, dim, m=None):
        return self.torch.log_softmax(x, dim)

    def softmax_backward(self, g, y, dim):
        return self.torch._softmax_backward_data(g, y, dim, y.dtype)

    def log_softmax_backward(self, g, y, dim):
        return self.torch._log_softmax_backward_data(g, y, dim, y.dtype)

    def layer_norm(self, x, gamma, beta, eps):
        return self.torch.native_layer_norm(x, (x.shape[-1],), gamma, beta, eps)

    def layer_norm_backward(self, g, x, mean, rstd, gamma, beta, which):
        return self._ln_backward(g, x, (x.shape[-1],), mean, rstd, gamma, beta,
                                                              list(which))

    def relu(self, x):
        # threshold keeps NumPy's maximum(x, 0): +0 for -0 (clamp_min and relu keep -0), NaN kept
        return self.torch.threshold(x, 0, 0)

    def relu_backward(self, g, ans):
        torch = self.torch      # one fused pass; NaN outputs pass 0, as ans > 0 says
        return self._threshold_backward(g, torch.nan_to_num(ans, nan=0.0), 0)

    def linear(self, x, w, b):
        torch = self.torch
        if b is None:
            return x @ w
        if x.ndim == 2:
            return torch.addmm(b, x, w)
        rows = math.prod(x.shape[:-1])      # not -1: a [2, 3, 0] x has no size to infer it from
        return torch.addmm(b, x.reshape(rows, x.shape[-1]), w).reshape(tuple(x.shape[:-1]) + (w.shape[1],))

    def flash_attention(self, q, k, v, causal, scale):
        if self.device != "cpu":        # the GPUs' fused kernels have other signatures: attention_ops forms the scores
            return None
        rows = _rows_in_memory
        return self._flash(
            rows(q), rows(k), rows(v), 0.0, causal, scale=scale)

    def flash_attention_backward(self, g, q, k, v, out, lse, causal, scale):
        rows = _rows_in_memory
        return self._flash_backward(
            rows(g), rows(q), rows(k), rows(v), rows(out), lse.contiguous(), 0.0, causal, scale=scale)


def held(value, dtype):
    """The Python number `value` as a matrix of `dtype` (a NumPy type or dtype, or a torch dtype)
    holds it: rounded to float32's (float16's) precision, and +-inf past its range, as NumPy's cast
    gives. torch refuses a Python number past a float32 tensor's range ("value cannot be converted
    to type float without overflow") where a store, a fill, a clip or a where takes one: those pass
    the number through here first. Other values (float64, a matrix, a bool) as they are."""
    if type(value) is not float or not math.isfinite(value):
        return value
    try:
        name = np.dtype(dtype).name          # a NumPy type or dtype
    except TypeError:
        name = str(dtype).rpartition(".")[2]     # torch.float32
    if name not in ("float32", "float16"):
        return value
    with np.errstate(over="ignore"):
        return float(np.asarray(value, dtype=name))


def _rows_in_memory(t):
    """t itself when its last axis is laid out element after element (any other strides: the CPU
    flash-attention kernels read a row at a time and honour the other strides, as PyTorch's
    multi-head attention passes its heads, a view of the fused projection), else a contiguous
    copy: a transposed view (k') read row by row gives wrong numbers."""
    return t if t.stride(-1) == 1 or t.shape[-1] <= 1 else t.contiguous()


_DEVICE = re.compile(r"numpy|torch(:(cpu|cuda(:\d+)?|mps))?\Z")


def make(name: str) -> Backend:
    """The backend for a device name: "numpy", "torch" (= torch:cpu), "torch:cpu",
    "torch:cuda", "torch:cuda:N", "torch:mps". Raises DeviceError saying why one cannot be used."""
    if not isinstance(name, str) or not _DEVICE.match(name.strip()):
        shown = f'"{name}"' if isinstance(name, str) else repr(name)
        raise DeviceError(f'device must be "numpy", "torch:cpu", "torch:cuda", "torch:cuda:N" or "torch:mps", got {shown}')
    name = name.strip()
    if name == "numpy":
        return NUMPY
    device = name.partition(":")[2] or "cpu"
    if device == "cuda":        # under torchrun each process takes its own GPU: cuda:LOCAL_RANK
        device = f"cuda:{_local_rank()}"
        name = name if device == "cuda:0" else f"{name} (torch:{device}, as LOCAL_RANK says under torchrun)"
    if device in _TORCH:
        return _TORCH[device]
    try:
        import torch
    except ImportError:
        raise DeviceError(f"device {name} needs PyTorch, which is not installed: pip install 'tapeml[torch]'") from None
    try:
        import array_api_compat.torch  # noqa: F401
    except ImportError:
        raise DeviceError(f"device {name} needs array-api-compat: pip install 'tapeml[torch]'") from None
    if device.startswith("cuda"):
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(device.partition(":")[2])
        if index >= n:
            have = "no CUDA GPU" if n == 0 else f"{n} CUDA GPU{'s' if n > 1 else ''} (torch:cuda:0..{n - 1})"
            raise DeviceError(f"device {name}: this machine has {have}")
    if device == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise DeviceError(f"device {name}: this machine has no Apple GPU (MPS)")
    be = _TORCH[device] = TorchBackend(device)
    ARRAYS.add(torch.Tensor)
    Matrix.register(torch.Tensor)
    _BY_TYPE[torch.Tensor] = be if device == "cpu" or torch.Tensor not in _BY_TYPE else _BY_TYPE[torch.Tensor]
    return be


def _local_rank() -> int:
    """This process's GPU under torchrun (LOCAL_RANK, when WORLD_SIZE > 1); 0 otherwise."""
    w, lr = os.environ.get("WORLD_SIZE", "").strip(), os.environ.get("LOCAL_RANK", "").strip()
    return int(lr) if w.isdigit() and int(w) > 1 and lr.isdigit() else 0


def from_environment() -> Backend:
    """The backend TAPEML_DEVICE names (NumPy when it is unset or empty): the default of a session
    that names none. A DeviceError naming the variable when this machine cannot use it; each face
    asks before it runs anything (the command line, the kernel, tapeml.Session), as for --device."""
    name = os.environ.get("TAPEML_DEVICE", "").strip()
    if not name:
        return NUMPY
    try:
        return make(name)
    except DeviceError as e:
        raise DeviceError(f"TAPEML_DEVICE: {e}") from None


context.slot("backend", from_environment)
context.slot("made", lambda: False)     # whether this session has made a matrix (set_device refuses after)


def made_any() -> bool:
    return context.LIVE["made"]


def current() -> Backend:
    """The backend of the calling thread's session: the one new matrices are made on."""
    return context.LIVE["backend"]


def set_current(be: Backend) -> None:
    context.LIVE["backend"] = be


def new_matrix(data, np_dtype):
    """A matrix literal's (or a constructor's) array on the session's backend: `data` Python numbers,
    nested lists or a NumPy array; np_dtype a NumPy type."""
    values = context.current().values
    be = values["backend"]
    if be is NUMPY:
        values["made"] = True
        return np.asarray(data, dtype=np_dtype)
    return be.asarray(data, np_dtype)


def is_out_of_memory(e: BaseException) -> bool:
    """Whether an exception says memory ran out: Python's MemoryError, or PyTorch's (a
    RuntimeError: torch.OutOfMemoryError on a GPU, "can't allocate memory" from its CPU
    allocator), which would otherwise read as operands whose shapes do not fit."""
    if isinstance(e, MemoryError):
        return True
    if not isinstance(e, RuntimeError):
        return False
    text = str(e)
    return type(e).__name__ == "OutOfMemoryError" or "out of memory" in text or "can't allocate memory" in text


def is_array(x) -> bool:
    """A matrix of any backend (hot code writes `type(x) in ARRAYS` inline)."""
    return type(x) in ARRAYS


def of(x) -> Backend:
    """The backend that computes on the array x; for a torch tensor, the one of its device. Not an
    array (a Python number, a bool): the session's backend."""
    t = type(x)
    if t is np.ndarray:
        return NUMPY
    if t in _BY_TYPE:
        d = x.device
        be = _BY_DEVICE.get(d)
        if be is None:
            be = _BY_DEVICE[d] = _TORCH.get(_device_name(x)) or make("torch:" + _device_name(x))
        return be
    return current()


_BY_DEVICE: dict = {}       # torch.device -> its TorchBackend (of() is asked for every tensor a primitive meets)


def _device_name(t) -> str:
    d = t.device
    return d.type if d.index is None or d.type == "mps" else f"{d.type}:{d.index}"


def xp_of(*xs):
    """The namespace that computes on the arrays among xs: NumPy unless one is a tensor."""
    for x in xs:
        t = type(x)
        if t is not np.ndarray and t in _BY_TYPE:
            return _BY_TYPE[t].xp
    return np


def to_numpy(x):
    """An array of any backend as a NumPy array (a NumPy array as itself); other values as they are."""
    t = type(x)
    if t is np.ndarray or t not in _BY_TYPE:
        return x
    return _BY_TYPE[t].to_numpy(x)
