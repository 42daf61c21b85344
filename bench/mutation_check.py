"""Deliberate slips in a copy of the tree, and whether the tests catch them.

  python3 bench/mutation_check.py [--tests-from COMMIT] NAME [pytest arguments ...]   (CPU)

Copies the tree (tracked and untracked files, .git left out) to a temporary folder (with
--tests-from, its tests/ and bench/ folders as of COMMIT: what the same slip met before a
change to the tests), applies
the mutation NAME of MUTATIONS to its submission.py (each replacement must match exactly
once), runs `python3 -m pytest -q -p no:cacheprovider ARGS` there and prints pytest's
summary. Exit status: 0 when the tests FAILED (the slip was caught), 1 when they passed,
2 when the mutation no longer applies. results/2026-12-01-cpu-mutations/README.md records
the runs.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# name: [(text in submission.py, replacement)]
MUTATIONS = {
    # Every output of the torch route scaled by 0.9 (the verifier's torch bound rejects it).
    "torch_route_x0.9": [("        return self._attend_into(_new_output(q), q, kv_data, qo_indptr, kv_indptr)\n",
                          "        return self._attend_into(_new_output(q), q, kv_data, qo_indptr, kv_indptr).mul_(0.9)\n")],
    # Every output of every Triton form scaled by 0.9.
    "triton_route_x0.9": [("            call.launch()\n        return out\n",
                           "            call.launch()\n        return out.mul_(0.9)\n")],
    # Only the fp8 e4m3_waves form scaled by 0.9: within that form's verifier bound (0.11).
    "e4m3_waves_x0.9": [("            call.launch()\n        return out\n",
                         "            call.launch()\n        return out.mul_(0.9) if self.form == 'e4m3_waves' else out\n")],
    # aiter's a16w8 form scaled by 0.9: within the fp8 format's bound (0.11) that form is judged by.
    "a16w8_x0.9": [("            reduce_final_map=self.reduce_final_map, reduce_partial_map=self.reduce_partial_map)\n"
                    "        return out\n",
                    "            reduce_final_map=self.reduce_final_map, reduce_partial_map=self.reduce_partial_map)\n"
                    "        return out if self.q_in_fp8 else out.mul_(0.9)\n")],
    # The served output scaled by 0.9 after the autopick verified the route: only the
    # tests' own check against exact attention can see it.
    "served_output_x0.9": [("            return plan.run(q, kv_data, qo_indptr, kv_indptr)\n",
                            "            return plan.run(q, kv_data, qo_indptr, kv_indptr).mul_(0.9)\n")],
    # validate_shapes without its kv_lora_rank and qk_rope_head_dim checks.
    "config_checks_dropped": [('''                "kv_lora_rank": V_HEAD_DIM, "qk_rope_head_dim": QK_HEAD_DIM - V_HEAD_DIM,
''', "")],
    # gfx950's convert: the byte selects of results 1 and 2 swapped.
    "op_sel_swapped": [('"v_cvt_scalef32_pk_bf16_fp4 $1, $4, $5 op_sel:[1,0,0]\\n"',
                        '"v_cvt_scalef32_pk_bf16_fp4 $1, $4, $5 op_sel:[0,1,0]\\n"'),
                       ('"v_cvt_scalef32_pk_bf16_fp4 $2, $4, $5 op_sel:[0,1,0]\\n"',
                        '"v_cvt_scalef32_pk_bf16_fp4 $2, $4, $5 op_sel:[1,0,0]\\n"')],
    # An unmeasured form judged by the loosest bound of all instead of its format's.
    "fallback_loosened": [("    return ERROR_BOUNDS[kv_format], f\"{kv_format} format bound",
                           "    return ErrorBound(1.0, 10.0), f\"{kv_format} format bound")],
}


def tree_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\n")
    return [name for name in listed if name and (ROOT / name).is_file()]


def main(argv: list[str]) -> int:
    tests_from = None
    if argv[:1] == ["--tests-from"]:
        tests_from, argv = argv[1], argv[2:]
    if not argv or argv[0] not in MUTATIONS:
        print(f"usage: mutation_check.py NAME [pytest args]; NAME one of {list(MUTATIONS)}", file=sys.stderr)
        return 2
    name, pytest_args = argv[0], argv[1:]
    with tempfile.TemporaryDirectory(prefix=f"mutation_{name}_") as folder:
        copy = Path(folder)
        for relative in tree_files():
            (copy / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / relative, copy / relative)
        if tests_from:
            for folder_name in ("tests", "bench"):
                shutil.rmtree(copy / folder_name)
            archive = subprocess.run(["git", "archive", tests_from, "tests", "bench"], cwd=ROOT, capture_output=True,
                                     check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(copy)], input=archive, check=True)
        source = (copy / "submission.py").read_text()
        for old, new in MUTATIONS[name]:
            if source.count(old) != 1:
                print(f"{name}: {old!r} found {source.count(old)} times in submission.py", file=sys.stderr)
                return 2
            source = source.replace(old, new)
        (copy / "submission.py").write_text(source)
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args],
                              cwd=copy, capture_output=True, text=True)
        lines = proc.stdout.strip().split("\n")
        reasons = [line for line in lines if line.startswith("E   ")][:4]  # the first assertion messages
        summary = [line for line in lines if line.startswith(("FAILED", "ERROR"))] + reasons + lines[-1:]
        print(f"mutation {name}{f' (tests of {tests_from})' if tests_from else ''}: pytest {' '.join(pytest_args)}")
        print("\n".join(summary))
        caught = proc.returncode != 0
        print(f"=> {'CAUGHT' if caught else 'NOT CAUGHT'} (pytest exit status {proc.returncode})")
        return 0 if caught else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
