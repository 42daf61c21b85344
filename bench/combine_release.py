"""Whether the in-kernel combine's counter covers every wave's partial stores on gfx950, read
from the AMDGCN of each in-kernel-combine specialization the autopick can offer there.

    python3 -m bench.combine_release [--submission FILE] [--forms FORMAT:FORM,...] [--json] [--asm-dir DIR]
    python3 -m bench.combine_release --arrivals [--submission FILE] [--json]

compiles (tools/compile_target.py's specializations, Triton's own JIT binding, into an
empty Triton cache) every distinct specialization of the candidates with the in-kernel
combine that launch_candidates offers for the 8 benchmark shapes on 256 CUs of
gfx950, as offered and with each form forced, and prints one line a specialization: what
it found and every finding. --submission reads another copy of submission.py (one whose
kernels take KV_FORMAT and FORM); --forms keeps the specializations of those forms, spelled
as MLA_ROUTE spells them (e.g. fp8:gluon); --json prints the report as JSON instead;
--asm-dir writes each specialization's AMDGCN to DIR/<kernel>-<format>-<form>-w<warps>.amdgcn.
--arrivals instead runs each form's in-kernel-combine specialization in the gfx950 emulator
and prints the counter atomics a program issues (and the lanes of each that reach memory)
and how many a sequence's counter takes a call at each offered in-kernel launch
(counter_arrivals).

Why (AMDGPUUsage.rst, "Memory Model GFX942", which covers gfx950): a wave's vector memory
operations complete in order for that wave only, and "s_waitcnt vmcnt(0)" waits for the
issuing wave's own; the agent-scope release before an atomic (buffer_wbl2 sc1; s_waitcnt
vmcnt(0)) therefore orders the releasing wave's stores, and a workgroup barrier adds
nothing for vector memory outside tgsplit mode. Another wave's stores are covered by that
release only if that wave waited for them before the barrier both passed (the same gap
llvm-project #160501 / #161638 closed for GFX10+ CU mode). The acquire after the atomic
(s_waitcnt vmcnt(0); buffer_inv sc1) is the acquiring wave's too.

Each wave's paths through the kernel's control-flow graph are followed (labels and
branches, tools/amdgcn.parse), both ways at every conditional branch except where the
wave's exec mask decides it: exec is non-empty at entry (whole waves); s_and_saveexec
with the first-active-lane condition (v_cmp_eq 0 of v_mbcnt over a copy of exec, the
AMDGPU atomic optimizer's) keeps it non-empty, any other mask may empty it, and
s_cbranch_execz / execnz then go either way (a wave that skips a one-thread branch).
vmcnt counts vector loads, stores and atomics in issue order (gfx9): s_waitcnt vmcnt(N)
retires a store once N vector operations have issued after it.
  partial store    a vector store from which a counter atomic can be reached
  counter atomic   any vector atomic (the kernels' only atomics are on the counter)
  arrival          a counter atomic that no counter atomic precedes (the count itself;
                   an atomic after it, e.g. the merging program's acquire, is not one)
  release          an arrival after a buffer_wbl2 (the agent-scope release sequence);
                   the wave's own when it runs it (exec non-empty) after its stores
Findings, per wave path:
  outstanding-at-barrier  the wave passes an s_barrier from which a release can be reached
                          with a partial store not retired, retires it before no later
                          such barrier, and no release of its own follows on that path
                          (another wave's release may then count the program before the
                          store lands)
  outstanding-at-release  its own release runs with a partial store not retired
  never-released          it ends (s_endpgm) with a partial store neither retired before
                          such a barrier nor covered by a release of its own
  read-before-acquire     it runs a vector load reachable from an arrival (the merge's
                          reads) before its own acquire: a buffer_inv sc1 after it passed
                          a barrier that follows every arrival (it knows the count), or
                          after a counter atomic it ran there, retired by s_waitcnt
The findings over-approximate what a wave can do (both ways at every branch): none means
every path is safe; a finding names the path's instruction. The kernels' protocol on
gfx950 (submission._arrive): every wave's own release fence retires its partial stores
before the barrier that thread 0's arrival follows, and every wave of the merging program
acquires for itself; how many atomics a program issues, and with how many lanes, the gfx950
emulator counts as it runs the code (tools/gfx950_cases.py). tests/test_combine_release.py
checks each specialization's WAVE_FENCE_THREADS; the interpreter and GPU tests show the
merge waiting for the whole count.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import importlib.util
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from tools import amdgcn

ARCH = "gfx950"
_ATOMIC = re.compile(r"(buffer|global|flat)_atomic_\w+")
_STORE = re.compile(r"(buffer|global|flat)_store_\w+")
_LOAD = re.compile(r"(buffer|global|flat)_load_\w+")
_CACHE_CONTROL = ("buffer_wbl2", "buffer_inv", "buffer_wbinvl1", "buffer_gl0_inv", "buffer_gl1_inv")
_REGISTER = re.compile(r"^([sva])(?:(\d+)|\[(\d+):(\d+)\])$")
_NO_DESTINATION = ("s_waitcnt", "s_barrier", "s_branch", "s_cbranch_", "s_endpgm", "s_nop", "s_setprio",
                   "s_sleep", "s_cmp", "s_bitcmp", "ds_write", "buffer_wbl2", "buffer_inv")
MAX_PENDING = amdgcn.MAX_VMCNT + 1  # a store with more vector operations after it than vmcnt holds


def registers(token: str) -> frozenset:
    """The 32-bit registers an operand names ("s[4:5]" -> s4, s5; "vcc" -> vcc_lo, vcc_hi)."""
    token = token.strip()
    if token in ("vcc", "exec"):
        return frozenset({f"{token}_lo", f"{token}_hi"})
    if token in ("vcc_lo", "vcc_hi", "exec_lo", "exec_hi", "m0", "scc"):
        return frozenset({token})
    match = _REGISTER.match(token)
    if not match:
        return frozenset()
    kind, single, first, last = match.groups()
    if single is not None:
        return frozenset({f"{kind}{single}"})
    return frozenset(f"{kind}{n}" for n in range(int(first), int(last) + 1))


def operands_of(text: str) -> list[str]:
    return [part.strip().split(" ")[0] for part in text.split(",")] if text else []


def destinations(mnemonic: str, operands: list[str]) -> frozenset:
    """The registers an instruction may write (a superset: facts about them are dropped)."""
    if not operands or mnemonic.startswith(_NO_DESTINATION) or _STORE.fullmatch(mnemonic):
        return frozenset()
    if _ATOMIC.fullmatch(mnemonic) and "sc0" not in operands and "glc" not in operands:
        return frozenset()  # no value returned
    written = set(registers(operands[0]))
    if mnemonic.startswith("v_") and len(operands) > 1 and (operands[1].startswith("s") or operands[1] == "vcc"):
        written |= registers(operands[1])  # a carry-out or VOP3 scalar destination
    if "saveexec" in mnemonic or mnemonic.startswith("v_cmpx"):
        written |= registers("exec")
    return frozenset(written)


@dataclasses.dataclass(frozen=True)
class WaveState:
    """What one wave knows on one path (hashable: the search visits each (point, state) once)."""
    exec: str = "some"                 # "some", "maybe" (possibly empty) or "empty" lanes active
    saved: frozenset = frozenset()     # (register token, exec state it holds)
    exec_copies: frozenset = frozenset()  # register tokens that hold a copy of exec
    mbcnt_lo: frozenset = frozenset()  # (vgpr, exec-copy token): v_mbcnt_lo over the copy's low half
    mbcnt: frozenset = frozenset()     # vgprs holding each lane's rank among the active lanes
    vcc_first_lane: bool = False       # vcc = the first active lane
    pending: int | None = None         # vector operations issued since the youngest unretired partial store
    uncovered: bool = False            # a partial store neither covered by a release nor before a barrier
    exposed_at: int | None = None      # a barrier before a release passed with a partial store outstanding
    wrote_back: bool = False           # buffer_wbl2 since the youngest partial store
    after_arrivals: bool = False       # passed a barrier that every arrival precedes
    acquire_pending: int | None = None  # vector operations since a counter atomic after the arrivals
    acquire_retired: bool = False      # that atomic retired (s_waitcnt)
    acquired: bool = False             # buffer_inv sc1 after a retired one


def _kill(state: WaveState, written: frozenset) -> WaveState:
    if not written:
        return state
    overlaps = lambda token: registers(token) & written  # noqa: E731
    return dataclasses.replace(
        state,
        saved=frozenset((t, s) for t, s in state.saved if not overlaps(t)),
        exec_copies=frozenset(t for t in state.exec_copies if not overlaps(t)),
        mbcnt_lo=frozenset((v, t) for v, t in state.mbcnt_lo if not overlaps(v) and not overlaps(t)),
        mbcnt=frozenset(v for v in state.mbcnt if not overlaps(v)),
        vcc_first_lane=state.vcc_first_lane and not (written & registers("vcc")))


def _new_exec(state: WaveState, value: str) -> WaveState:
    # Copies of the old exec and ranks over it no longer describe the active lanes.
    return dataclasses.replace(state, exec=value, exec_copies=frozenset(), mbcnt_lo=frozenset(),
                               mbcnt=frozenset(), vcc_first_lane=False)


def _saved_exec(state: WaveState, token: str) -> str:
    return next((s for t, s in state.saved if t == token), "maybe")


def _halves(token: str) -> tuple:
    """("s10", "s11") for "s[10:11]"."""
    match = _REGISTER.match(token)
    if not match or match.group(2) is not None:
        return ("", "")
    kind, _, first, last = match.groups()
    return f"{kind}{first}", f"{kind}{last}"


def _union(a: str, b: str) -> str:
    if "some" in (a, b):
        return "some"
    return "empty" if a == b == "empty" else "maybe"


def _exec_effect(state: WaveState, mnemonic: str, ops: list[str]) -> WaveState:
    """The instruction's effect on exec and on the facts that track it."""
    written = destinations(mnemonic, ops)
    if mnemonic == "s_mov_b64" and ops[1] == "exec" and ops[0] != "exec":
        state = _kill(state, written)  # a copy of exec: ranks over it, and a mask to restore
        return dataclasses.replace(state, exec_copies=state.exec_copies | {ops[0]},
                                   saved=state.saved | {(ops[0], state.exec)})
    if mnemonic == "v_mbcnt_lo_u32_b32":  # v = lanes below this one in the mask ops[1] (the low half)
        pair = next((t for t in state.exec_copies if _halves(t)[0] == ops[1] and ops[2] == "0"), None)
        state = _kill(state, registers(ops[0]))
        return dataclasses.replace(state, mbcnt_lo=state.mbcnt_lo | {(ops[0], pair)}) if pair else state
    if mnemonic == "v_mbcnt_hi_u32_b32":  # ... plus those in the high half ops[1]: the lane's rank
        ranked = any(v == ops[2] and _halves(t)[1] == ops[1] for v, t in state.mbcnt_lo)
        state = _kill(state, registers(ops[0]))
        return dataclasses.replace(state, mbcnt=state.mbcnt | {ops[0]}) if ranked else state
    if mnemonic == "v_cmp_eq_u32_e32" and ops[0] == "vcc":
        first = (ops[1] == "0" and ops[2] in state.mbcnt) or (ops[2] == "0" and ops[1] in state.mbcnt)
        state = _kill(state, written)
        return dataclasses.replace(state, vcc_first_lane=first)
    if mnemonic.endswith("saveexec_b64"):
        before = state.exec
        keeps = mnemonic == "s_and_saveexec_b64" and ops[1] == "vcc" and state.vcc_first_lane and before == "some"
        state = _kill(state, written)
        state = dataclasses.replace(state, saved=state.saved | {(ops[0], before)})
        return _new_exec(state, "some" if keeps else ("empty" if before == "empty" else "maybe"))
    if ops and ops[0] == "exec":
        if mnemonic == "s_or_b64" and "exec" in ops[1:]:
            other = ops[2] if ops[1] == "exec" else ops[1]
            return _new_exec(state, _union(state.exec, _saved_exec(state, other)))
        if mnemonic == "s_mov_b64":
            return _new_exec(state, _saved_exec(state, ops[1]))
        return _new_exec(state, "maybe")
    if mnemonic.startswith("v_cmpx"):
        return _new_exec(_kill(state, written), "maybe")
    return _kill(state, written)


