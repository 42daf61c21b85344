"""The autopick's verifier rejects what the leaderboard's lenient rule lets through, and
accepts every real route.

With unit-randn inputs the rule (rtol = atol = 0.1, 5% of elements may miss) passes an
all-zeros output at kv 8192 and a halved one at every length. The verifier also bounds
each candidate's error against exact attention over the KV format it reads, relative to
the output's own scale, its runner's own bound (its form record's, derived by
bench/error_bounds.py from bench/verify_errors.py's runs, else its format's:
submission.bound_of). Here:
- wrong candidates injected as extra routes (zeros, the right output x 0.5 and x 1.5,
  heads rolled by one, two sequences swapped, one row NaN), over each KV format, at kv
  1024 and 8192, are rejected with a message naming the bound they fail;
- every real route passes on those inputs: torch (through the autopick), both Triton
  routes under the interpreter on the CPU (every launch candidate at 1024, the default at
  8192: the interpreter takes 5-25 s a call there) and, on a GPU, compiled (every launch
  candidate of every kernel form that can run there, at both lengths), aiter through
  tools/fake_aiter.py (on the CPU, where the fake computes);
- where a real route misses a bound on a valid input (a8w8's per-tensor fp8 Q with q and
  KV of 1e15: the scores are so peaked that its rounding picks other tokens), the plan
  falls back to a route that passes.
"""
import os
import subprocess
import sys

import pytest
import torch

import reference
import submission
from conftest import DEVICE, REPO_ROOT, needs_gpu, runnable_forms
from interpreter_worker import InterpreterWorker
from tools.fake_aiter import FakeAiter
from tools.robustness import SCALED_OUTPUT_BOUND, ragged_input

pytestmark = pytest.mark.usefixtures("fresh_plans")

KV_LENGTHS = (1024, 8192)
# The fast tier runs a route's verification at the shorter length
FAST_KV_LENGTHS = (pytest.param(1024, marks=pytest.mark.fast), 8192)
BATCH = 2
SEEDS = {1024: 31, 8192: 32}   # bench/verify_errors.py measures the same inputs (TEST_SHAPES)
SEQUENCE_BOUND = "sequence relative RMS error"
NONFINITE_BOUND = "non-finite elements"


def verification_input(kv_len: int, device=None):
    """On the device under test unless told."""
    return reference.generate_input(BATCH, 1, kv_len, SEEDS[kv_len], device=device)


def one_row_nan(out):
    out = out.clone()
    out[1, 5] = float("nan")
    return out


def two_sequences_swapped(out):
    return out[torch.tensor([1, 0] + list(range(2, out.shape[0])))]


# name: (how the right output is made wrong, the bound whose name the rejection carries)
WRONG = {
    "zeros": (torch.zeros_like, SEQUENCE_BOUND),
    "half": (lambda out: (out.float() * 0.5).bfloat16(), SEQUENCE_BOUND),
    "one_and_a_half": (lambda out: (out.float() * 1.5).bfloat16(), SEQUENCE_BOUND),
    "heads_rolled": (lambda out: out.roll(1, dims=1), SEQUENCE_BOUND),
    "sequences_swapped": (two_sequences_swapped, SEQUENCE_BOUND),
    "one_row_nan": (one_row_nan, NONFINITE_BOUND),
}


class WrongRunner:
    def __init__(self, name, shape, kv_format):
        self.label = f"wrong_{name}"
        self.kv_format = kv_format
        self.form = kv_format
        self.bound = submission.error_bound(kv_format, "torch")  # the torch route's output, spoiled: its bound
        self.right = submission.TorchRunner(shape, kv_format)
        self.spoil = WRONG[name][0]

    def __call__(self, *args):
        return self.spoil(self.right(*args))


class WrongRoute:
    forms = ()

    def __init__(self, name, kv_format):
        self.name = f"wrong_{name}"
        self.wrong, self.kv_format = name, kv_format

    def unavailable_reason(self, device, form=""):
        return None

    def variants(self, shape, form=""):
        return [submission.Candidate(self.name, "", self.name,
                                     lambda data: WrongRunner(self.wrong, shape, self.kv_format))]


def plan_report(data) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in submission._plan_for(data).report)


