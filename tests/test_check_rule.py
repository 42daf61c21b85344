"""utils.match_reference: elementwise atol + rtol*|ref|, and for MLA inputs up to 5% of
the elements may miss (a pass with a warning), as upstream's current check."""
import math

import pytest
import torch

import utils

pytestmark = pytest.mark.fast

MLA_CONFIG = {"num_heads": 16, "num_kv_heads": 1, "qk_head_dim": 576, "kv_lora_rank": 512,
              "qk_rope_head_dim": 64, "v_head_dim": 512}
MLA_DATA = (None, None, None, None, MLA_CONFIG)
ELEMENTS = 10_000
EXPECTED = torch.linspace(-2, 2, ELEMENTS).to(torch.bfloat16).view(100, 100)


def check(output, data=MLA_DATA, rtol=0.1, atol=0.1, expected=EXPECTED):
    return utils.match_reference(data, output, lambda _: expected, rtol=rtol, atol=atol)


def with_misses(count: int, value=None) -> torch.Tensor:
    """EXPECTED with `count` elements made wrong (off by 1.0, or set to `value`)."""
    output = EXPECTED.clone().view(-1)
    wrong = torch.randperm(ELEMENTS, generator=torch.Generator().manual_seed(count))[:count]
    output[wrong] = (output[wrong] + 1.0) if value is None else value
    return output.view(EXPECTED.shape)


def test_identical_output_passes_with_its_max_error():
    assert check(EXPECTED.clone()) == (True, "Maximum error: 0")
    expected = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    output = torch.tensor([1.0625, 2.0], dtype=torch.bfloat16)
    assert check(output, expected=expected) == (True, "Maximum error: 0.0625")


@pytest.mark.parametrize("misses, passes", [(490, True), (500, True), (510, False)])
def test_mismatch_allowance_is_five_percent(misses, passes):
    good, message = check(with_misses(misses))
    assert good is passes
    if passes:
        assert message.startswith("warning: mismatch_ratio=0.0")
    else:
        assert "mismatch_ratio=0.051" in message and "Number of mismatched elements: 510" in message


def test_no_allowance_outside_mla_inputs():
    good, _ = check(with_misses(1), data=(torch.zeros(1),))
    assert not good


def test_shape_mismatch_fails():
    good, message = check(EXPECTED[:, :99].clone())
    assert not good and "SIZE MISMATCH" in message


def test_tolerance_is_atol_plus_rtol_times_reference():
    expected = torch.full((4,), 2.0, dtype=torch.bfloat16)
    # Allowed |diff| at 2.0: 0.1 + 0.1 * 2 = 0.3.
    inside = torch.tensor([2.25, 1.75, 2.296875, 2.0], dtype=torch.bfloat16)
    outside = torch.tensor([2.3125, 2.0, 2.0, 2.0], dtype=torch.bfloat16)
    no_allowance = (torch.zeros(1),)
    assert check(inside, data=no_allowance, expected=expected)[0]
    assert not check(outside, data=no_allowance, expected=expected)[0]
    assert not check(inside, data=no_allowance, expected=expected, rtol=2e-2, atol=2e-2)[0]


def test_nan_where_reference_is_finite_is_a_mismatch():
    good, message = check(with_misses(510, value=float("nan")))
    assert not good and "mismatch_ratio=0.051" in message
    assert not check(torch.full_like(EXPECTED, float("nan")))[0]
    # Counted like any other miss: a few NaNs stay within the allowance (upstream's rule).
    assert check(with_misses(3, value=float("nan")))[1].startswith("warning")


def test_inf_where_reference_is_finite_is_a_mismatch():
    assert not check(with_misses(600, value=float("inf")))[0]


def test_nan_in_both_at_the_same_place_matches():
    expected = EXPECTED.clone()
    expected.view(-1)[:700] = float("nan")
    assert check(expected.clone(), expected=expected) == (True, "Maximum error: 0")


def test_mismatch_stats():
    fraction, max_err = utils.mismatch_stats(with_misses(250), EXPECTED, 0.1, 0.1)
    assert fraction == pytest.approx(0.025) and max_err == pytest.approx(1.0, abs=0.02)
    assert utils.mismatch_stats(EXPECTED, EXPECTED, 0.1, 0.1) == (0.0, 0.0)
    fraction, max_err = utils.mismatch_stats(with_misses(1, float("nan")), EXPECTED, 0.1, 0.1)
    assert fraction == pytest.approx(1e-4) and math.isinf(max_err)


def test_verbose_helpers():
    good, lines = utils.verbose_allclose(with_misses(7), EXPECTED, rtol=0.1, atol=0.1)
    assert not good and lines[0] == "Number of mismatched elements: 7" and len(lines) == 7
    assert utils.verbose_allequal(EXPECTED, EXPECTED.clone()) == (True, [])
    assert not utils.verbose_allequal(with_misses(1), EXPECTED)[0]


def test_make_match_reference_binds_the_rule():
    check_rule = utils.make_match_reference(lambda _: EXPECTED, rtol=0.1, atol=0.1,
                                            mismatch_allowance=0.01)
    assert check_rule(MLA_DATA, with_misses(90))[0]
    assert not check_rule(MLA_DATA, with_misses(110))[0]


def test_reference_states_the_default_allowance():
    """reference.py leaves the allowance to match_reference's default (so that it also runs
    beside upstream's utils.py) and exports it: the two must agree."""
    import inspect
    import reference
    default = inspect.signature(utils.match_reference).parameters["mismatch_allowance"].default
    assert default == reference.CHECK_MISMATCH_ALLOWANCE == 0.05
