"""One boundary (issue 27 item 3): printing, files, plots, the kernel's displays and the Python API
see NumPy arrays whatever the device, and values cross in one place (lang/array/backend.py). A
NumPy-only session never imports torch; a file saved on torch:cpu is byte for byte the file saved
on NumPy; what is read from a file, or given from Python, lands on the session's device; the
gradient builtins (grad, check_grad, jacobian, hessian, vjp, jvp) and check_nan work on tensors and
say what they say on NumPy. The tests that need torch are skipped without it (tapeml[torch])."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
import pytest

import tapeml
from support import tapeml_command

TORCH = "torch:cpu"


def _no_device_env() -> dict:
    env = dict(os.environ)
    env.pop("TAPEML_DEVICE", None)
    return env


def _imported(out: str) -> set:
    """The top-level packages named in a `-X importtime` report."""
    names = set()
    for line in out.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


# ---- a NumPy-only session never imports torch -------------------------------------------------
def test_import_tapeml_imports_no_torch():
    code = "import sys, tapeml\nprint(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'array_api_compat')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_no_device_env(),
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "[]\n"


def test_the_command_line_on_numpy_imports_no_torch():
    env = _no_device_env()
    env["PYTHONPROFILEIMPORTTIME"] = "1"        # every import, on standard error
    out = subprocess.run(tapeml_command() + ["-c", "x = [1, 2; 3, 4]\nprint(x' @ x)"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout == "[10, 14; 14, 20]\n", out.stderr[-2000:]
    names = _imported(out.stderr)
    assert "numpy" in names and "tapeml" in names          # the report is read right
    assert "torch" not in names and "array_api_compat" not in names


def _fresh_python(code: str) -> str:
    """What `python -c code` printed, in a fresh process on NumPy (it must succeed)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_no_device_env(),
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_numpy_session_in_python_imports_no_torch():
    code = ("import sys, numpy as np, tapeml\ns = tapeml.Session()\ns['x'] = np.ones(3)\n"
            "print(s.eval('sum(x * 2)'), s.eval('device()'), 'torch' in sys.modules)")
    assert _fresh_python(code) == "6.0 numpy False\n"


def test_a_numpy_session_takes_tensors_and_parameters_before_any_torch_session():
    """A tensor given to a NumPy Session was refused until some torch Session had loaded the
    backend, and an nn.Parameter always (its hint, numpy.asarray, fails on a tensor that requires
    grad): both come in as their values, bfloat16 widened exactly."""
    pytest.importorskip("torch")
    code = ("import torch, numpy as np, tapeml\ns = tapeml.Session()\ns['x'] = torch.ones(2)\n"
            "lin = torch.nn.Linear(2, 3)\ns['w'] = lin.weight\ns['h'] = torch.tensor([1.5, 2.0], dtype=torch.bfloat16)\n"
            "s['d'] = {'a': torch.tensor([0.5])}\n"
            "print(s['x'].tolist(), np.array_equal(s['w'], lin.weight.detach().numpy()), s['h'].tolist(), "
            "s['d']['a'].tolist(), s.eval('device()'))")
    assert _fresh_python(code) == "[1.0, 1.0] True [1.5, 2.0] [0.5] numpy\n"


def test_a_tensor_whose_values_cannot_be_read_is_a_language_error_naming_its_path():
    """In tapeml's words (issue 38): never PyTorch's 'Cannot copy out of meta tensor' or 'Use
    Tensor.to_dense() first', nor a complex tensor called a NumPy array."""
    torch = pytest.importorskip("torch")
    s = tapeml.Session(out=io.StringIO())
    cases = [("d", {"a": (torch.empty(2, 3, device="meta"),)}, "d['a'][0] is a torch tensor on the 'meta' device: "
              "it has a shape (2x3) but no values; make it on a device that holds them (cpu, cuda)"),
             ("sp", torch.eye(2).to_sparse(), "sp is a sparse torch tensor (torch.sparse_coo, 2x2); tapeml's "
              "matrices are dense: give t.to_dense()"),
             ("c", torch.zeros(2, dtype=torch.complex64), "c is a torch tensor of complex numbers (torch.complex64); "
              "a matrix holds real numbers")]
    for name, value, message in cases:
        with pytest.raises(tapeml.LangError) as info:
            s[name] = value
        assert (info.value.kind, info.value.message) == ("TypeError", message)
    with pytest.raises(tapeml.LangError) as info:
        s.call("sum", torch.empty(3, device="meta"))
    assert info.value.message == ("argument 1 of sum is a torch tensor on the 'meta' device: it has a shape (3) "
                                  "but no values; make it on a device that holds them (cpu, cuda)")


