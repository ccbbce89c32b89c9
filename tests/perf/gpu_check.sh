#!/usr/bin/env bash
# The backends' GPU check (issue 27), in one go on a bare machine with an NVIDIA GPU:
#   1. tapeml --device torch:cuda runs the seed program and prints its golden output;
#   2. the golden programs, the gradient checks (finite differences) and the VJP sweep run on
#      torch:cuda (pytest --device torch:cuda);
#   3. the bench: the transformer block forward + backward against PyTorch eager on the GPU, and
#      minigpt's steps per second on the GPU against NumPy on this machine's CPU.
# Under 8 minutes; the table is written to $OUT/gpu_table.md (OUT defaults to build/gpu-check).
#
# The machine may have another Python and its own PyTorch: the check uses them (a venv that sees
# the system's packages, so its torch with CUDA is kept) and installs tapeml and the pure-Python
# dependencies it lacks. With no network, bring the wheels in build/wheels
# (tests/perf/gpu_wheels.sh downloads them, on a machine with one, for the GPU machine's Python).
#
#   bash tests/perf/gpu_check.sh            # PYTHON=python3.12 to choose the interpreter
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/gpu-check}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
start=$(date +%s)
elapsed() { echo "[$(( $(date +%s) - start )) s]"; }
status=0

echo "== the machine"
nvidia-smi -L 2>/dev/null || echo "(no nvidia-smi)"
"$PY" - <<'EOF' || { echo "gpu_check: this Python has no PyTorch with CUDA"; exit 2; }
import sys, torch
print("Python", sys.version.split()[0], "| PyTorch", torch.__version__, "| CUDA", torch.version.cuda,
      "|", torch.cuda.device_count(), "GPU(s):", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")
sys.exit(0 if torch.cuda.is_available() else 1)
EOF

echo "== installing tapeml $(elapsed)"
VENV=${VENV:-/tmp/tapeml-gpu-venv}
"$PY" -m venv --system-site-packages "$VENV"
. "$VENV/bin/activate"
PIP=(python -m pip install -q --disable-pip-version-check)
[ -d build/wheels ] && PIP+=(--no-index --find-links build/wheels)
"${PIP[@]}" --no-build-isolation --no-deps -e . \
    || { echo "gpu_check: pip could not install tapeml"; exit 2; }
# each dependency only where the system lacks it (its torch and NumPy are kept)
for req in "numpy>=1.24" "prompt_toolkit>=3.0.30" "pygments>=2.12" "tqdm>=4.64" "safetensors>=0.4" \
           "threadpoolctl>=3.1" "array-api-compat>=1.9" "pytest>=7" "hypothesis>=6.50" "matplotlib>=3.6"; do
    name=${req%%[>=<]*}
    python -c "import importlib.metadata as m, sys; m.version(sys.argv[1])" "$name" 2>/dev/null \
        || "${PIP[@]}" "$req" || echo "gpu_check: could not install $req (tests needing it will fail)"
done
python -c "import tapeml, torch; print('tapeml', tapeml.__version__, 'on', torch.cuda.get_device_name())" || exit 2

echo "== 1. the seed program on torch:cuda $(elapsed)"
if tapeml --device torch:cuda examples/seed_statistics_ml.ml > "$OUT/seed.out" 2>&1 \
        && diff -u examples/seed_statistics_ml.out "$OUT/seed.out"; then
    echo "seed program: the golden output"
else
    echo "seed program: DIFFERS (see above)"; status=1
fi

echo "== 2. golden programs, gradient checks, VJP sweep on torch:cuda $(elapsed)"
timeout 270 python -m pytest -q -p no:cacheprovider --device torch:cuda \
    tests/end_to_end/test_golden.py tests/array/test_grad.py tests/array/test_vjp_sweep.py 2>&1 | tail -n 25 | tee "$OUT/pytest.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1

echo "== 3. the bench on torch:cuda $(elapsed)"
timeout 150 python tests/perf/bench.py --device torch:cuda --threads=4 --write "$OUT/gpu_table.md" \
    || { echo "bench: failed or ran out of time"; status=1; }

echo "== done in $(( $(date +%s) - start )) s, status $status; table: $OUT/gpu_table.md"
exit $status
