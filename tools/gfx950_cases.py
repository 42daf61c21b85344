"""What the gfx950 emulator runs: every kernel specialization the autopick offers on an
MI355X (gfx950, 256 CUs, aiter importable) for the 8 benchmark shapes, each compiled for
gfx950 as Triton's JIT would compile it (tools/compile_target.py) and run in the emulator
(tools/gfx950_emu) on small inputs of the same specialization, checked against an oracle:

- a decode launch (the Triton and Gluon forms of both formats, with the split combine it
  uses): exact fp32 attention over the KV format it reads, within the project's verifier
  bound for its (format, form) (submission.error_bound), and no non-finite mismatch; a Gluon
  form's output also within MODEL_TOLERANCE of the torch model of its gfx950 rounding
  (tools/gfx950_numerics.py, which its bound was measured with); the counter atomics its
  programs issue are counted (the in-kernel combine's arrivals);
- the aiter route's Triton launches (the Q quantizer with the metadata variant's guard, or
  the guard alone): the torch statement of the same computation (the quantizer's bytes and
  scale bit for bit; the guard's lengths, kv_indptr and NaN on a refused call).

Each target keeps the offered launch that contains it with the fewest workgroups (its split
count and combine are that launch's own). A small case must specialize exactly as the
benchmark launch does (the same JIT cache key): else the run stops with the difference.
The submission module is whatever `import submission` gives when this module is first
imported: the checkout's, or another copy (python3 -m tools.gfx950_emulate --submission)."""
from __future__ import annotations

import collections
import dataclasses
import time

import numpy as np
import torch
import triton

import reference
import submission as sub
from tools import amdgcn
from tools import compile_target as ct
from tools import gfx950_numerics
from tools.gfx950_emu import (CompiledKernel, EmulationStopped, GlobalMemory, ListingError, Machine,
                              NotImplementedInstruction, build_launch, read_listing)

GFX950 = ct.TARGETS["gfx950"]


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    lengths: tuple          # kv tokens per sequence (q_seq_len 1); the KV buffer holds exactly these rows
    padded: bool = False    # MXFP4 scales in the older padded layout (rows to 256, 24 columns)
    views: bool = False     # every input a view inside a larger buffer
    seed: int = 20261201


MIXED = Case("mixed lengths: several tiles, an empty sequence, a single token", (300, 0, 1))
ONE_SEQUENCE = Case("one sequence over several tiles", (300,))
FULL_CASES = (
    Case("a single token and 52 tokens in a buffer of 53 rows (under one tile)", (1, 52)),
    MIXED,
    Case("views in larger buffers, padded MXFP4 scales", (64, 300), padded=True, views=True),
)
QUICK_WORKGROUPS = 24  # the quick run's mixed case for launches of up to this many decode programs


def quick_case(target: "Target") -> Case:
    """The CI subset's one case: the mixed one, or one sequence where the launch's splits
    would make three sequences many programs (most of them empty splits)."""
    splits = getattr(target.offered.launch, "num_splits", 1)
    return MIXED if splits * len(MIXED.lengths) <= QUICK_WORKGROUPS else ONE_SEQUENCE


@dataclasses.dataclass
class Target:
    """One distinct gfx950 specialization and the offered launch it is run through."""
    kernels: list        # kernel names of the launch's calls, the target's marked
    identity: tuple      # the target specialization's (module, name, key)
    offered: object      # compile_target.OfferedLaunch
    call_index: int      # which of the launch's calls is the target
    label: str


@dataclasses.dataclass
class Result:
    target: str
    case: str
    instructions: int
    seconds: float
    passed: bool
    detail: str
    violations: list
    atomics: dict = dataclasses.field(default_factory=dict)  # atomic_census of the run (decode launches)
    measures: dict = dataclasses.field(default_factory=dict)  # a decode's errors, bound and model agreement


def _cost(offered) -> int:
    return sum(max(1, _prod(call.grid)) for call in offered.calls)


def _prod(grid) -> int:
    n = 1
    for g in grid:
        n *= g
    return n