class Kernel:
    """The control-flow graph of one AMDGCN listing and the instruction roles above."""

    def __init__(self, asm: str):
        self.instructions, labels = amdgcn.parse(asm)
        self.ops = [operands_of(text) for _, text in self.instructions]
        self.label_at = {index: name for name, index in labels.items()}
        self.targets = {}
        for index, (mnemonic, text) in enumerate(self.instructions):
            if mnemonic in ("s_setpc_b64", "s_swappc_b64", "s_call_b64"):
                raise ValueError(f"{mnemonic}: calls and computed jumps are not followed")
            if mnemonic == "s_branch" or mnemonic.startswith("s_cbranch_"):
                if self.ops[index][0] not in labels:
                    raise ValueError(f"{mnemonic} {text}: no such label")
                self.targets[index] = labels[self.ops[index][0]]
        n = len(self.instructions)
        self.atomics = {i for i in range(n) if _ATOMIC.fullmatch(self.instructions[i][0])}
        reaches_atomic = self._backward(self.atomics)
        self.partial_stores = {i for i in range(n) if _STORE.fullmatch(self.instructions[i][0])
                               and any(s in reaches_atomic for s in self.successors(i))}
        self.arrivals = {a for a in self.atomics if a not in self._forward(self.atomics)}
        write_backs = {i for i in range(n) if self.instructions[i][0] == "buffer_wbl2"}
        self.releases = self.arrivals & self._forward(write_backs, stop=self.atomics | self.partial_stores)
        after_arrivals = self._forward(self.arrivals)
        reaches_arrival = self._backward(self.arrivals)
        reaches_release = self._backward(self.releases)
        barriers = {i for i in range(n) if self.instructions[i][0] == "s_barrier"}
        self.barriers_before_release = {b for b in barriers if b in reaches_release}
        self.barriers_after_arrivals = {b for b in barriers if b in after_arrivals and b not in reaches_arrival}
        self.merge_reads = {i for i in after_arrivals if _LOAD.fullmatch(self.instructions[i][0])}

    def successors(self, index: int) -> list[int]:
        mnemonic = self.instructions[index][0]
        if mnemonic == "s_endpgm":
            return []
        if mnemonic == "s_branch":
            return [self.targets[index]]
        following = [index + 1] if index + 1 < len(self.instructions) else []
        return following + [self.targets[index]] if index in self.targets else following

    def _forward(self, starts: set, stop: set = frozenset()) -> set:
        """Instructions reachable after `starts` (not the starts themselves unless reached
        again), not going past an instruction of `stop`."""
        seen, work = set(), [s for start in starts for s in self.successors(start)]
        while work:
            i = work.pop()
            if i in seen:
                continue
            seen.add(i)
            if i not in stop:
                work.extend(self.successors(i))
        return seen

    def _backward(self, targets: set) -> set:
        """Instructions from which one of `targets` can be reached (the targets included)."""
        preds = collections.defaultdict(list)
        for i in range(len(self.instructions)):
            for s in self.successors(i):
                preds[s].append(i)
        seen, work = set(), list(targets)
        while work:
            i = work.pop()
            if i in seen:
                continue
            seen.add(i)
            work.extend(preds[i])
        return seen

    def where(self, index: int) -> str:
        """The instruction and its place: the nearest label above it and the distance."""
        label, back = "entry", index
        for i in range(index, -1, -1):
            if i in self.label_at:
                label, back = self.label_at[i], index - i
                break
        mnemonic, text = self.instructions[index]
        return f"{label}+{back}: {mnemonic} {text}".rstrip()