# ---- torch sessions -----------------------------------------------------------------------------
@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _session(device, **kw):
    return tapeml.Session(device=device, out=io.StringIO(), **kw)


def test_a_torch_session_round_trip_gives_numpy_arrays(torch):
    s = _session(TORCH, dtype="float64")
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    s["x"] = x
    s["m"] = np.array([True, False])
    s["r"] = {"w": np.eye(2), "t": (np.arange(3), 2.5)}
    s["t"] = torch.tensor([1.0, 2.0])           # a tensor from Python: read through NumPy
    assert s.eval("device()") == TORCH
    assert s.eval("dtype(x)") == "float64" and s.eval("dtype(m)") == "bool"
    x[0, 0] = 100                               # the session holds a copy
    y = s.eval("x @ x")
    assert type(y) is np.ndarray and y.dtype == np.float64 and y.tolist() == [[7.0, 10.0], [15.0, 22.0]]
    got = s["x"]
    assert type(got) is np.ndarray and got.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    got[0, 0] = -1                              # the caller's own copy: the session's x is unchanged
    assert s.eval("sum(x)") == 10.0 and type(s.eval("sum(x)")) is float
    m = s["m"]
    assert type(m) is np.ndarray and m.dtype == np.bool_ and m.tolist() == [True, False]
    r = s["r"]
    assert type(r["w"]) is np.ndarray and type(r["t"][0]) is np.ndarray and r["t"][1] == 2.5
    assert s["t"].tolist() == [1.0, 2.0] and type(s["t"]) is np.ndarray
    # values made inside the session are tensors there, and NumPy arrays outside
    s.run("z = x * 2")
    assert type(s.interp.get_variable("z")) is torch.Tensor and type(s["z"]) is np.ndarray
    # Python functions called from tapeml see NumPy arrays; what they return goes to the device
    seen = []
    s["f"] = lambda a: seen.append(type(a)) or a * 3
    assert s.eval("f(x)").tolist() == [[3.0, 6.0], [9.0, 12.0]]
    assert seen == [np.ndarray]
    s.run("fx = f(x)")
    assert type(s.interp.get_variable("fx")) is torch.Tensor
    assert "device=torch:cpu" in repr(s)


def test_a_float32_torch_session_gives_float32_arrays(torch):
    s = _session(TORCH, dtype="float32")
    s["x"] = np.arange(4).reshape(2, 2)
    y = s.eval("x * 0.5")
    assert y.dtype == np.float32 and y.tolist() == [[0.0, 0.5], [1.0, 1.5]]


SAVED = """w = [1, 2, 3; 4, 5, 6]
p = {w = w, wt = w', inv = [2, 1; 1, 3] / 5, mask = w > 2, heads = ({wq = [0.5, 0.25]}, {wq = [1e-300, -0.0]}), step = 3, on = true}
save(path, p)
"""


@pytest.mark.parametrize("ext", [".npz", ".safetensors"])
def test_a_file_saved_on_torch_is_the_file_saved_on_numpy(torch, tmp_path, ext):
    files = {}
    for device in ("numpy", TORCH):
        s = _session(device)
        files[device] = tmp_path / f"{device.replace(':', '_')}{ext}"
        s["path"] = str(files[device])
        s.run(SAVED)
    a, b = files["numpy"].read_bytes(), files[TORCH].read_bytes()
    assert len(a) > 100 and a == b
    # loaded on torch: the matrices are tensors of the session; back in Python, NumPy arrays
    s = _session(TORCH)
    s["path"] = str(files["numpy"])
    s.run("q = load(path)")
    q = s.interp.get_variable("q")
    assert type(q.fields["w"]) is torch.Tensor and q.fields["mask"].dtype == torch.bool
    assert type(q.fields["step"]) is float and q.fields["on"] is True
    back = s["q"]
    assert type(back["w"]) is np.ndarray and back["wt"].tolist() == [[1, 4], [2, 5], [3, 6]]
    assert back["heads"][1]["wq"].tolist() == [1e-300, -0.0] and np.signbit(back["heads"][1]["wq"][1])
    assert s.eval("q.w @ q.wt").tolist() == [[14.0, 32.0], [32.0, 77.0]]