def offered_targets() -> list[Target]:
    """Every distinct gfx950 specialization of the offered launches, in first-offered order."""
    found: dict = {}
    order = []
    for offered in ct.offered_launches("gfx950", with_aiter=True):
        for index, call in enumerate(offered.calls):
            spec = ct.specialize(call, GFX950)
            best = found.get(spec.identity)
            if best is None:
                order.append(spec.identity)
            if best is None or _cost(offered) < _cost(best[0]):
                found[spec.identity] = (offered, index, spec)
    targets = []
    for identity in order:
        offered, index, spec = found[identity]
        names = [c.kernel.fn.__name__ for c in offered.calls]
        constexprs = spec.constexpr_values()
        shown = {k: v for k, v in constexprs.items() if k in ("KV_FORMAT", "FORM", "HW_CONVERT", "SPLIT",
                                                             "COMBINE_IN_KERNEL", "MERGE_SPLITS", "BLOCK_N",
                                                             "SPLITS_POW2", "COLUMNS", "MIN_KV_LEN")}
        label = f"{names[index]} {shown}" if shown else names[index]
        targets.append(Target(names, identity, offered, index, label))
    return targets


def forced_combine_targets() -> list[Target]:
    """The in-kernel-combine specialization of every kernel form forced on an MI355X
    (MLA_ROUTE=triton_<format>:<form>) at 64 x 8192, its first launch with the in-kernel
    combine: every form's arrival protocol run, where the autopick offers it for the leading
    forms only (python3 -m tools.gfx950_emulate --forced-combine)."""
    targets = []
    data = ct.contract_inputs(64, 8192)
    for record in (record for record in sub.KERNEL_FORMS if sub.form_runs_on(record, "gfx950")):
        launch = sub.launch_candidates(record.kv_format, 64, 8192, ct.DEVICE_CUS["gfx950"], "gfx950",
                                              form=record.name)[0]
        launch = dataclasses.replace(launch, combine_in_kernel=True)
        calls = ct.decode_kernel_calls(data, record.kv_format, launch)
        offered = ct.OfferedLaunch(f"triton_{record.kv_format}", record.kv_format, 64, 8192, 0, launch, calls)
        spec = ct.specialize(calls[0], GFX950)
        constexprs = spec.constexpr_values()
        shown = {k: v for k, v in constexprs.items() if k in ("KV_FORMAT", "FORM", "HW_CONVERT", "SPLIT",
                                                             "COMBINE_IN_KERNEL", "MERGE_SPLITS", "BLOCK_N")}
        targets.append(Target([c.kernel.fn.__name__ for c in calls], spec.identity, offered, 0,
                              f"{calls[0].kernel.fn.__name__} {shown} (forced)"))
    return targets


def forced_form_calls() -> list:
    """The decode calls of every kernel form with a gfx950 kernel forced on an MI355X
    (MLA_ROUTE=triton_fp8:f16 and the like; the autopick offers only some there), at 64 x 8192, each form's first launch
    with the in-kernel combine where it splits: what an MI355X compiles when a user forces
    a form (their listings must read in the emulator; they are not run here)."""
    calls = []
    data = ct.contract_inputs(64, 8192)
    for record in (record for record in sub.KERNEL_FORMS if sub.form_runs_on(record, "gfx950")):
        kv_format, form = record.kv_format, record.name
        launch = sub.launch_candidates(kv_format, 64, 8192, 256, "gfx950", form=form)[0]
        if launch.num_splits > 1:
            launch = dataclasses.replace(launch, combine_in_kernel=True)
        calls += [(kv_format, form, call) for call in ct.decode_kernel_calls(data, kv_format, launch)]
    return calls


# ---- compiling and running a launch ----
@dataclasses.dataclass
class CompiledSpecialization(CompiledKernel):
    """A KernelCall's specialization compiled for gfx950."""
    identity: tuple = ()     # (module, kernel name, JIT cache key)
    constexprs: dict = dataclasses.field(default_factory=dict)
    compile_seconds: float = 0.0


_COMPILED: dict = {}


def compile_for_gfx950(call) -> CompiledSpecialization:
    """The gfx950 compile of a KernelCall's specialization (cached per JIT key)."""
    spec = ct.specialize(call, GFX950)
    if spec.identity in _COMPILED:
        return _COMPILED[spec.identity]
    started = time.perf_counter()
    compiled = spec.compile()
    seconds = time.perf_counter() - started
    result = CompiledSpecialization(spec.kernel.fn.__name__, dict(spec.signature), read_listing(compiled.asm["amdgcn"]),
                                    int(compiled.metadata.shared), int(compiled.metadata.num_warps),
                                    spec.identity, spec.constexpr_values(), seconds)
    _COMPILED[spec.identity] = result
    return result


