#!/usr/bin/env bash
# Installs what the benchmark and the tests need, keeping the GPU stack a machine has.
# - requirements.txt: the test and development tools (none depends on torch, triton or
#   aiter), always installed, and first: torch warns "Failed to initialize NumPy" when it
#   is imported where numpy is missing, and the next step imports an installed torch (the
#   README has users install torch's CPU build before set-up, into an environment without
#   numpy).
# - torch, triton (tools/gpu_stack.py): an installed build is kept (ROCm, CUDA or CPU torch;
#   PyPI's triton or ROCm's pytorch-triton-rocm); only a missing one is installed, at its
#   pin in tools/torch-triton-pins.txt. One line each says which. aiter is never installed.
#   Where an installed torch or triton fails to import, no pin is installed (exit 1).
#   A machine without a GPU about to get PyPI's CUDA torch is told how to get the CPU build.
# - .ci/aiter_wheel: AMD's pure-Python aiter wheel, unpacked WITHOUT its dependencies and
#   never imported as a package (not on any import path, so it shadows no installed aiter):
#   tests read its MXFP4 quantizer by file path to check our bytes against aiter's.
# Offline (a machine that cannot reach the package index): pip takes its usual variables,
# e.g. PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR with the wheels in DIR; a .ci/aiter_wheel that
# already holds aiter/utility/fp4_utils.py is kept as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check -r requirements.txt
python3 tools/gpu_stack.py
if [ ! -f .ci/aiter_wheel/aiter/utility/fp4_utils.py ]; then
    python3 -m pip install -q --disable-pip-version-check --no-deps --target .ci/aiter_wheel amd-aiter==0.1.7.post2.dev18
fi
