"""Command-line conventions: `python -m tapeml` is the `tapeml` command; -h/--help and
-V/--version; the packaging metadata the wheel carries (LICENSE, SPDX license, extras)."""
import os
import subprocess
import sys
import tomllib

import pytest

from support import ROOT, run_cli
import tapeml


def python_m(*args, stdin=None):
    env = dict(os.environ, TAPEML_PROGRESS="off")
    return subprocess.run([sys.executable, "-m", "tapeml", *args], input=stdin, capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=60)


def test_python_m_tapeml_runs_code_files_and_stdin_like_the_command():
    r = python_m("-c", "print(2 ^ 10)\nprint(ARGS)", "a", "b")
    assert (r.returncode, r.stdout, r.stderr) == (0, "1024\n(\"a\", \"b\")\n", "")
    r = python_m(os.path.join("tests", "golden", "error_trace.ml"))
    assert r.returncode == 1 and r.stdout == "before\n"
    assert r.stderr.startswith("tests/golden/error_trace.ml:3:12: ShapeError:")
    r = python_m(stdin="x = 3\nprint(x * 2)\n")
    assert (r.returncode, r.stdout) == (0, "6\n")
    r = python_m("--bogus")
    assert r.returncode == 2 and "unknown option '--bogus'" in r.stderr


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version(flag):
    assert run_cli([flag]) == (0, f"tapeml {tapeml.__version__}\n")
    r = python_m(flag)
    assert (r.returncode, r.stdout) == (0, f"tapeml {tapeml.__version__}\n")


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_names_options_args_exit_codes_and_environment(flag):
    code, out = run_cli([flag])
    assert code == 0
    assert out.startswith("usage: tapeml")
    for needed in ["--dtype float32|float64", "--debug", "-c CODE", "-i FILE.ml", "ARGS",
                   "docs build|check", "-h, --help", "-V, --version", "python -m tapeml",
                   "TAPEML_HISTORY", "TAPEML_PROGRESS", "TAPEML_MALLOC", "NO_COLOR"]:
        assert needed in out, needed
    status = out[out.index("Exit status:"):out.index("Environment:")]
    codes = [line.split()[0] for line in status.splitlines()[1:] if line.strip()]
    assert codes == ["0", "1", "2", "129", "130", "141", "143"]
    assert python_m(flag).stdout == out


def test_help_and_version_come_before_other_arguments_only():
    # after the script name they are the script's ARGS
    code, out = run_cli(["-c", "print(ARGS)", "-h", "-V"])
    assert (code, out) == (0, '("-h", "-V")\n')


def test_packaging_metadata():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        meta = tomllib.load(f)
    project = meta["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert not any(c.startswith("License ::") for c in project["classifiers"])
    assert {"Programming Language :: Python :: 3.11", "Programming Language :: Python :: 3.12",
            "Programming Language :: Python :: 3.13"} <= set(project["classifiers"])
    assert project["requires-python"] == ">=3.11"
    assert "setuptools>=77" in meta["build-system"]["requires"]
    extras = project["optional-dependencies"]
    names = [d.split(">")[0].split("=")[0] for d in extras["jupyter"]]
    assert names == ["ipykernel", "jupyter_client"]
    assert set(extras["jupyter"]) <= set(extras["dev"])
    assert project["urls"]
    with open(os.path.join(ROOT, "LICENSE"), encoding="utf-8") as f:
        text = f.read()
    assert text.startswith("MIT License") and "Copyright (c) 2026 tapeml developers" in text


def test_script_arg_reads_name_value_and_a_bare_name_equals_is_the_empty_string():
    """`steps=` given with nothing after it is the empty value (num("") then says it is not a
    number), not silently the default; an absent option is the default."""
    prog = 'v = script_arg("steps", "3")\nprint("[{v}]")'
    assert run_cli(["-c", prog, "steps=30"]) == (0, "[30]\n")
    assert run_cli(["-c", prog, "steps="]) == (0, "[]\n")
    assert run_cli(["-c", prog, "other=1", "steps"]) == (0, "[3]\n")
    code, out = run_cli(["-c", 'print(num(script_arg("steps", "3")))', "steps="])
    assert code == 1 and 'ValueError: num(): "" is not a number' in out