def run_calls(calls, memory: GlobalMemory | None = None, machine: Machine | None = None):
    """Runs KernelCalls in order in one emulated memory; returns (machine, [LaunchResult])."""
    memory = memory or GlobalMemory()
    machine = machine or Machine(memory)
    results = []
    for call in calls:
        launch = build_launch(call, compile_for_gfx950(call), memory)
        with np.errstate(all="ignore"):
            results.append(machine.run(launch))
    return machine, results


# ---- decode launches ----
def _view_of(tensor: torch.Tensor, views: bool, lead: int = 3) -> torch.Tensor:
    """tensor itself, or an equal copy placed `lead` rows into a larger buffer."""
    if not views:
        return tensor
    big = torch.empty((tensor.shape[0] + lead + 2, *tensor.shape[1:]), dtype=tensor.dtype)
    big.view(torch.uint8).fill_(0xFF) if big.dtype != torch.uint8 else big.fill_(0xFF)
    view = big[lead:lead + tensor.shape[0]]
    view.copy_(tensor)
    return view


def decode_inputs(case: Case, kv_format: str):
    """(q, kv operand tensors as the contract gives them, qo_indptr, kv_indptr, exact
    attention over the format's own KV) for a case, on the CPU."""
    gen = torch.Generator().manual_seed(case.seed)
    batch = len(case.lengths)
    total = sum(case.lengths)
    q = torch.randn((batch, 16, 576), generator=gen).to(torch.bfloat16)
    kv = torch.randn((total, 1, 576), generator=gen).to(torch.bfloat16)
    qo_indptr = torch.arange(batch + 1, dtype=torch.int32)
    kv_indptr = torch.zeros(batch + 1, dtype=torch.int32)
    kv_indptr[1:] = torch.tensor(case.lengths, dtype=torch.int32).cumsum(0)
    if kv_format == "fp8":
        buffer, scale = reference.quantize_fp8(kv)
        rows = buffer.float().reshape(total, 576) * scale.float()
        operands = {"fp8": (_view_of(buffer, case.views), scale)}
    else:
        buffer, scales = reference.quantize_mxfp4(kv, padded=case.padded)
        rows = reference.dequantize_mxfp4(buffer, scales, kv.shape).reshape(total, 576)
        operands = {"mxfp4": (_view_of(buffer, case.views), scales if case.padded else _view_of(scales, case.views))}
    q = _view_of(q, case.views, lead=1)
    exact = reference.attention_fp32(q.float(), rows, qo_indptr, kv_indptr, 576 ** -0.5)
    return q, operands, qo_indptr, kv_indptr, exact


def decode_calls(offered, case: Case):
    """The offered launch's calls on the case's inputs, as KernelRunner builds them (the
    per-call tensors) and as the plan does (scratch, arguments), on the CPU."""
    launch = offered.launch
    q, operands, qo_indptr, kv_indptr, exact = decode_inputs(case, offered.kv_format)
    kv, kv_scale = sub.kv_operands(operands, offered.kv_format, launch)
    out = sub._new_output(q)
    out.fill_(float("nan"))
    scratch = sub.make_split_scratch(len(case.lengths), launch, "cpu")
    scratch.part_o.fill_(float("nan"))
    scratch.part_lse.fill_(float("nan"))
    # decode_arguments refuses a Gluon launch on a device that cannot run it: it is shown a
    # "meta" twin of q (the same shape and strides), as tools/compile_target.py compiles.
    q_meta = torch.empty_strided(q.shape, q.stride(), dtype=q.dtype, device="meta")
    arguments = sub.decode_arguments(offered.kv_format, launch, q_meta, kv, kv_scale, 576 ** -0.5, scratch)
    calls = sub.decode_calls(offered.kv_format, launch, arguments, q, kv, kv_scale, qo_indptr, kv_indptr, out)
    model = None
    if sub.kernel_form(offered.kv_format, launch.form).language == "gluon":
        def model():
            return gfx950_numerics.gluon_form_output(offered.kv_format, q, (kv, kv_scale), kv_indptr, 576 ** -0.5,
                                                     launch.num_splits)
    return calls, out, exact, qo_indptr, model


# The largest difference allowed between a Gluon form's emulated output and its torch model
# (tools/gfx950_numerics.py), over the exact output's RMS: the model leaves out only the
# order of the MFMAs' fp32 sums and the GPU's exp2 / log2 (a bf16 ulp here and there).
MODEL_TOLERANCE = 1e-3