@pytest.mark.parametrize("kv_format", ["bf16", "fp8", "mxfp4"])
@pytest.mark.parametrize("kv_len", KV_LENGTHS)
def test_wrong_candidates_are_rejected_naming_the_bound(monkeypatch, kv_len, kv_format):
    routes = {"torch": submission.TorchRoute()}
    routes.update({f"wrong_{name}": WrongRoute(name, kv_format) for name in WRONG})
    monkeypatch.setattr(submission, "ROUTES", routes)
    data = verification_input(kv_len)
    out = submission.custom_kernel(data)
    report = plan_report(data)
    assert submission.describe_route(data) == "torch[bf16]"
    assert report["torch[bf16]"].split(" ")[2] == "ok", report["torch[bf16]"]
    for name, (_, bound) in WRONG.items():
        verdict = report[f"wrong_{name}"]
        assert verdict.startswith("REJECTED") and bound in verdict, f"{name}: {verdict}"
    torch.testing.assert_close(out, submission.TorchRunner(submission.CallShape.of(data), "bf16")(*data[:4]))


def test_the_lenient_rule_alone_would_pass_zeros_and_halves():
    """Why the bounds exist: the check rule's verdict on the injected outputs at kv 8192."""
    data = verification_input(8192)
    right = submission.TorchRunner(submission.CallShape.of(data), "bf16")(*data[:4])
    verifier = submission.Verifier(data, submission.CallShape.of(data))
    for name in ("zeros", "half"):
        spoiled = WRONG[name][0](right)
        assert submission.rule_mismatch(spoiled, verifier.rule_expected) <= submission.CHECK_MISMATCH_ALLOWANCE
        good, detail = verifier.check("bf16", submission.error_bound("bf16", "torch"), spoiled)
        assert not good and "check rule" not in detail and SEQUENCE_BOUND in detail, detail


def test_two_of_256_sequences_swapped_is_rejected_where_a_global_error_would_not_be():
    data = ragged_input([64] * 256, seed=40)
    shape = submission.CallShape.of(data)
    right = submission.TorchRunner(shape, "bf16")(*data[:4])
    swapped = right.clone()
    swapped[[7, 200]] = right[[200, 7]]
    exact = submission.Verifier(data, shape).exact("bf16")
    global_error = float((swapped.float() - exact).norm() / exact.norm())
    assert global_error < 0.15  # 2 of 256 sequences: about 12% globally
    good, detail = submission.Verifier(data, shape).check("bf16", submission.error_bound("bf16", "torch"), swapped)
    assert not good and SEQUENCE_BOUND in detail and ("sequence 7)" in detail or "sequence 200)" in detail), detail


def test_output_errors_of_empty_sequences_and_matching_nan():
    data = ragged_input([0, 5, 0], seed=41)
    exact = submission.TorchRunner(submission.CallShape.of(data), "bf16").exact(*data[:4])
    assert submission.output_errors(exact, exact, data[2])["sequence_rms"] == 0.0
    spoiled = exact.clone()
    spoiled[0, 0, 0] = 1e-3  # a sequence without tokens must give zeros
    errors = submission.output_errors(spoiled, exact, data[2])
    assert errors["sequence_rms"] == float("inf") and errors["worst_sequence"] == 0
    both_nan = exact.clone()
    both_nan[1, 2] = float("nan")
    assert submission.output_errors(both_nan, both_nan, data[2])["nonfinite"] == 0
    assert submission.output_errors(both_nan, exact, data[2])["nonfinite"] == 512


# ------------------------------------------------------------------------------------
# Real routes pass on the same inputs
# ------------------------------------------------------------------------------------
def verify_triton(data, launches_per_format: dict) -> list[tuple]:
    """(label, passed, detail) of each Triton launch on data, judged by the verifier and by
    SCALED_OUTPUT_BOUND against exact attention (tighter than some forms' verifier bounds:
    a form's output scaled by 0.9 must fail here)."""
    shape = submission.CallShape.of(data)
    verifier = submission.Verifier(data, shape)
    verdicts = []
    for kv_format, launches in launches_per_format.items():
        for launch in launches:
            runner = submission.KernelRunner(shape, kv_format, launch)
            out = runner(*data[:4])
            good, detail = verifier.check(kv_format, runner.bound, out)
            sequence_rms = submission.output_errors(out, verifier.exact(kv_format), data[2])["sequence_rms"]
            if not sequence_rms <= SCALED_OUTPUT_BOUND:
                good, detail = False, f"{detail}; sequence relative RMS error {sequence_rms:.3g} > {SCALED_OUTPUT_BOUND}"
            verdicts.append((runner.label, good, detail))
    return verdicts


def verify_triton_in_worker(kv_len: int, all_launches: bool) -> list[tuple]:
    """Runs in a worker with TRITON_INTERPRET=1, on CPU inputs: the Triton launch
    candidates on verification_input(kv_len) (all, or each format's first)."""
    assert os.environ.get("TRITON_INTERPRET") == "1"
    data = verification_input(kv_len, device="cpu")
    launches = {kv_format: submission.launch_candidates(kv_format, BATCH, kv_len, 1, "")
                for kv_format in ("fp8", "mxfp4")}
    return verify_triton(data, {fmt: found if all_launches else found[:1] for fmt, found in launches.items()})


