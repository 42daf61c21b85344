"""Issue 22, item 2: on a GPU, every compiled decode form and launch candidate reads only
its own inputs and writes only its output and scratch, shown with poison around them.

Fences: every tensor a decode call touches (q, the bf16 / fp8 / MXFP4 KV buffers, the fp8
scale, the MXFP4 scales, qo_indptr, kv_indptr, the output and each scratch tensor) is a
view inside a larger allocation, FENCE_BYTES of poison on each side (and in the gaps of a
strided view): NaN codes for bf16 (0xFFFF), fp8 e4m3fn (0xFF) and float32 (0xFFFFFFFF);
0xFF for e8m0 scales (NaN); 0x77 for e2m1 codes (6.0 twice, the largest: e2m1 has no NaN);
0x7F7F7F7F for int32 (as an indptr, a length far past any buffer). The output and the
float scratch start as NaN inside too, so an element left unwritten, or a partial read
before it is written, shows. The runner gets its output and scratch through TritonRunner's
`out` and `scratch` arguments.
Launches: for each format, every candidate triton_launch_candidates offers on this GPU,
unforced and forced to each form of submission.KERNEL_FORMS, so a form added later is
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
test_the_fences_catch_every_form_with_its_row_clamp_cut_by_one_row runs the same check on
a deliberately wrong kernel (tests/kernel_mutants.py): compiled on a GPU, under the
interpreter on the CPU.
"""
import dataclasses
import os

import pytest
import torch

import reference
import submission as sub
from bench.report import BENCHMARK_SHAPES, SEEDS
from conftest import DEVICE, HAS_GPU, needs_gpu
from interpreter_worker import InterpreterWorker
from kernel_mutants import ROW_CLAMP_REMOVED, load_mutant

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

    def fence_bytes_changed(self) -> int:
        return int(((self.buffer != self.setup) & self.outside).sum())


def fence(t: torch.Tensor, poison: bytes) -> Fenced:
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
    return Fenced(view, buffer, inside == 0, buffer.clone())


def fenced_input(data):
    """(data with every tensor re-homed inside a fence, name -> Fenced)."""
    q, kv_data, qo_indptr, kv_indptr, config = data
    (fp8, fp8_scale), (fp4, scales) = kv_data["fp8"], kv_data["mxfp4"]
    fences = {"q": fence(q, BF16_NAN), "kv_bf16": fence(kv_data["bf16"], BF16_NAN),
              "kv_fp8": fence(fp8, FP8_NAN), "kv_fp8_scale": fence(fp8_scale, FP32_NAN),
              "kv_mxfp4": fence(fp4, E2M1_SIXES), "kv_mxfp4_scales": fence(scales, E8M0_NAN),
              "qo_indptr": fence(qo_indptr, INT32_FAR), "kv_indptr": fence(kv_indptr, INT32_FAR)}
    views = {name: f.view for name, f in fences.items()}
    kv = {"bf16": views["kv_bf16"], "fp8": (views["kv_fp8"], views["kv_fp8_scale"]),
          "mxfp4": (views["kv_mxfp4"], views["kv_mxfp4_scales"])}
    return (views["q"], kv, views["qo_indptr"], views["kv_indptr"], config), fences


def fenced_scratch(batch: int, launch, device):
    """make_triton_scratch's buffers re-homed inside fences: floats NaN inside (until the
    kernels write them), integers as made (the counters' zeros)."""
    plain = sub.make_triton_scratch(batch, launch, device)
    fences = {}
    for field in dataclasses.fields(plain):
        t = getattr(plain, field.name)
        fences[f"scratch.{field.name}"] = (fence(t.fill_(float("nan")), FP32_NAN) if t.is_floating_point()
                                           else fence(t, INT32_FAR))
    return dataclasses.replace(plain, **{n.split(".")[1]: f.view for n, f in fences.items()}), fences


def fenced_call(module, data, kv_format: str, launch):
    """One call of `module`'s TritonRunner for `launch` on data, inputs, output and scratch
    fenced: (output, fence problems)."""
    fenced_data, fences = fenced_input(data)
    shape = module.CallShape(fenced_data)
    scratch, scratch_fences = fenced_scratch(shape.batch, launch, fenced_data[0].device)
    out = fence(torch.full((shape.total_q, 16, 512), float("nan"), dtype=torch.bfloat16,
                           device=fenced_data[0].device), BF16_NAN)
    module.TritonRunner(shape, kv_format, launch, scratch=scratch)(*fenced_data[:4], out=out.view)
    if out.view.device.type == "cuda":
        torch.cuda.synchronize()
    problems = [f"{changed} fence bytes around {name} changed"
                for name, f in {**fences, **scratch_fences, "out": out}.items()
                if (changed := f.fence_bytes_changed())]
    return out.view, problems


def offered_launches(kv_format: str, shape) -> list:
    """Every launch offered on this device for shape, unforced and forced to each form."""
    units, arch = sub._device_sms_and_arch(shape.device)
    launches = []
    for form in ("",) + sub.KERNEL_FORMS[kv_format]:
        for launch in sub.triton_launch_candidates(kv_format, shape.batch, shape.max_kv_len, units, arch, form):
            if launch not in launches:
                launches.append(launch)
    return launches