def _check_decode(offered, out, exact, qo_indptr, model) -> tuple[bool, str, dict]:
    form = sub.kernel_form(offered.kv_format, offered.launch.form).name
    bound, bound_name = sub.kernel_form(offered.kv_format, form).bound
    errors = sub.output_errors(out, exact, qo_indptr)
    ok = (errors["nonfinite"] == 0 and errors["sequence_rms"] <= bound.sequence_rms
          and errors["element"] <= bound.element)
    detail = (f"sequence rms {errors['sequence_rms']:.4f} (bound {bound.sequence_rms}), element "
              f"{errors['element']:.3f} (bound {bound.element}), non-finite {errors['nonfinite']}; {bound_name}")
    measures = {"sequence_rms": errors["sequence_rms"], "element": errors["element"], "nonfinite": errors["nonfinite"],
                "bound": dataclasses.asdict(bound), "bound_name": bound_name}
    if model is not None:
        agreement = gfx950_numerics.agreement(model(), out, exact)
        measures["model"] = agreement
        ok = ok and agreement["nonfinite_differ"] == 0 and agreement["largest_over_rms"] <= MODEL_TOLERANCE
        detail += (f"; its gfx950 model: {agreement['equal_share']:.2%} of elements equal, largest difference "
                   f"{agreement['largest_over_rms']:.1e} of the output's rms (tolerance {MODEL_TOLERANCE:g}), "
                   f"non-finite differing {agreement['nonfinite_differ']}")
    return ok, detail, measures


# ---- the aiter route's launches ----
AITER_BATCHES = (2, 3, 4, 7, 16, 32, 64)  # tried in turn for one that specializes as the benchmark launch