@pytest.fixture(scope="module")
def interpreter_worker():
    """A spawned process with TRITON_INTERPRET=1 (Triton reads it when first imported)."""
    worker = InterpreterWorker()
    yield worker
    worker.shutdown()


@pytest.mark.parametrize("kv_len", FAST_KV_LENGTHS)
def test_triton_routes_pass_under_the_interpreter(interpreter_worker, kv_len):
    verdicts = interpreter_worker.run(verify_triton_in_worker, kv_len, kv_len == 1024)
    labels = {label.split("[")[0] for label, _, _ in verdicts}
    assert labels == {"triton_fp8", "triton_mxfp4"}
    failed = [(label, detail) for label, good, detail in verdicts if not good]
    assert not failed, failed


@needs_gpu
@pytest.mark.parametrize("kv_len", KV_LENGTHS)
def test_triton_routes_pass_compiled_on_the_gpu(kv_len):
    """Every launch candidate of every kernel form this GPU can run (each form forced, as
    MLA_ROUTE=<route>:<form> offers it), compiled, on the same inputs."""
    num_sms, arch = submission.device_arch(DEVICE)
    data = verification_input(kv_len)
    launches = {fmt: [launch for form in runnable_forms(fmt) for launch in
                      submission.launch_candidates(fmt, BATCH, kv_len, num_sms, arch, form)]
                for fmt in ("fp8", "mxfp4")}
    verdicts = verify_triton(data, launches)
    forms = {label.split("form=")[1].split(",")[0] for label, _, _ in verdicts}
    assert forms == {form for fmt in launches for form in runnable_forms(fmt)}, forms
    failed = [(label, detail) for label, good, detail in verdicts if not good]
    assert not failed, failed


@pytest.fixture
def fake_aiter(monkeypatch):
    fake = FakeAiter()
    monkeypatch.setattr(submission, "aiter_ops", fake)
    monkeypatch.setattr(submission, "_aiter_device", lambda device: True)
    monkeypatch.setattr(submission, "device_arch", lambda device: (1, submission.arch_record(fake.gfx)))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the fake's many small ops are much slower with spinning threads
    yield fake
    torch.set_num_threads(threads)


@pytest.mark.parametrize("kv_len", FAST_KV_LENGTHS)
def test_aiter_candidates_pass_through_the_fake(fake_aiter, kv_len):
    data = verification_input(kv_len, device="cpu")
    shape = submission.CallShape.of(data)
    verifier = submission.Verifier(data, shape)
    candidates = submission.AiterRoute().variants(shape)
    assert len(candidates) == 2 * len(submission.AITER_KV_SPLIT_CANDIDATES) * len(submission.AITER_RUNNERS)
    for candidate in candidates:
        runner = candidate.build(data)
        assert runner.label == candidate.label
        good, detail = verifier.check(runner.kv_format, runner.bound, runner(*data[:4]))
        assert good, f"{runner.label}: {detail}"


def test_a_route_that_misses_a_bound_on_a_valid_input_falls_back(fake_aiter):
    """q and KV of 1e15: the scores are so peaked that a8w8's fp8 Q picks other tokens
    (bench/verify_errors.py: 50% error); a16w8 and torch stay exact enough."""
    data = ragged_input([300, 300], seed=42, q_scale=1e15, kv_scale=1e15, device="cpu")
    out = submission.custom_kernel(data)
    report = plan_report(data)
    a8w8 = {label: verdict for label, verdict in report.items() if label.startswith("aiter_a8w8")}
    assert a8w8 and all(v.startswith("REJECTED") and SEQUENCE_BOUND in v for v in a8w8.values()), a8w8
    chosen = submission._plan_for(data).run
    assert not chosen.label.startswith("aiter_a8w8")
    exact = submission.TorchRunner(submission.CallShape.of(data), chosen.kv_format).exact(*data[:4])
    errors = submission.output_errors(out, exact, data[2])
    assert errors["sequence_rms"] <= chosen.bound[0].sequence_rms, errors


@pytest.mark.parametrize("rule", ["current", "2e-2", "1e-2"])
def test_the_verifier_applies_the_check_rule_that_reference_applies(rule):
    code = ("import reference, submission; print(reference.CHECK_RTOL == submission.CHECK_RTOL, "
            "reference.CHECK_ATOL == submission.CHECK_ATOL, "
            "reference.CHECK_MISMATCH_ALLOWANCE == submission.CHECK_MISMATCH_ALLOWANCE)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLA_")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                          env=dict(env, MLA_CHECK_RULE=rule), timeout=120)
    assert proc.stdout.split() == ["True"] * 3, proc.stderr[-2000:]
