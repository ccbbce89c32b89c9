"""Golden programs: tests/golden/*.ml (and examples/*.ml with an .out beside them) must print
exactly their .out file (stdout and stderr together). A first-line comment `# exit: N` gives
the expected exit status (0 when absent). Paths in messages are relative to the repo root."""
import glob
import os

import pytest

from support import ROOT, SHARED, run_cli

CASES = sorted(glob.glob(os.path.join(ROOT, "tests", "golden", "*.ml")) +
               [p for p in glob.glob(os.path.join(ROOT, "examples", "*.ml"))
                if os.path.exists(p[:-3] + ".out")])


def expected_exit(path):
    with open(path, encoding="utf-8") as f:
        first = f.readline()
    return int(first.split(":")[1]) if first.startswith("# exit:") else 0


@pytest.mark.parametrize("path", CASES, ids=[os.path.relpath(p, ROOT) for p in CASES])
def test_golden(path, monkeypatch):
    monkeypatch.chdir(ROOT)
    # a builtin's bar appears after it has run 2 s: how long depends on the machine and the
    # device (check_grad of a block on torch:cpu, or a loaded CI), never part of the output
    monkeypatch.setenv("TAPEML_PROGRESS", "0")
    rel = os.path.relpath(path, ROOT)
    code, out = run_cli([rel])
    with open(path[:-3] + ".out", encoding="utf-8") as f:
        want = f.read()
    assert out == want
    assert code == expected_exit(path)


def test_seed_program_byte_for_byte(monkeypatch):
    """The seed builtin page's program prints exactly the golden output. The repository keeps
    copies (examples/seed_statistics_ml.*); when ../shared/golden is beside the checkout, the
    copies must equal the originals."""
    monkeypatch.chdir(ROOT)
    copy_ml = os.path.join(ROOT, "examples", "seed_statistics_ml.ml")
    copy_out = os.path.join(ROOT, "examples", "seed_statistics_ml.out")
    original = os.path.join(SHARED, "golden", "seed_statistics_ml")
    if os.path.exists(original + ".ml"):
        for ext, copy in ((".ml", copy_ml), (".out", copy_out)):
            with open(original + ext, "rb") as a, open(copy, "rb") as b:
                assert a.read() == b.read()
    code, out = run_cli(["examples/seed_statistics_ml.ml"])
    with open(copy_out, "rb") as f:
        assert out.encode("utf-8") == f.read()
    assert code == 0