def aiter_calls(offered, case: Case, batch: int, refused: bool = False):
    """The offered aiter-route launch's Triton calls for a call of `batch` sequences (the
    case's lengths in turn) and a checker of their outputs: accepted (every sequence at
    least AITER_MIN_KV_LEN tokens, kv_indptr the plan's), or refused (a sequence of 16
    tokens; for the cached variant, the plan's kv_indptr differs), where every Q byte and
    the Q scale (a8w8) or the KV scale (a16w8) must come out NaN. The guards take the
    batch and the token count as arguments, so the batch is chosen for the
    specialization (AITER_BATCHES)."""
    variant = sub.AITER_RUNNERS[offered.launch["metadata"]]
    # lengths a multiple of 16, as at the benchmark shapes (total_kv divisible by 16)
    lengths = tuple(-(-max(n, sub.AITER_MIN_KV_LEN) // 16) * 16 for n in case.lengths)
    lengths = [lengths[i % len(lengths)] for i in range(batch)]
    if refused and variant is sub.AiterPerCallRunner:
        lengths[batch // 2] = 16
    gen = torch.Generator().manual_seed(case.seed)
    q = _view_of(torch.randn((batch, 16, 576), generator=gen).to(torch.bfloat16), False)
    kv_indptr = torch.zeros(batch + 1, dtype=torch.int32)
    kv_indptr[1:] = torch.tensor(lengths, dtype=torch.int32).cumsum(0)
    total_kv = int(kv_indptr[-1])
    kv_scale = torch.tensor([0.0123], dtype=torch.float32)
    plan_kv_indptr = kv_indptr.clone()
    if refused and variant is not sub.AiterPerCallRunner:
        plan_kv_indptr[1:] += 16   # the plan's sequences are longer than this call's
    if refused and variant is sub.AiterPerCallRunner:
        plan_kv_indptr[1:] = torch.arange(1, batch + 1, dtype=torch.int32) * sub.AITER_MIN_KV_LEN  # a valid fallback
    checked = torch.full((batch + 1,), -7, dtype=torch.int32)
    last_page_lens = torch.full((batch,), -7, dtype=torch.int32)
    guard_args = variant.guard_arguments(kv_indptr, plan_kv_indptr, checked, last_page_lens, batch, total_kv)
    if offered.launch["q_in_fp8"]:
        scratch = sub.make_q_fp8_scratch(q.shape, torch.float8_e4m3fn, "cpu")
        scratch.q_fp8_bytes.fill_(0x55)
        scratch.scale.fill_(float("nan"))
        calls = sub.q_fp8_guarded_calls(q, scratch, variant, guard_args)
    else:
        checked_kv_scale = torch.full((1,), float("nan"))
        calls = [sub.kv_scale_guard_call(kv_scale, checked_kv_scale, variant, guard_args)]

    def check() -> tuple[bool, str]:
        problems = []
        if refused:
            if offered.launch["q_in_fp8"]:
                if not (scratch.scale.isnan().all() and ((scratch.q_fp8_bytes & 0x7F) == 0x7F).all()):
                    problems.append(f"a refused call's Q is not all NaN (scale {scratch.scale.item()!r})")
            elif not checked_kv_scale.isnan().all():
                problems.append(f"a refused call's KV scale is {checked_kv_scale.item()!r}, not NaN")
        elif offered.launch["q_in_fp8"]:
            expected = sub.make_q_fp8_scratch(q.shape, torch.float8_e4m3fn, "cpu")
            sub._quantize_q_fp8_torch(q, expected)
            if not torch.equal(scratch.q_fp8_bytes, expected.q_fp8_bytes):
                bad = int((scratch.q_fp8_bytes != expected.q_fp8_bytes).sum())
                problems.append(f"{bad} of {expected.q_fp8_bytes.numel()} Q bytes differ from torch's quantizer")
            if not torch.equal(scratch.scale.view(torch.int32), expected.scale.view(torch.int32)):
                problems.append(f"Q scale {scratch.scale.item()!r}, torch's {expected.scale.item()!r}")
        elif not torch.equal(checked_kv_scale, kv_scale):
            problems.append(f"checked KV scale {checked_kv_scale.item()!r}, expected {kv_scale.item()!r}")
        if variant is sub.AiterPerCallRunner:
            want_indptr = torch.empty_like(checked)
            want_lens = torch.empty_like(last_page_lens)
            sub._check_kv_lengths_torch(kv_indptr, plan_kv_indptr, want_indptr, want_lens, total_kv)
            if not (torch.equal(checked, want_indptr) and torch.equal(last_page_lens, want_lens)):
                problems.append(f"checked kv_indptr {checked.tolist()} / lengths {last_page_lens.tolist()}, "
                                f"expected {want_indptr.tolist()} / {want_lens.tolist()}")
        what = "refused call: NaN out" if refused else "bit for bit as torch's statement of it"
        return not problems, "; ".join(problems) or what, {}
    return calls, check


# ---- running ----
def _check_specialization(target: Target, calls) -> None:
    spec = ct.specialize(calls[target.call_index], GFX950)
    if spec.identity != target.identity:
        raise RuntimeError(f"the small case specializes {target.label} differently from the benchmark launch "
                           f"(JIT key {spec.identity[2][:200]} against {target.identity[2][:200]})")


def run_target(target: Target, case: Case) -> Result:
    """The target's offered launch on the case, checked; for the aiter route's launches an
    accepted and a refused call, both checked."""
    if target.offered.route != "aiter_fp8":
        calls, out, exact, qo_indptr, model = decode_calls(target.offered, case)
        return _run(target, case, calls, lambda: _check_decode(target.offered, out, exact, qo_indptr, model))
    results = []
    for refused in (False, True):
        for batch in AITER_BATCHES:
            calls, check = aiter_calls(target.offered, case, batch, refused)
            if ct.specialize(calls[target.call_index], GFX950).identity == target.identity:
                break
        results.append(_run(target, case, calls, check))
    first, second = results
    return Result(target.label, case.name, first.instructions + second.instructions, first.seconds + second.seconds,
                  first.passed and second.passed, f"accepted: {first.detail}; refused: {second.detail}",
                  first.violations + second.violations)


def _run(target: Target, case: Case, calls, check) -> Result:
    started = time.perf_counter()
    _check_specialization(target, calls)
    machine = Machine(GlobalMemory())
    merge = MergeRecorder(calls[target.call_index]) if _merges_in_kernel(target) else None
    machine.trace = merge
    try:
        machine, results = run_calls(calls, machine.memory, machine)
    except (EmulationStopped, NotImplementedInstruction, ListingError) as error:
        # a listing with an instruction, operand or modifier this emulator does not know
        # (another Triton's code, say) fails by name, like a run that stops
        return Result(target.label, case.name, 0, time.perf_counter() - started, False,
                      f"stopped: {error}", list(machine.violations))
    instructions = sum(r.instructions for r in results)
    violations = list(machine.violations)
    ok, detail, measures = check()
    census = atomic_census(machine)
    if census:
        detail += f"; counter atomics: {census['summary']}"
    if merge is not None and (executed := merge.census(machine)):
        measures["merge"] = executed
        detail += (f"; the merge: {executed['instructions']} instructions and {executed['round_trips']} round trips "
                   f"to memory a wave at most, after its arrival")
        limit = parallel_merge_round_trips(target)
        if limit is not None and executed["round_trips"] > limit:
            ok = False
            detail += f" (a parallel merge waits through at most {limit}: not merged in parallel)"
    if violations:
        ok = False
        detail = f"{len(violations)} violation(s), the first: {violations[0]}; result: {detail}"
    return Result(target.label, case.name, instructions, time.perf_counter() - started, ok, detail, violations,
                  census, measures)


def parallel_merge_round_trips(target: Target) -> int | None:
    """The most round trips to memory one wave of a parallel merge (KernelForm.merge
    "parallel", submission._gluon_merge_splits) waits through for the target's splits: one
    for each chunk of columns (_gluon_merge_columns), the splits' lse with the first chunk's
    partials or on their own; None for a form that merges in a loop."""
    launch = target.offered.launch
    form = sub.kernel_form(target.offered.kv_format, launch.form)
    if getattr(form, "merge", "loop") != "parallel":  # (a tree before KernelForm.merge merged in a loop)
        return None
    groups = form.tiles[0].threads // 64
    columns = sub._gluon_merge_columns(sub._gluon_rows_layout("cdna4", groups),
                                       triton.next_power_of_2(launch.num_splits))
    return sub.V_HEAD_DIM // columns + 1


def _merges_in_kernel(target: Target) -> bool:
    offered = target.offered
    return (offered is not None and offered.route != "aiter_fp8"
            and target.kernels[target.call_index] != "_combine_splits_kernel"
            and offered.launch.combine_in_kernel and offered.launch.num_splits > 1)


class MergeRecorder:
    """A Machine.trace that records, for every wave of the decode call's launch, the
    instructions it executes past the kernel's first vector atomic (the in-kernel combine's
    arrival, tools/amdgcn.arrival_index): for the programs that merge, the merge as it ran,
    its loops as often as they ran (the static reading of bench/gfx950_report.py counts a
    loop once)."""

    def __init__(self, call):
        listing = compile_for_gfx950(call).listing
        start = amdgcn.arrival_index([(ins.mnemonic, "") for ins in listing.instructions])
        self.kernel = listing
        self.arrival_line = None if start is None else listing.instructions[start].line
        self.executed = collections.defaultdict(list)   # (workgroup, wave) -> [(mnemonic, operands)]

    def __call__(self, wave, compiled):
        ins = compiled.ins
        if self.arrival_line is not None and ins.line >= self.arrival_line and wave.workgroup.launch.kernel is self.kernel:
            self.executed[(wave.workgroup.ids, wave.index)].append((ins.mnemonic, ins.text[len(ins.mnemonic):].strip()))

    def census(self, machine: Machine) -> dict:
        """Over the programs that merged (those that issued a second counter atomic, the
        take-back): the most instructions and round trips to memory (amdgcn.load_round_trips,
        on the executed sequence) of one wave after its arrival; {} where none merged."""
        atomics = collections.Counter(issue.workgroup for issue in machine.atomics)
        merging = {workgroup for workgroup, count in atomics.items() if count >= 2}
        runs = [run for (workgroup, _), run in self.executed.items() if workgroup in merging]
        if not runs:
            return {}
        return {"programs": len(merging), "instructions": max(len(run) for run in runs),
                "round_trips": max(amdgcn.load_round_trips(run) for run in runs)}


def atomic_census(machine: Machine) -> dict:
    """The vector atomics the run's programs issued (in the decode kernels, only the
    in-kernel combine's counter takes any): for each kind of program, how many atomic
    instructions it issued and how many lanes of each reached memory, and how many programs
    were of that kind; {} where none was issued."""
    by_program = collections.defaultdict(list)
    for issue in machine.atomics:
        by_program[(issue.kernel, issue.workgroup)].append((issue.active, issue.performed))
    if not by_program:
        return {}
    kinds = collections.Counter(tuple(issues) for issues in by_program.values())

    def described(issues) -> str:
        lanes = "+".join(str(performed) for _, performed in issues)
        active = "+".join(str(active) for active, _ in issues)
        return f"{len(issues)} atomic(s), lanes reaching memory {lanes} (active {active})"
    return {"programs": len(by_program), "lanes": sum(p for issues in by_program.values() for _, p in issues),
            "kinds": [{"programs": n, "instructions": len(issues), "active": [a for a, _ in issues],
                       "performed": [p for _, p in issues]} for issues, n in sorted(kinds.items())],
            "summary": "; ".join(f"{n} program(s) issue {described(issues)}" for issues, n in sorted(kinds.items()))}