# ------------------------------------------------------------------ inputs (on the GPU)
def benchmark_input(index: int):
    batch, kv_len = BENCHMARK_SHAPES[index]
    return reference.generate_input(batch, 1, kv_len, SEEDS[index])


def robustness_input(name: str):
    from bench.robustness_gpu import MAGNITUDES, NONFINITE, Sizes, ragged_input, with_nonfinite
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
    from bench.robustness_gpu import MAGNITUDES, NONFINITE
    return (["ragged", "padded_scales"] + [f"magnitude/{n}" for n in MAGNITUDES]
            + [f"nonfinite/{n}" for n in NONFINITE])


INPUTS = {f"benchmark/{b}x{n}": (lambda i=i: benchmark_input(i)) for i, (b, n) in enumerate(BENCHMARK_SHAPES)}
INPUTS.update({name: (lambda name=name: robustness_input(name)) for name in _robustness_names()})
EXTREME = ("magnitude/", "nonfinite/")


@needs_gpu
@pytest.mark.parametrize("input_name", INPUTS)
def test_every_offered_launch_stays_inside_its_fences(input_name):
    data = INPUTS[input_name]()
    shape = sub.CallShape(data)
    verifier = sub.Verifier(data, shape)
    judged = not input_name.startswith(EXTREME)
    failures, launches = [], 0
    for kv_format in ("fp8", "mxfp4"):
        for launch in offered_launches(kv_format, shape):
            launches += 1
            plain_runner = sub.TritonRunner(shape, kv_format, launch)
            out, problems = fenced_call(sub, data, kv_format, launch)
            plain = plain_runner(*data[:4])
            if not torch.equal(out.view(torch.int16), plain.view(torch.int16)):
                problems.append("output differs from the same launch on ordinary allocations")
            if judged:
                if not bool(torch.isfinite(out).all()):
                    problems.append(f"{int((~torch.isfinite(out)).sum())} non-finite output elements")
                good, detail = verifier.check(kv_format, out)
                if not good:
                    problems.append(f"verifier: {detail}")
            if problems:
                failures.append(f"{plain_runner.label}: " + "; ".join(problems))
    print(f"\n[{input_name}] {launches} launches fenced, {len(failures)} failed"
          f"{', verifier and finiteness judged' if judged else ''}")
    assert launches > 0
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------------ the fences can fail
def _mutant_under_fences(directory: str, device: str) -> dict:
    """Each form's first offered launch of the submission with its row clamps cut by one
    row (tests/kernel_mutants.py), fenced, on two sequences, the second ending at the KV
    buffer's last row: form -> what the checks found (empty when nothing)."""
    from bench.robustness_gpu import ragged_input
    mutant = load_mutant(directory, "submission_row_clamp_removed_gpu", ROW_CLAMP_REMOVED)
    data = ragged_input([33, 40], seed=9, device=device)
    shape = mutant.CallShape(data)
    verifier = mutant.Verifier(data, shape)
    units, arch = mutant._device_sms_and_arch(shape.device)
    found = {}
    for kv_format, forms in mutant.KERNEL_FORMS.items():
        for form in forms:
            launch = mutant.triton_launch_candidates(kv_format, shape.batch, shape.max_kv_len, units, arch, form)[0]
            out, problems = fenced_call(mutant, data, kv_format, launch)
            if not bool(torch.isfinite(out).all()):
                problems.append(f"{int((~torch.isfinite(out)).sum())} non-finite output elements")
            good, detail = verifier.check(kv_format, out)
            if not good:
                problems.append(f"verifier: {detail}")
            found[f"{kv_format}:{form}"] = problems
    return found


_worker = InterpreterWorker()


@pytest.fixture(scope="module", autouse=True)
def _shutdown_worker():
    yield
    _worker.shutdown()


def test_the_fences_catch_every_form_with_its_row_clamp_cut_by_one_row(tmp_path):
    """The row one past a split's end is poison when the split ends at the buffer's end:
    the mutant's output must fail the checks. Compiled on a GPU, every form; on the CPU
    under the interpreter (the same fences, the same kernels' source), the MXFP4 forms:
    the interpreter converts e4m3 NaN (0x7F, 0xFF) to +-480, so fp8 poison weighted by
    a zero probability vanishes there (the interpreter's address check catches those
    forms: tests/test_memory_safety_interpreter.py)."""
    if HAS_GPU:
        found = _mutant_under_fences(str(tmp_path), str(DEVICE))
    else:
        found = _worker.run(_mutant_under_fences, str(tmp_path), "cpu")
    assert set(found) == {f"{fmt}:{form}" for fmt, forms in sub.KERNEL_FORMS.items() for form in forms}
    expected = set(found) if HAS_GPU else {form for form in found if form.startswith("mxfp4:")}
    missed = [form for form in expected if not found[form]]
    assert not missed, f"reading one row past a split's end went unseen in {missed}"
    print("\n" + "\n".join(f"[{form}] {'; '.join(problems)[:300] or 'nothing found'}" for form, problems in found.items()))
