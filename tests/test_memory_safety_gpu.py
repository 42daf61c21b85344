"""Issue 22, item 2: on a GPU, every compiled decode form and launch candidate reads only
its own inputs and writes only its output and scratch, shown with poison around them.

Fences: every tensor a decode call touches (q, the bf16 / fp8 / MXFP4 KV buffers, the fp8
scale, the MXFP4 scales, qo_indptr, kv_indptr, the output and each scratch tensor) is a
view inside a larger allocation, FENCE_BYTES of poison on each side (and in the gaps of a
strided view): NaN codes for bf16 (0xFFFF), fp8 e4m3fn (0xFF) and float32 (0xFFFFFFFF);
0xFF for e8m0 scales (NaN); 0x77 for e2m1 codes (6.0 twice, the largest: e2m1 has no NaN);
0x7F7F7F7F for int32 (as an indptr, a length far past any buffer). The output and the
float scratch start as NaN inside too, so an element left unwritten, or a partial read
before it is written, shows. The runner gets its output and scratch through KernelRunner's
`out` and `scratch` arguments.
Launches: for each format, every candidate launch_candidates offers on this GPU,
unforced and forced to each form that runs on this GPU (conftest.runnable_forms), so a form added later is
covered as soon as it is offered here (gfx950's hw_convert launches on an MI355X alone).
Inputs: the 8 benchmark shapes (bench/report.py, the harness's seeds) and the robustness
inputs of bench/robustness_gpu.py at its GPU sizes: ragged lengths, padded MXFP4 scales,
the five magnitudes, the five NaN / Inf placements.
After each call:
  - every fence byte, around inputs, output and scratch, is unchanged;
  - the output equals, bit for bit, the same launch's output on the same values in
    ordinary allocations (the kernels are deterministic; a read of poison changes it);
  - on the benchmark and ragged / padded inputs, every output element is finite and the
    output passes submission's Verifier. On the extreme inputs the forced e4m3 forms are
    refused by that verifier by design (robustness_gpu.py's REFUSED), so there only the
    two checks above are asserted.
The inputs' own bytes must be unchanged too (no kernel writes its inputs).
test_the_fences_catch_every_form_of_a_deliberately_wrong_kernel runs the same checks on
two deliberately wrong kernels (tools/mutants.py): compiled on a GPU, under the
interpreter on the CPU.
"""
import collections
import dataclasses
import os

import pytest
import torch

import reference
import submission as sub
from conftest import DEVICE, HAS_GPU, needs_gpu, runnable_forms
from interpreter_worker import InterpreterWorker
from tools.leaderboard import BENCHMARK_SHAPES, SEEDS
from tools.mutants import import_mutant

# The deliberately wrong kernels the fences must catch (tools/mutants.py).
MUTANTS = ("row_clamp_cut_by_one_row", "output_row_shifted_by_one")

FENCE_BYTES = 1 << 18  # each side: more than a 128-row tile of fp8 KV (72 KiB)
BF16_NAN = b"\xff\xff"
FP32_NAN = b"\xff\xff\xff\xff"
FP8_NAN = b"\xff"  # e4m3fn
E8M0_NAN = b"\xff"
E2M1_SIXES = b"\x77"
INT32_FAR = b"\x7f\x7f\x7f\x7f"


@dataclasses.dataclass
class Fenced:
    view: torch.Tensor     # what the kernels get
    buffer: torch.Tensor   # uint8: the whole allocation
    outside: torch.Tensor  # bool per byte of buffer: not one of the view's own bytes
    setup: torch.Tensor    # the buffer's bytes before the call
    read_only: bool        # an input: its own bytes may not change either

    def bytes_changed(self) -> int:
        changed = self.buffer != self.setup
        return int((changed if self.read_only else changed & self.outside).sum())


