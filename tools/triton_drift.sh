#!/usr/bin/env bash
# CI's drift check: the newest Triton release on the package index, in a venv of its own
# beside the torch already installed (--system-site-packages; the venv's triton shadows the
# pinned one, which stays as it is), through bench/triton_versions.py on gfx950: import,
# one interpreted forced Triton route on a small case, and the gfx950 compile of every
# specialization the autopick offers, those that fail listed as not offered on that
# version. Fails where submission.py does not import, the interpreted route does not serve
# correctly, or a compile aborts its process. The venv is removed afterwards.
#   TRITON_DRIFT_VERSION=3.9.0 bash tools/triton_drift.sh   checks that release instead.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
venv=$(mktemp -d)/triton-drift
trap 'rm -rf "$(dirname "$venv")"' EXIT
python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir --no-deps --ignore-installed \
    "triton${TRITON_DRIFT_VERSION:+==$TRITON_DRIFT_VERSION}"
"$venv/bin/python" - "$venv" <<'PY'
import sys, triton
# the venv's own triton, not the one beside torch
assert triton.__file__.startswith(sys.argv[1]), f"imported {triton.__file__}, not the venv's triton"
PY
echo "drift check: triton installed in $((SECONDS - started)) s"
"$venv/bin/python" -m bench.triton_versions --targets gfx950 --jobs 2
echo "drift check: $((SECONDS - started)) s in all"