def test_an_npz_is_written_row_major_whatever_the_layout(tmp_path):
    """A transposed matrix is stored as its row-major copy, so the bytes do not depend on how a
    backend laid the matrix out in memory (torch's linalg returns column-major results)."""
    s = _session("numpy")
    s["path"] = str(tmp_path / "t.npz")
    s.run("save(path, {wt = [1, 2, 3; 4, 5, 6]'})")
    with np.load(tmp_path / "t.npz") as data:
        assert data["wt"].flags.c_contiguous and data["wt"].tolist() == [[1, 4], [2, 5], [3, 6]]
    import zipfile
    with zipfile.ZipFile(tmp_path / "t.npz") as z:
        assert b"'fortran_order': False" in z.read("wt.npy")[:128]


def test_files_read_on_torch_are_tensors_with_numpys_values(torch, tmp_path):
    (tmp_path / "t.csv").write_text("x,y\n1,2\n3,4.5\n")
    (tmp_path / "c.csv").write_text("name,age\nana,31\nbo,\n")
    (tmp_path / "j.json").write_text('{"w": [[1, 2], [3, 4]], "n": 2, "tags": ["a", 1]}')
    program = ("m = read_csv(dir + \"/t.csv\")\nc = read_columns(dir + \"/c.csv\")\nj = read_json(dir + \"/j.json\")\n"
               "write_csv(dir + \"/out_\" + device() + \".csv\", m')\nwrite_json(dir + \"/out_\" + device() + \".json\", j)\n"
               "e = read_csv(dir + \"/out_\" + device() + \".csv\")\n")
    got = {}
    for device in ("numpy", TORCH):
        s = _session(device)
        s["dir"] = str(tmp_path)
        s.run(program)
        got[device] = s
    t = got[TORCH]
    for name in ("m", "j", "e"):
        v = t.interp.get_variable(name)
        v = v.fields["w"] if name == "j" else v
        assert type(v) is torch.Tensor, name
    assert type(t.interp.get_variable("c").get("age")) is torch.Tensor
    assert np.array_equal(t["m"], got["numpy"]["m"]) and np.array_equal(t["e"], got["numpy"]["e"])
    assert np.array_equal(t["c"]["age"], got["numpy"]["c"]["age"], equal_nan=True)
    for ext in (".csv", ".json"):
        assert (tmp_path / f"out_{TORCH}{ext}").read_bytes() == (tmp_path / f"out_numpy{ext}").read_bytes()


def test_an_empty_csv_on_torch_is_an_empty_tensor(torch, tmp_path):
    (tmp_path / "e.csv").write_text("a,b\n")
    s = _session(TORCH)
    s["p"] = str(tmp_path / "e.csv")
    s.run("m = read_csv(p)")
    assert type(s.interp.get_variable("m")) is torch.Tensor and s["m"].shape == (0, 0)


def test_plots_draw_the_same_on_torch(torch):
    lines = {}
    for device in ("numpy", TORCH):
        s = _session(device)
        s.run("x = [1, 2, 4]\nplot(x, x * 2)\nscatter(x, x)\nhist([1, 2, 2, 3], bins=3)\nbar([3, 1])\n"
              "figure()\nimshow([1, 2; 3, 4])")
        figs = s.figures()
        ax = figs[0].axes[0]
        lines[device] = (ax.lines[0].get_xydata().tolist(), [p.get_height() for p in ax.patches],
                         figs[1].axes[0].images[0].get_array().tolist())
        import matplotlib.pyplot as plt
        for f in figs:
            plt.close(f)
    assert lines["numpy"] == lines[TORCH]
    assert lines[TORCH][0] == [[1.0, 2.0], [2.0, 4.0], [4.0, 8.0]]


def test_the_kernels_displays_read_tensors(torch):
    from tapeml.faces.kernel import html_value, mime_bundle
    s = _session(TORCH)
    s.run("m = [1, 2.5; -3, 4]\nr = {w = m, b = m > 0}")
    m, r = s.interp.get_variable("m"), s.interp.get_variable("r")
    assert type(m) is torch.Tensor
    n = _session("numpy")
    n.run("m = [1, 2.5; -3, 4]\nr = {w = m, b = m > 0}")
    for name, v in (("m", m), ("r", r)):
        assert mime_bundle(v) == mime_bundle(n.interp.get_variable(name))
    assert "<caption>2x2 matrix</caption>" in html_value(m)


def test_kernel_install_writes_the_device_into_the_kernelspec(torch):
    from tapeml.faces.kernel import kernel_spec, main
    assert kernel_spec(device=TORCH)["env"] == {"TAPEML_DEVICE": TORCH}
    assert kernel_spec(2, TORCH)["env"] == {"TAPEML_THREADS": "2", "TAPEML_DEVICE": TORCH}
    assert "env" not in kernel_spec()