def fence(t: torch.Tensor, poison: bytes, read_only: bool = False) -> Fenced:
    """t's values in a view with t's shape and strides inside a poisoned allocation."""
    size = t.element_size()
    span = (sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1) * size if t.numel() else 0
    total = 2 * FENCE_BYTES + -(-span // 256) * 256
    buffer = torch.tensor(list(poison), dtype=torch.uint8, device=t.device).repeat(total // len(poison))
    geometry = ((*t.shape, size), (*(s * size for s in t.stride()), 1), FENCE_BYTES)  # the view's bytes
    raw = t.view(torch.uint8)
    buffer.as_strided(*geometry).copy_(raw.unsqueeze(-1) if size == 1 else raw.unflatten(-1, (t.shape[-1], size)))
    inside = torch.zeros_like(buffer)
    inside.as_strided(*geometry).fill_(1)
    view = buffer.view(t.dtype).as_strided(t.shape, t.stride(), FENCE_BYTES // size)
    return Fenced(view, buffer, inside == 0, buffer.clone(), read_only)


def fenced_input(data):
    """(data with every tensor re-homed inside a fence, name -> Fenced)."""
    q, kv_data, qo_indptr, kv_indptr, config = data
    (fp8, fp8_scale), (fp4, scales) = kv_data["fp8"], kv_data["mxfp4"]
    poisons = {"q": (q, BF16_NAN), "kv_bf16": (kv_data["bf16"], BF16_NAN), "kv_fp8": (fp8, FP8_NAN),
               "kv_fp8_scale": (fp8_scale, FP32_NAN), "kv_mxfp4": (fp4, E2M1_SIXES),
               "kv_mxfp4_scales": (scales, E8M0_NAN), "qo_indptr": (qo_indptr, INT32_FAR),
               "kv_indptr": (kv_indptr, INT32_FAR)}
    fences = {name: fence(t, poison, read_only=True) for name, (t, poison) in poisons.items()}
    views = {name: f.view for name, f in fences.items()}
    kv = {"bf16": views["kv_bf16"], "fp8": (views["kv_fp8"], views["kv_fp8_scale"]),
          "mxfp4": (views["kv_mxfp4"], views["kv_mxfp4_scales"])}
    return (views["q"], kv, views["qo_indptr"], views["kv_indptr"], config), fences


def fenced_scratch(batch: int, launch, device):
    """make_split_scratch's buffers re-homed inside fences: floats NaN inside (until the
    kernels write them), integers as made (the counters' zeros)."""
    plain = sub.make_split_scratch(batch, launch, device)
    fences = {}
    for field in dataclasses.fields(plain):
        t = getattr(plain, field.name)
        fences[f"scratch.{field.name}"] = (fence(t.fill_(float("nan")), FP32_NAN) if t.is_floating_point()
                                           else fence(t, INT32_FAR))
    return dataclasses.replace(plain, **{n.split(".")[1]: f.view for n, f in fences.items()}), fences


def fenced_call(module, fenced_data, fences: dict, kv_format: str, launch):
    """One call of `module`'s KernelRunner for `launch` on fenced_data (fenced_input's),
    its output and scratch fenced too: (output, every fence that changed)."""
    shape = module.CallShape.of(fenced_data)
    scratch, scratch_fences = fenced_scratch(shape.batch, launch, fenced_data[0].device)
    out = fence(torch.full((shape.total_q, 16, 512), float("nan"), dtype=torch.bfloat16,
                           device=fenced_data[0].device), BF16_NAN)
    module.KernelRunner(shape, kv_format, launch, scratch=scratch)(*fenced_data[:4], out=out.view)
    if out.view.device.type == "cuda":
        torch.cuda.synchronize()
    problems = [f"{changed} {'bytes of input' if f.read_only else 'fence bytes around'} {name} changed"
                for name, f in {**fences, **scratch_fences, "out": out}.items()
                if (changed := f.bytes_changed())]
    return out.view, problems


def offered_launches(kv_format: str, shape) -> list:
    """Every launch offered on this device for shape, unforced and forced to each form."""
    units, arch = sub.device_arch(shape.device)
    launches = []
    for form in ("",) + tuple(runnable_forms(kv_format)):
        for launch in sub.launch_candidates(kv_format, shape.batch, shape.max_kv_len, units, arch, form):
            if launch not in launches:
                launches.append(launch)
    return launches


# ------------------------------------------------------------------ inputs (on the GPU)
def benchmark_input(index: int):
    batch, kv_len = BENCHMARK_SHAPES[index]
    return reference.generate_input(batch, 1, kv_len, SEEDS[index])


def robustness_input(name: str):
    from tools.robustness import MAGNITUDES, NONFINITE, Sizes, ragged_input, with_nonfinite
    sizes = Sizes(smoke=False)
    if name == "ragged":
        return ragged_input(sizes.ragged, seed=11)
    if name == "padded_scales":
        return ragged_input(sizes.ragged, seed=14, ties="away", padded=True)
    kind, case = name.split("/")
    if kind == "magnitude":
        q_scale, kv_scale = MAGNITUDES[case]
        return ragged_input(sizes.small, seed=12, q_scale=q_scale, kv_scale=kv_scale)
    where, value, dim = NONFINITE[case]
    return with_nonfinite(ragged_input(sizes.small, seed=13), where, value, dim)


def _robustness_names():
    from tools.robustness import MAGNITUDES, NONFINITE
    return (["ragged", "padded_scales"] + [f"magnitude/{n}" for n in MAGNITUDES]
            + [f"nonfinite/{n}" for n in NONFINITE])


INPUTS = {f"benchmark/{b}x{n}": (lambda i=i: benchmark_input(i)) for i, (b, n) in enumerate(BENCHMARK_SHAPES)}
INPUTS.update({name: (lambda name=name: robustness_input(name)) for name in _robustness_names()})
EXTREME = ("magnitude/", "nonfinite/")


@needs_gpu
@pytest.mark.parametrize("input_name", INPUTS)
def test_every_offered_launch_stays_inside_its_fences(input_name, precompiled):
    data = INPUTS[input_name]()
    shape = sub.CallShape.of(data)
    verifier = sub.Verifier(data, shape)
    fenced_data, fences = fenced_input(data)
    judged = not input_name.startswith(EXTREME)
    failures, launches = [], collections.Counter()
    for kv_format in ("fp8", "mxfp4"):
        for launch in offered_launches(kv_format, shape):
            plain_runner = sub.KernelRunner(shape, kv_format, launch)
            launches[f"{kv_format}:{plain_runner.form}"] += 1
            out, problems = fenced_call(sub, fenced_data, fences, kv_format, launch)
            plain = plain_runner(*data[:4])
            if not torch.equal(out.view(torch.int16), plain.view(torch.int16)):
                problems.append("output differs from the same launch on ordinary allocations")
            if judged:
                if not bool(torch.isfinite(out).all()):
                    problems.append(f"{int((~torch.isfinite(out)).sum())} non-finite output elements")
                good, detail = verifier.check(kv_format, plain_runner.bound, out)
                if not good:
                    problems.append(f"verifier: {detail}")
            if problems:
                failures.append(f"{plain_runner.label}: " + "; ".join(problems))
    per_form = ", ".join(f"{form} {count}" for form, count in sorted(launches.items()))
    print(f"\n[{input_name}] {sum(launches.values())} launches fenced ({per_form}), {len(failures)} failed"
          f"{', verifier and finiteness judged' if judged else ''}")
    for failure in failures:
        print(f"[{input_name}] FAILED {failure[:300]}")
    assert launches
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------------ compiling ahead, in parallel
def _input_shapes() -> list:
    """(batch, longest sequence) of every input of INPUTS, without building them."""
    from tools.robustness import Sizes
    sizes = Sizes(smoke=False)
    return list(BENCHMARK_SHAPES) + [(len(sizes.ragged), max(sizes.ragged)), (len(sizes.small), max(sizes.small))]


def _compiling_launches(units: int, arch: str) -> list:
    """(format, launch) pairs that together compile every kernel INPUTS' launches use: a
    launch is kept when its decode kernel's compile-time choices, or its combine kernel's
    (the split count rounded up to a power of two), are new."""
    jobs, seen = [], set()
    for batch, longest in _input_shapes():
        for kv_format in ("fp8", "mxfp4"):
            for form in ("",) + tuple(runnable_forms(kv_format)):
                for launch in sub.launch_candidates(kv_format, batch, longest, units, arch, form):
                    separate_combine = launch.num_splits > 1 and not launch.combine_in_kernel
                    keys = {(kv_format, dataclasses.replace(launch, num_splits=min(launch.num_splits, 2))),
                            ("combine", 1 << (launch.num_splits - 1).bit_length() if separate_combine else 0)}
                    if not keys <= seen:
                        seen |= keys
                        jobs.append((kv_format, launch))
    return jobs


def _compile_in_a_process(job) -> str:
    """Runs in a spawned process: one call of the launch (or of the mutant's first launch
    of every form) on a small GPU input with the real inputs' strides, so that Triton's
    disk cache holds its kernels."""
    from tools.robustness import ragged_input
    kv_format, launch = job
    if kv_format == "mutant":
        _mutant_under_fences(*launch)
    else:
        data = ragged_input([40, 300], seed=0)
        sub.KernelRunner(sub.CallShape.of(data), kv_format, launch)(*data[:4])
    torch.cuda.synchronize()
    return kv_format


@pytest.fixture(scope="module")
def mutant_directory(tmp_path_factory):
    return str(tmp_path_factory.mktemp("mutant"))


@pytest.fixture(scope="module")
def precompiled(mutant_directory):
    """On a GPU: every kernel the tests below launch, compiled ahead by several processes
    at once (Triton compiles one kernel at a time in a process); the tests then load them
    from Triton's disk cache. Nothing on the CPU."""
    if not HAS_GPU:
        return
    import concurrent.futures
    import multiprocessing
    import time
    units, arch = sub.device_arch(DEVICE)
    jobs = [("mutant", (mutant_directory, "cuda", mutation)) for mutation in MUTANTS]
    jobs += _compiling_launches(units, arch)
    began = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(16, os.cpu_count() or 1),
                                                mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_compile_in_a_process, jobs))
    print(f"\n[precompiled] {len(jobs)} launches in {time.perf_counter() - began:.0f} s")


# ------------------------------------------------------------------ the fences can fail
def _mutant_under_fences(directory: str, device: str, mutation: str) -> dict:
    """Each form's first offered launch of the submission with the mutant `mutation`
    (tools/mutants.py) applied, fenced, on two sequences, the second ending at the KV buffer's last
    row and writing the output's last row: form -> what the checks found (empty: nothing)."""
    from tools.robustness import ragged_input
    mutant = import_mutant(mutation, directory, f"submission_{mutation}_fenced")
    # The MXFP4 Gluon form reads whole tiles and refuses a buffer of fewer than 128 rows.
    inputs = {lengths: ragged_input(list(lengths), seed=9, device=device) for lengths in ((33, 40), (33, 140))}
    units, arch = mutant.device_arch(mutant.CallShape.of(inputs[(33, 40)]).device)
    found = {}
    for kv_format in ("fp8", "mxfp4"):
        # every form that runs here: a Gluon form on a GPU where Gluon runs, never interpreted
        for form in (f.name for f in mutant.forms_of(kv_format)
                     if f.language != "gluon" or mutant.gluon_forms_here(arch, f)):
            data = inputs[(33, 140) if (kv_format, form) == ("mxfp4", "gluon") else (33, 40)]
            shape = mutant.CallShape.of(data)
            verifier = mutant.Verifier(data, shape)
            launch = mutant.launch_candidates(kv_format, shape.batch, shape.max_kv_len, units, arch, form)[0]
            out, problems = fenced_call(mutant, *fenced_input(data), kv_format, launch)
            if not bool(torch.isfinite(out).all()):
                problems.append(f"{int((~torch.isfinite(out)).sum())} non-finite output elements")
            good, detail = verifier.check(kv_format, mutant.kernel_form(kv_format, form).bound, out)
            if not good:
                problems.append(f"verifier: {detail}")
            found[f"{kv_format}:{form}"] = problems
    return found


_worker = InterpreterWorker()


@pytest.fixture(scope="module", autouse=True)
def _shutdown_worker():
    yield
    _worker.shutdown()


@pytest.mark.parametrize("mutation", MUTANTS)
def test_the_fences_catch_every_form_of_a_deliberately_wrong_kernel(mutation, mutant_directory,
                                                                   precompiled):
    """row_clamp_cut_by_one_row: the row one past a split's end is poison when the split
    ends at the buffer's end, and the output must fail the checks. output_row_shifted_by_one:
    the last output row lands in the output's fence. Compiled on a GPU, every form (for the
    row clamp, but the Hopper forms, which read through TMA and have none, and the MXFP4
    Gluon form, which has none either); on the CPU under the interpreter (the same
    fences, the same kernels' source), every form for the shifted output, the MXFP4 forms
    for the row clamp: the interpreter converts e4m3
    NaN (0x7F, 0xFF) to +-480, so fp8 poison weighted by a zero probability vanishes there
    (tests/test_memory_safety_interpreter.py catches those forms by address)."""
    if HAS_GPU:
        found = _mutant_under_fences(mutant_directory, str(DEVICE), mutation)
    else:
        found = _worker.run(_mutant_under_fences, mutant_directory, "cpu", mutation)
    assert set(found) == {f"{fmt}:{form}" for fmt in ("fp8", "mxfp4") for form in runnable_forms(fmt)}
    interpreted_fp8_misses = not HAS_GPU and mutation == "row_clamp_cut_by_one_row"
    # The Hopper forms read the KV through TMA descriptors of the buffer's own shape: a row past
    # it comes back as zeros, never the fence's poison, and they have no row clamp for this
    # mutant to cut (compute-sanitizer's memcheck watches their accesses: bench/h200_session.sh hopper).
    tma_forms = {f"{fmt}:{f.name}" for fmt in ("fp8", "mxfp4") for f in sub.forms_of(fmt) if f.gluon_arch == "hopper"}
    # The MXFP4 Gluon form has no row clamp for this mutant to cut: it moves a tile back inside
    # the buffer instead, reads no scale byte of a row outside the tile and scores it -inf, so
    # a row read past the end never reaches a value; the gfx950 emulator sees such a read by
    # its address (tests/test_gfx950_emulator.py's mxfp4_tile_bound_one_row_too_far).
    unseen_by_values = tma_forms | {"mxfp4:gluon"}
    expected = {form for form in found if not (interpreted_fp8_misses and form.startswith("fp8:"))
                and not (mutation == "row_clamp_cut_by_one_row" and form in unseen_by_values)}
    missed = [form for form in expected if not found[form]]
    assert not missed, f"{mutation} went unseen in {missed}"
    if mutation == "output_row_shifted_by_one":  # the fence itself, not only the values
        assert all(any("fence bytes around out changed" in p for p in found[form]) for form in found), found
    print("\n" + "\n".join(f"[{mutation} {form}] {'; '.join(problems)[:300] or 'nothing found'}"
                            for form, problems in found.items()))
