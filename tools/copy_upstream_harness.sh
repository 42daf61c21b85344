#!/usr/bin/env bash
# Copies upstream's harness (eval.py and utils.py of gpu-mode/reference-kernels,
# problems/amd_202602) from a fetched mirror into dev_scratch/upstream_harness/, which git
# ignores: upstream's code is never committed. `bench/h200_session.sh compare` runs it beside
# this project's submission.py, reference.py and task.py; the device call carries the folder.
#   bash tools/copy_upstream_harness.sh MIRROR_GIT_DIR   (a bare clone of gpu-mode/reference-kernels)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { echo "usage: bash tools/copy_upstream_harness.sh MIRROR_GIT_DIR (a git dir of gpu-mode/reference-kernels)" >&2; exit 2; }
mirror=$1
dest=dev_scratch/upstream_harness
mkdir -p "$dest"
git check-ignore -q "$dest" || { echo "$dest is not ignored by git: refusing to copy upstream code there" >&2; exit 1; }
for file in eval.py utils.py; do
    git --git-dir="$mirror" show "HEAD:problems/amd_202602/$file" > "$dest/$file"
done
git --git-dir="$mirror" rev-parse HEAD > "$dest/COMMIT"
echo "upstream harness $(cat "$dest/COMMIT") in $dest"