def _branches(kernel: Kernel, index: int, state: WaveState) -> list:
    mnemonic = kernel.instructions[index][0]
    if mnemonic not in ("s_cbranch_execz", "s_cbranch_execnz"):
        return [(s, state) for s in kernel.successors(index)]
    taken, fall = kernel.targets[index], index + 1
    skip_when_empty = mnemonic == "s_cbranch_execz"
    empty_edge, some_edge = (taken, fall) if skip_when_empty else (fall, taken)
    edges = []
    if state.exec in ("some", "maybe"):
        edges.append((some_edge, dataclasses.replace(state, exec="some")))
    if state.exec in ("empty", "maybe"):
        edges.append((empty_edge, dataclasses.replace(state, exec="empty")))
    return edges


def _step(kernel: Kernel, index: int, state: WaveState, findings: dict) -> WaveState:
    """The state after instruction `index` runs (findings recorded by kind and place)."""
    mnemonic, text = kernel.instructions[index]
    ops = kernel.ops[index]
    runs = state.exec == "some"        # certainly executed by this wave's lanes
    may_run = state.exec != "empty"
    if index in kernel.partial_stores and may_run:
        state = dataclasses.replace(state, pending=0, uncovered=True, wrote_back=False)
    elif amdgcn.instruction_class(mnemonic) == "vmem" and not mnemonic.startswith(_CACHE_CONTROL) and runs:
        bump = lambda n: None if n is None else min(n + 1, MAX_PENDING)  # noqa: E731
        state = dataclasses.replace(state, pending=bump(state.pending), acquire_pending=bump(state.acquire_pending))
    if mnemonic == "s_waitcnt":
        limit = amdgcn._vmcnt_limit(text)
        if limit is not None:
            if state.pending is not None and state.pending >= limit:
                state = dataclasses.replace(state, pending=None)
            if state.acquire_pending is not None and state.acquire_pending >= limit:
                state = dataclasses.replace(state, acquire_pending=None, acquire_retired=True)
    elif mnemonic.startswith("s_waitcnt_"):
        raise ValueError(f"{mnemonic}: a gfx10+ split counter; this model is gfx9's (stores count in vmcnt)")
    elif mnemonic == "buffer_wbl2" and runs:
        state = dataclasses.replace(state, wrote_back=True)
    elif mnemonic == "buffer_inv" and runs and "sc1" in ops and (state.acquire_retired or state.after_arrivals):
        state = dataclasses.replace(state, acquired=True)
    elif mnemonic == "s_barrier":
        if index in kernel.barriers_before_release:
            if state.pending is not None:
                if state.exposed_at is None:
                    state = dataclasses.replace(state, exposed_at=index)
            else:  # complete before this barrier, which another wave's release follows
                state = dataclasses.replace(state, uncovered=False, exposed_at=None)
        if index in kernel.barriers_after_arrivals:
            state = dataclasses.replace(state, after_arrivals=True)
    elif mnemonic == "s_endpgm":
        if state.exposed_at is not None:
            findings["outstanding-at-barrier"].add(state.exposed_at)
        elif state.uncovered:
            findings["never-released"].add(index)
    if index in kernel.atomics and runs:
        if index in kernel.releases and state.wrote_back:
            if state.pending is not None:
                findings["outstanding-at-release"].add(index)
            state = dataclasses.replace(state, uncovered=False, exposed_at=None)
        if state.after_arrivals:
            state = dataclasses.replace(state, acquire_pending=0, acquire_retired=False)
    if index in kernel.merge_reads and may_run and not state.acquired:
        findings["read-before-acquire"].add(index)
    return _exec_effect(state, mnemonic, ops)


