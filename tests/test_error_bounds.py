"""The verifier's error bounds, each held by its record (a KernelForm's error_bound, the torch
route's per format, aiter's a8w8): each is what bench/error_bounds.py derives from the
committed measurements, every computation a runner can do is either measured or falls back
to its format's bound by name, and each bound's rejections are what the README states (host
logic: CPU tensors)."""
import pytest
import torch

import submission
from bench import error_bounds
from reference import generate_input

pytestmark = pytest.mark.fast

# Forms that bench/verify_errors.py's committed runs have not measured, judged by their
# format's bound, and why they cannot be measured here.
UNMEASURED_FORMS = {
    ("fp8", "a16w8"): "aiter's assembly decode with a bf16 Q: it runs only on an MI355X with ROCm's aiter (never on "
                      "a CPU or the H200), and no model of its rounding exists outside its binary",
}


def test_form_bounds_are_the_ones_derived_from_the_committed_measurements():
    derived = error_bounds.measured_bounds()
    assert {key: (entry["sequence_rms"], entry["element"]) for key, entry in derived.items()} == {
        key: (bound.sequence_rms, bound.element) for key, bound in submission.measured_error_bounds().items()}


def test_every_form_a_runner_can_have_is_measured_or_named_unmeasured():
    forms = {(form.kv_format, form.name) for form in submission.KERNEL_FORMS}
    forms |= {(fmt, "torch") for fmt in submission.TorchRoute.forms}
    forms |= {("fp8", "a8w8"), ("fp8", "a16w8")}
    unmeasured = forms - set(submission.measured_error_bounds())
    assert unmeasured <= set(UNMEASURED_FORMS), f"forms with neither a measured bound nor a listing here: {unmeasured}"
    assert not set(UNMEASURED_FORMS) & set(submission.measured_error_bounds())
    assert all(UNMEASURED_FORMS.values())


def test_what_the_h200_measured_of_the_hopper_forms_lies_inside_their_model_derived_bounds():
    bounds = {key: vars(bound) for key, bound in submission.measured_error_bounds().items()}
    checked = error_bounds.device_check(bounds)
    assert set(checked) == {("fp8", "hopper_two_term"), ("fp8", "hopper_one_term"), ("mxfp4", "hopper")}
    for key, entry in checked.items():
        assert entry["cases"] >= 3 and all(share < 1 for share in entry["fraction_of_bound"].values()), (key, entry)


def test_an_unmeasured_form_is_judged_by_its_formats_bound_and_says_so():
    bound, name = submission.error_bound("fp8", "a16w8")
    assert bound == submission.FORMAT_ERROR_BOUNDS["fp8"]
    assert "fp8 format bound" in name and "'a16w8' has no measured bound" in name
    measured, name = submission.error_bound("fp8", "f16")
    assert measured == submission.kernel_form("fp8", "f16").error_bound and name == "fp8 f16 bound"
    assert submission.kernel_form("fp8", "f16").bound == (measured, name)


@pytest.fixture(scope="module")
def verifier():
    data = generate_input(2, 1, 256, 77, device="cpu")
    return submission.Verifier(data, submission.CallShape.of(data))


def test_the_verifier_names_the_bound_it_applied(verifier):
    exact = verifier.exact("fp8").to(torch.bfloat16)
    good, detail = verifier.check("fp8", submission.error_bound("fp8", "a16w8"), exact)
    assert good and "form 'a16w8' has no measured bound" in detail, detail
    good, detail = verifier.check("fp8", submission.kernel_form("fp8", "f16").bound, (exact.float() * 0.9).bfloat16())
    assert not good and "fp8 f16 bound" in detail, detail


@pytest.mark.parametrize("key", sorted(submission.measured_error_bounds()))
def test_each_form_bound_rejects_scaled_outputs(verifier, key):
    """An output s x exact has sequence error |1 - s|: every form's bound rejects s at twice
    its sequence bound away from 1, x0.5 and x1.5 among them; the forms exact but for their
    last rounding reject x0.95 and x1.05 (bench/error_bounds.py: the smallest rejected
    scaling of each bound on the benchmark inputs)."""
    kv_format, form = key
    bound, name = submission.error_bound(*key)
    assert bound.sequence_rms < 0.25
    if form in ("torch", "f16", "bf16"):
        assert bound.sequence_rms < 0.05
    exact = verifier.exact(kv_format).to(torch.bfloat16)
    assert verifier.check(kv_format, (bound, name), exact)[0]
    for scale in (1 - 2 * bound.sequence_rms, 1 + 2 * bound.sequence_rms):
        good, detail = verifier.check(kv_format, (bound, name), (exact.float() * scale).bfloat16())
        assert not good and "sequence relative RMS error" in detail, (scale, detail)


def test_round_up_keeps_two_significant_digits():
    assert [error_bounds.round_up(v) for v in (0.0051766, 0.054, 0.10780, 0.7476, 0.0)] == [0.0052, 0.054, 0.11,
                                                                                           0.75, 0.0]