def test_kernel_install_refuses_a_device_it_cannot_use(capsys):
    from tapeml.faces.kernel import main
    assert main(["install", "--device", "gpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith('tapeml: kernel install: device must be "numpy", "torch:cpu", "torch:cuda", "torch:cuda:N" or '
                          '"torch:mps", got "gpu"\nusage: tapeml kernel install')


def test_a_kernel_with_a_bad_device_says_why_at_start():
    env = dict(os.environ, TAPEML_DEVICE="torch:tpu")
    out = subprocess.run([sys.executable, "-m", "tapeml.faces.kernel", "-f", "/nonexistent.json"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 2
    assert out.stderr.startswith('tapeml: TAPEML_DEVICE: device must be "numpy", "torch:cpu"')


# ---- gradients and check_nan on tensors ---------------------------------------------------------
GRADS = """print(grad(fn(x) -> sum(x^3), [1, 2; 3, 4]))
v, g = value_and_grad(fn(w) -> sum(w.a @ w.b), {a = [1, 2; 3, 4], b = [1; 2]})
print(v, g)
errs = check_grad(fn(w) -> sum(tanh(w.a @ w.b)), {a = [1, 2; 3, 4] / 10, b = [1; 2]})
print(errs.a < 1e-6, errs.b < 1e-6)
print(check_grad(fn(x) -> sqrt(x), 0))
print(hessian(fn(x) -> x^3, 2))
print(jacobian(fn(x) -> x^2, 3))
print(vjp(fn(x) -> [1, 2; 3, 4] @ x, [1; 1], [1; 0]))
print(jvp(fn(x) -> x^2, [1, 2, 3], [1, 0, 1]))
print(jvp(fn(x) -> [1, 2] * x, 2, 1))
print(grad(fn(x) -> sum(grad(fn(y) -> sum(y^3), x) * [0, 1]), [1, 2]))
"""


def test_the_gradient_builtins_print_the_same_on_torch(torch):
    outs = {}
    for device in ("numpy", TORCH):
        s = _session(device)
        s.run(GRADS)
        outs[device] = s.interp.out.getvalue()
    assert outs[TORCH] == outs["numpy"]
    assert outs[TORCH].splitlines()[0] == "[3, 12; 27, 48]"


def test_gradients_on_torch_are_tensors_of_their_own(torch):
    s = _session(TORCH)
    s.run("x = [1, 2, 3]\ng = grad(fn(x) -> sum(x * 2), x)\nz = grad(fn(x) -> 5, x)\nb = grad(fn(x) -> sum(x + [1; 2]), x)")
    for name in ("g", "z", "b"):
        v = s.interp.get_variable(name)
        assert type(v) is torch.Tensor and 0 not in v.stride(), name
    assert s["g"].tolist() == [2, 2, 2] and s["z"].tolist() == [0, 0, 0] and s["b"].tolist() == [2, 2, 2]


NANS = ["x = [1, 0, 4]\ny = log(x)",
        "fn f(x) -> sum(sqrt(x))\ng = grad(f, [0, 1, 4])",
        "x = [1, 2]\ny = x / (x - 1)"]


@pytest.mark.parametrize("source", NANS)
def test_check_nan_says_the_same_on_torch(torch, source):
    said = {}
    for device in ("numpy", TORCH):
        s = _session(device, check_nan=True)
        try:
            with pytest.raises(tapeml.LangError) as e:
                s.run(source)
        finally:
            s.check_nan = False         # no tape hook left behind for the tests after
        said[device] = (e.value.kind, e.value.line, e.value.column, e.value.message)
    assert said[TORCH] == said["numpy"] and said[TORCH][0] == "NaNError"


def test_check_nan_on_torch_lets_finite_and_deliberate_values_pass(torch):
    s = _session(TORCH, check_nan=True)
    try:
        s.run("x = [1, 2, 4]\ny = log(x)\nm = 0 / 0\ng = grad(fn(x) -> sum(sqrt(x)), x)")
    finally:
        s.check_nan = False
    # torch's sqrt backward may round 0.5 / sqrt(2) one unit differently from NumPy's: the values,
    # not their last bit, are what check_nan must let through
    np.testing.assert_allclose(s["g"], 0.5 / np.sqrt([1.0, 2.0, 4.0]), rtol=4e-16, atol=0)


def test_the_profiler_on_torch_charges_lines(torch):
    s = _session(TORCH)
    with s.profile() as p:
        s.run("w = [1, 2; 3, 4]\ng = grad(fn(w) -> sum(w @ w), w)")
    table = p.table(times=False)
    assert "<string>:2" in table and "operator @" in table
