#!/usr/bin/env bash
# Download, here, the wheels tests/perf/gpu_check.sh installs on a GPU machine without network:
# tapeml's pure-Python dependencies (and safetensors' and matplotlib's binary wheels) for that
# machine's Python version, into build/wheels (carried with the working tree).
#   PYVER=3.11 bash tests/perf/gpu_wheels.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PYVER=${PYVER:-3.11}
mkdir -p build/wheels
pip download -q -d build/wheels --only-binary=:all: --python-version "$PYVER" \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    "prompt_toolkit>=3.0.30" "pygments>=2.12" "tqdm>=4.64" "safetensors>=0.4" "threadpoolctl>=3.1" \
    "array-api-compat>=1.9" "pytest>=7" "hypothesis>=6.50" "matplotlib>=3.6" setuptools wheel
du -sh build/wheels
