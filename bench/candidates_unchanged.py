"""Does the autopick offer the same Triton candidates, in the same order and with the same
labels, at two commits?

    python3 -m bench.candidates_unchanged OLD [NEW] [--new-forms-ok]

OLD and NEW are commits (NEW defaults to this checkout's working tree). In each tree, once
with TRITON_INTERPRET=1 and once without, submission.launch_candidates (triton_launch_candidates
before it was renamed) is asked for
both formats over a grid of batches, lengths, device sizes and architectures ("gfx950",
"sm_90", "sm_80", "gfx942", "" for no GPU), offered freely and with each form forced; each
answer is the launches' fields and the autopick's label of each, or the error raised.
Prints each differing answer (the first 40) and the counts: answers whose launches or errors
differ, and answers whose labels alone differ; exit status 1 on any difference of launches
or errors, 2 on labels alone. CPU only, a minute or two. With --new-forms-ok (NEW adds
kernel forms), an answer that differs only by launches of forms OLD does not have (OLD's
launches the same, in the same order, labels included), or that forces a form OLD does not
have, is counted apart, per architecture, and is no difference.
"""
from __future__ import annotations

import json
import re
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Run inside the tree being asked (`python3 -c` has its cwd, the tree's root, on the path).
DUMP = r"""
import dataclasses, json, sys, types
import torch
import submission as sub

def form_names(kv_format):
    forms = sub.KERNEL_FORMS
    if isinstance(forms, dict):  # before the records: format -> form names
        return list(forms[kv_format])
    return [form.name for form in forms if form.kv_format == kv_format]

# The kernel route's names at each tree (renamed after 0e5180f: Triton* named what runs Gluon too)
candidates_of = getattr(sub, "launch_candidates", None) or sub.triton_launch_candidates
runner_class = getattr(sub, "KernelRunner", None) or sub.TritonRunner

def label(kv_format, launch, batch):
    shape = types.SimpleNamespace(sm_scale=0.04, batch=batch, q_contiguous=True, device=torch.device("meta"))
    return runner_class(shape, kv_format, launch).label

answers = {}
for kv_format in ("fp8", "mxfp4"):
    for arch in ("gfx950", "sm_90", "sm_80", "gfx942", ""):
        for num_sms in (1, 80, 132, 256, 304):
            for batch in (1, 2, 3, 4, 7, 16, 32, 64, 100, 256, 1000):
                for length in (1, 16, 63, 64, 127, 128, 300, 1024, 4096, 8192, 100000):
                    for form in [""] + form_names(kv_format):
                        key = f"{kv_format} {arch or '-'} sms={num_sms} batch={batch} kv={length} form={form or '-'}"
                        try:
                            launches = candidates_of(kv_format, batch, length, num_sms, arch, form)
                            answers[key] = [[dataclasses.asdict(c), label(kv_format, c, batch)] for c in launches]
                        except Exception as error:
                            answers[key] = f"{type(error).__name__}: {error}"
json.dump(answers, sys.stdout)
"""


def answers_in(tree: Path) -> dict:
    found = {}
    for interpreted in (False, True):
        env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "MLA_ROUTE")}
        if interpreted:
            env["TRITON_INTERPRET"] = "1"
        proc = subprocess.run([sys.executable, "-c", DUMP], cwd=tree, env=env, capture_output=True, text=True,
                              timeout=3600)
        if proc.returncode != 0:
            raise SystemExit(f"asking {tree} failed:\n{proc.stderr[-3000:]}")
        found.update({f"{'interpreted' if interpreted else 'compiled'} {k}": v
                      for k, v in json.loads(proc.stdout).items()})
    return found


def answers_at(commit: str) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        return answers_in(Path(folder))


def added_forms_only(key: str, a, b, old_forms: set) -> bool:
    """Whether answer b is answer a with launches of forms OLD lacks added (or asks for such
    a form)."""
    forced = re.search(r" form=(\S+)", key).group(1)
    if a is None:
        return forced not in old_forms
    return isinstance(a, list) and isinstance(b, list) and a == [x for x in b if x[0]["form"] in old_forms | {""}]


def main() -> int:
    args = [arg for arg in sys.argv[1:] if arg != "--new-forms-ok"]
    new_forms_ok = len(args) < len(sys.argv) - 1
    if len(args) not in (1, 2):
        raise SystemExit(__doc__)
    old_name = args[0]
    new_name = args[1] if len(args) == 2 else "the working tree"
    old = answers_at(old_name)
    new = answers_at(args[1]) if len(args) == 2 else answers_in(ROOT)
    old_forms = {launch["form"] for answer in old.values() if isinstance(answer, list) for launch, _ in answer}
    old_forms |= {m.group(1) for key in old for m in [re.search(r" form=(\S+)", key)] if m and m.group(1) != "-"}
    different, labels, added = 0, {}, {}
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if new_forms_ok and added_forms_only(key, a, b, old_forms):
            arch = key.split(" ")[2]  # "<compiled|interpreted> <format> <arch> ..."
            added[arch] = added.get(arch, 0) + 1
            continue
        if isinstance(a, list) and isinstance(b, list) and [x for x, _ in a] == [x for x, _ in b]:
            for (_, label_a), (_, label_b) in zip(a, b):
                if label_a != label_b:
                    labels.setdefault((label_a, label_b), key)
            continue
        different += 1
        if different <= 40:
            print(f"{key}:\n  {old_name}: {a}\n  {new_name}: {b}")
    offered = sum(isinstance(v, list) for v in new.values())
    print(f"{len(new)} questions ({offered} answered with candidates, {len(new) - offered} with an error); "
          f"{different} answer(s) differ in their launches or errors between {old_name} and {new_name}")
    changes = set()
    for a, b in labels:  # the label's parts that changed, e.g. form=waves_cvt -> form=waves,hw_convert
        parts_a, parts_b = re.split(r"[\[\],]", a), re.split(r"[\[\],]", b)
        changes.add((",".join(p for p in parts_a if p not in parts_b), ",".join(p for p in parts_b if p not in parts_a)))
    if new_forms_ok:
        print("answers that differ only by forms " + old_name + " lacks, per architecture: "
              + (", ".join(f"{arch} {count}" for arch, count in sorted(added.items())) or "none"))
    print(f"{len(labels)} distinct label(s) differ with the launches equal" + (
        "; the changed parts: " + "; ".join(f"{a!r} -> {b!r}" for a, b in sorted(changes)) if labels else ""))
    return 1 if different else 2 if labels else 0


if __name__ == "__main__":
    sys.exit(main())
