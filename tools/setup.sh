#!/usr/bin/env bash
# Installs everything the benchmark and the tests need, on a fresh machine.
# - requirements.txt: the pinned torch / triton / test tools.
# - .ci/aiter_wheel: AMD's pure-Python aiter wheel, unpacked WITHOUT its dependencies and
#   never imported as a package: tests read its MXFP4 quantizer by file path to check our
#   bytes against aiter's. (`pip install aiter` would fetch an unrelated package.)
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -r requirements.txt
if [ ! -f .ci/aiter_wheel/aiter/utility/fp4_utils.py ]; then
    python3 -m pip install -q --no-deps --target .ci/aiter_wheel amd-aiter==0.1.7.post2.dev18
fi