def check(asm: str) -> dict:
    """{"partial_stores", "arrivals", "releases", "merge_reads", "states": counts,
    "findings": {kind: [place, ...]}}
    for one kernel's AMDGCN text."""
    kernel = Kernel(asm)
    findings = collections.defaultdict(set)
    seen, work = set(), [(0, WaveState())]
    while work:
        index, state = work.pop()
        if (index, state) in seen:
            continue
        seen.add((index, state))
        after = _step(kernel, index, state, findings)
        work.extend(_branches(kernel, index, after))
    return {"partial_stores": len(kernel.partial_stores), "arrivals": len(kernel.arrivals),
            "releases": len(kernel.releases),
            "merge_reads": len(kernel.merge_reads), "states": len(seen),
            "findings": {kind: [kernel.where(i) for i in sorted(places)] for kind, places in sorted(findings.items())}}


def load_submission(path: Path | None):
    """submission.py, or the copy at `path` imported under that name (tools/compile_target.py
    reads `submission`; Triton reads a kernel's source from its file)."""
    if path is not None:
        spec = importlib.util.spec_from_file_location("submission", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        spec.loader.exec_module(module)
    import submission
    return submission


def combine_launches(sub, compile_target):
    """Every candidate with the in-kernel combine that the autopick offers for the benchmark
    shapes on gfx950: as offered (compile_target.offered_launches), and with each form
    forced (MLA_ROUTE=triton_<format>:<form>; the Triton forms are also what leads where
    Gluon does not import). A Gluon form is forced only where Gluon runs (check_gluon_here)."""
    yield from (o for o in compile_target.offered_launches(ARCH, with_aiter=False) if o.launch.combine_in_kernel)
    cus = compile_target.DEVICE_CUS[ARCH]
    for record in sub.KERNEL_FORMS:
        kv_format, form = record.kv_format, record.name
        if record.language == "gluon" and not sub.gluon_forms_here(ARCH, record):
            continue
        for batch, kv_len in compile_target.BENCHMARK_SHAPES:
            data = compile_target.contract_inputs(batch, kv_len)
            for rank, launch in enumerate(sub.launch_candidates(kv_format, batch, kv_len, cus, ARCH, form)):
                if launch.combine_in_kernel:
                    yield compile_target.OfferedLaunch(f"triton_{kv_format}", kv_format, batch, kv_len, rank,
                                                       launch, compile_target.decode_kernel_calls(data, kv_format,
                                                                                                  launch))


def form_of(spec) -> str:
    """The decode specialization's form as MLA_ROUTE spells it, <format>:<form>."""
    values = spec.constexpr_values()
    return f"{values['KV_FORMAT']}:{values['FORM']}"


def specialization_name(spec) -> str:
    return f"{spec.kernel.fn.__name__}[{form_of(spec)}, warps {spec.options.num_warps}]"


def counter_arrivals(sub, compile_target) -> dict:
    """How many atomics a sequence's counter takes in one call with the in-kernel combine on
    gfx950: each form's in-kernel-combine specialization forced and run in the gfx950 emulator
    on its quick case (tools/gfx950_cases.py: the atomics each program issued, with the lanes
    of each that reached memory), then, for every in-kernel launch the autopick offers for the
    8 benchmark shapes on 256 CUs, every program but the merging one as a plain program, and
    the merging one as itself: (splits - 1) x a program's lanes + the merging program's."""
    from tools import gfx950_cases
    per_form = {}
    for target in gfx950_cases.forced_combine_targets():
        result = gfx950_cases.run_target(target, gfx950_cases.quick_case(target))
        kinds = sorted(result.atomics.get("kinds", []), key=lambda kind: kind["instructions"])
        form = f"{target.offered.kv_format}:{target.offered.launch.form}"
        per_form[form] = {"passed": result.passed, "program": kinds[0] if kinds else None,
                          "merging": kinds[-1] if kinds else None}
    rows = []
    for offered in compile_target.offered_launches(ARCH, with_aiter=False):
        launch = offered.launch
        if not launch.combine_in_kernel:
            continue
        form = per_form[f"{offered.kv_format}:{launch.form}"]
        program, merging = form["program"], form["merging"]
        rows.append({"shape": [offered.batch, offered.kv_len], "form": f"{offered.kv_format}:{launch.form}",
                     "splits": launch.num_splits,
                     "program": {"atomics": program["instructions"], "lanes": program["performed"]},
                     "merging": {"atomics": merging["instructions"], "lanes": merging["performed"]},
                     "counter_atomics_a_call": (launch.num_splits - 1) * sum(program["performed"])
                     + sum(merging["performed"])})
    return {"forms": per_form, "launches": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description="Check on gfx950's AMDGCN that every wave's partial stores "
                                                 "are released before the in-kernel combine counts them.")
    parser.add_argument("--submission", type=Path, help="another copy of submission.py to read")
    parser.add_argument("--forms", help="comma-separated forms to keep, <format>:<form> (default: all)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--asm-dir", type=Path, help="write each specialization's AMDGCN here")
    parser.add_argument("--arrivals", action="store_true",
                        help="instead: the counter atomics a program issues (run in the gfx950 emulator) and a "
                             "sequence's counter takes a call at the offered in-kernel launches' split counts")
    args = parser.parse_args()
    if os.environ.get("TRITON_INTERPRET") == "1":
        raise SystemExit("combine_release compiles kernels: run it with TRITON_INTERPRET unset")
    sub = load_submission(args.submission)
    import triton

    from tools import compile_target
    from triton import knobs
    if args.arrivals:
        report = counter_arrivals(sub, compile_target)
        if args.json:
            print(json.dumps(report, indent=1))
            return
        for form, entry in report["forms"].items():
            program, merging = entry["program"], entry["merging"]
            print(f"{form}: a program issues {program['instructions']} counter atomic(s), lanes reaching memory "
                  f"{program['performed']}; the merging program {merging['instructions']}, lanes "
                  f"{merging['performed']} (emulated run {'passed' if entry['passed'] else 'FAILED'})")
        print(f"{'shape':<10} {'form':<12} {'splits':>6} {'atomics a sequence a call':>26}")
        for row in report["launches"]:
            shape = f"{row['shape'][0]}x{row['shape'][1]}"
            print(f"{shape:<10} {row['form']:<12} {row['splits']:>6} {row['counter_atomics_a_call']:>26}")
        return
    specs = compile_target.distinct_specializations(combine_launches(sub, compile_target),
                                                    compile_target.TARGETS[ARCH])
    if args.forms:
        kept = set(args.forms.split(","))
        specs = {key: spec for key, spec in specs.items() if form_of(spec) in kept}
    report = {"triton": triton.__version__, "gluon_available": sub.GLUON_AVAILABLE, "specializations": []}
    with tempfile.TemporaryDirectory() as cache:
        knobs.cache.dir = cache
        for spec in specs.values():
            entry = {"name": specialization_name(spec), "language": spec.language, "num_warps": spec.options.num_warps,
                     "constexprs": {k: v for k, v in spec.constexpr_values().items() if k.isupper()}}
            started = time.perf_counter()
            try:
                compiled = spec.compile()
            except Exception as error:  # reported, not hidden: the caller decides what a failed compile means
                last_line = (str(error).strip().splitlines() or [""])[-1]
                entry["compile_error"] = f"{type(error).__name__}: {last_line}"
            else:
                entry |= check(compiled.asm["amdgcn"])
                if args.asm_dir:
                    args.asm_dir.mkdir(parents=True, exist_ok=True)
                    name = f"{spec.kernel.fn.__name__}-{form_of(spec).replace(':', '-')}-w{spec.options.num_warps}.amdgcn"
                    (args.asm_dir / name).write_text(compiled.asm["amdgcn"])
            entry["seconds"] = round(time.perf_counter() - started, 2)
            report["specializations"].append(entry)
    if args.json:
        print(json.dumps(report, indent=1))
        return
    print(f"triton {report['triton']}, Gluon {'imports' if report['gluon_available'] else 'does not import'}")
    for entry in report["specializations"]:
        if "compile_error" in entry:
            print(f"{entry['name']}: does not compile: {entry['compile_error']}")
            continue
        found = sum(len(places) for places in entry["findings"].values())
        print(f"{entry['name']}: {entry['partial_stores']} partial stores, {entry['arrivals']} arrivals ({entry['releases']} releasing), "
              f"{entry['merge_reads']} merge reads, {entry['states']} wave states: "
              f"{'no finding' if not found else f'{found} findings'} ({entry['seconds']} s)")
        for kind, places in entry["findings"].items():
            for place in places:
                print(f"    {kind}: {place}")


if __name__ == "__main__":
    main()
