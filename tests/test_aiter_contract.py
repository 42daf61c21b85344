"""Every aiter call in our code binds to aiter's real API (March 2026 source).

aiter cannot be imported here (ROCm only), so the API comes from data files that
tools/extract_aiter_api.py wrote from aiter's source (tools/aiter_api/*.json), and our
call sites come from parsing submission.py / reference.py with `ast`. A call binds when
Python's own rules would accept it: positional count, keyword names, no argument given
twice, every required parameter supplied. Splatted calls (*xs, **kw) fail: they cannot
be checked.

The PyPI wheel (amd-aiter 0.1.7.post2.dev18) is older than the API the leaderboard calls;
the tests at the end pin down exactly how it differs, and list which of our call sites
would not bind on it.
"""
from __future__ import annotations

import pytest

from tools import aiter_contract as ac

pytestmark = pytest.mark.fast

MARCH = ac.load_api(ac.MARCH_API_FILE)
WHEEL = ac.load_api(ac.WHEEL_API_FILE)
NAMES = ac.recorded_functions(MARCH)
MLA_FUNCTIONS = {"mla_decode_fwd", "get_mla_metadata_info_v1", "get_mla_metadata_v1"}

# The leaderboard reference's call pattern (the amd-mixed-mla problem's reference.py).
# It passes the six metadata buffers to mla_decode_fwd as **metadata; they are spelled
# out here because a splat cannot be checked.
LEADERBOARD_PATTERN = """
info = get_mla_metadata_info_v1(
    batch_size, max_seqlen_qo, num_heads, q_dtype, kv_dtype,
    is_sparse=False, fast_mode=False, num_kv_splits=32, intra_batch_mode=True)
get_mla_metadata_v1(
    qo_indptr, kv_indptr, kv_last_page_lens, num_heads // num_kv_heads, num_kv_heads, True,
    work_metadata, work_info_set, work_indptr, reduce_indptr, reduce_final_map,
    reduce_partial_map,
    page_size=1, kv_granularity=16, max_seqlen_qo=1, uni_seqlen_qo=1, fast_mode=False,
    max_split_per_batch=32, intra_batch_mode=True, dtype_q=q_dtype, dtype_kv=kv_dtype)
mla_decode_fwd(
    q, kv_buffer, o, qo_indptr, kv_indptr, kv_indices, kv_last_page_lens, max_seqlen_q,
    page_size=1, nhead_kv=1, sm_scale=sm_scale, logit_cap=0.0, num_kv_splits=32,
    q_scale=q_scale, kv_scale=kv_scale, intra_batch_mode=True,
    work_meta_data=work_metadata, work_indptr=work_indptr, work_info_set=work_info_set,
    reduce_indptr=reduce_indptr, reduce_final_map=reduce_final_map,
    reduce_partial_map=reduce_partial_map)
"""


def sites(source: str, filename: str = "fixture.py") -> list[ac.CallSite]:
    return ac.find_call_sites(source, filename, NAMES)


def only_site(source: str) -> ac.CallSite:
    found = sites(source)
    assert len(found) == 1, found
    return found[0]


def format_failures(failures: list[tuple[ac.CallSite, list[str]]]) -> str:
    return "\n".join(f"{call.where()}: " + "; ".join(errs) for call, errs in failures)


# ---------------------------------------------------------------- the data itself


def test_data_names_the_march_2026_commit():
    source = MARCH["source"]
    assert source["kind"] == "git" and source["repository"] == "ROCm/aiter"
    assert source["commit"].startswith("2ee06ca214")
    assert source["commit_date"].startswith("2026-03-19")
    assert WHEEL["source"]["version"] == ac.WHEEL_VERSION


@pytest.mark.parametrize("api", [MARCH, WHEEL], ids=["march", "wheel"])
def test_every_function_we_call_was_found(api):
    missing = {n for n, e in api["functions"].items() if not e.get("found")}
    assert not missing, f"not found in aiter source: {missing}"


def test_march_signatures_are_the_leaderboard_ones():
    """The parameter lists the leaderboard's pattern relies on (spot checks)."""
    def names(fn):
        return [p["name"] for p in MARCH["functions"][fn]["params"]]

    assert names("mla_decode_fwd")[:10] == [
        "q", "kv_buffer", "o", "qo_indptr", "kv_indptr", "kv_indices",
        "kv_last_page_lens", "max_seqlen_q", "page_size", "nhead_kv"]
    assert names("get_mla_metadata_info_v1") == [
        "batch_size", "max_seqlen_qo", "num_head_qo", "q_dtype", "kv_dtype", "is_sparse",
        "fast_mode", "num_kv_splits", "intra_batch_mode"]
    # Positional order of the work buffers is metadata, info_set, indptr: NOT the order
    # get_mla_metadata_info_v1 returns them in (metadata, indptr, info_set, ...).
    assert names("get_mla_metadata_v1")[6:9] == [
        "work_metadata_ptrs", "work_info_set", "work_indptr"]


def test_march_stub_and_compiled_op_agree():
    """get_mla_metadata_v1 is a Python stub over a pybind11 op; both see the call."""
    entry = MARCH["functions"]["get_mla_metadata_v1"]
    stub = [p["name"] for p in entry["params"]]
    compiled = [p["name"] for p in entry["pybind"]["params"]]
    assert stub == compiled


def test_dtype_names_we_rely_on():
    names = {n: e["means"] for n, e in MARCH["dtypes"]["names"].items()}
    assert names["fp4x2"] == {"if_present": "torch.float4_e2m1fn_x2", "else": "torch.uint8"}
    assert names["fp8_e8m0"] == {"if_present": "torch.float8_e8m0fnu", "else": "torch.uint8"}
    assert names["fp8"]["per_gfx"]["gfx950"] == "torch.float8_e4m3fn"  # MI355X
    assert names["fp8"]["per_gfx"]["gfx942"] == "torch.float8_e4m3fnuz"  # MI300X
    assert names["bf16"] == "torch.bfloat16"


@pytest.mark.parametrize("filename", ac.OUR_SOURCES)
def test_aiter_dtype_names_we_use_exist(filename):
    path = ac.REPO_ROOT / filename
    if not path.is_file():
        pytest.skip(f"{filename} not written yet")
    known = set(MARCH["dtypes"]["names"])
    unknown = [(line, name) for line, name in ac.dtype_uses(path.read_text())
               if name not in known]
    assert not unknown, f"{filename}: aiter.dtypes has no {unknown}"


def test_dtype_use_finder():
    source = ("from aiter import dtypes as D\nimport aiter\n"
              "a = D.fp8\nb = aiter.dtypes.fp4x2\nc = other.fp8\n")
    assert ac.dtype_uses(source) == [(3, "fp8"), (4, "fp4x2")]


# ---------------------------------------------------------------- the checker itself


GOOD_CALLS = [
    "aiter_ops.mla_decode_fwd(q, kv, o, qo, kvi, idx, last, 1, page_size=1, kv_scale=s)",
    "mla_decode_fwd(q=q, kv_buffer=kv, o=o, qo_indptr=a, kv_indptr=b, kv_indices=c,"
    " kv_last_page_lens=d, max_seqlen_q=1)",
    "aiter.utility.fp4_utils.dynamic_mxfp4_quant(x, shuffle=False)",
    "e8m0_to_f32(scales)",
    "x.y.get_mla_metadata_info_v1(4, 1, 16, a, b, False, num_kv_splits=8)",
]

BAD_CALLS = [
    # (call, words the error must contain)
    ("aiter_ops.mla_decode_fwd(q, kv, o, qo, kvi, idx, last)", "missing required max_seqlen_q"),
    ("mla_decode_fwd(q, kv, o, qo, kvi, idx, last, 1, page_sise=1)", "unknown keyword 'page_sise'"),
    ("e8m0_to_f32(s, t)", "2 positional arguments, at most 1 allowed"),
    ("dynamic_mxfp4_quant(x, 'even', scaling_mode='even')",
     "'scaling_mode' given both by position and by keyword"),
    ("aiter_ops.get_mla_metadata_v1(*args)", "uses *args: the call cannot be verified"),
    ("aiter_ops.mla_decode_fwd(q, kv, o, qo, kvi, idx, last, 1, **metadata)",
     "uses **kwargs: the call cannot be verified"),
    ("get_mla_metadata_info_v1(4, 1, 16, a, b)", "missing required is_sparse"),
]


@pytest.mark.parametrize("source", GOOD_CALLS)
def test_checker_accepts_good_calls(source):
    assert ac.check_call(MARCH, only_site(source)) == []


@pytest.mark.parametrize("source, expected", BAD_CALLS)
def test_checker_rejects_bad_calls(source, expected):
    errors = ac.check_call(MARCH, only_site(source))
    assert any(expected in e for e in errors), errors


def test_checker_checks_the_compiled_op_too():
    """A keyword the Python stub knows but the pybind op does not must fail."""
    api = {"functions": {"f": {"found": True, "params": [
        {"name": "a", "kind": "POSITIONAL_OR_KEYWORD"},
        {"name": "b", "kind": "POSITIONAL_OR_KEYWORD", "default": "1"}],
        "pybind": {"params": [{"name": "a", "kind": "POSITIONAL_OR_KEYWORD"}]}}}}
    call = ac.find_call_sites("f(1, b=2)", "x.py", {"f"})[0]
    assert ac.check_call(api, call) == ["[pybind] unknown keyword 'b'"]


def test_finder_spellings_and_local_shadowing():
    source = (
        "import aiter_ops\n"
        "def e8m0_to_f32(x):\n"   # our own emulation, same name: not an aiter call
        "    return x\n"
        "e8m0_to_f32(a, b, c)\n"
        "aiter_ops.e8m0_to_f32(a)\n"
        "m.fp4.mxfp4_to_f32(a)\n"
        "mxfp4_to_f32(a)\n"
        "other(a)\n"
    )
    found = [(s.line, s.spelled) for s in sites(source)]
    assert found == [(5, "aiter_ops.e8m0_to_f32"), (6, "m.fp4.mxfp4_to_f32"), (7, "mxfp4_to_f32")]


def test_leaderboard_pattern_binds_to_march_api():
    found = sites(LEADERBOARD_PATTERN)
    assert {s.name for s in found} == MLA_FUNCTIONS
    failures = [(s, ac.check_call(MARCH, s)) for s in found]
    assert not [f for f in failures if f[1]], format_failures(failures)


# ---------------------------------------------------------------- our source files


@pytest.mark.parametrize("filename", ac.OUR_SOURCES)
def test_our_aiter_calls_bind_to_march_api(filename):
    path = ac.REPO_ROOT / filename
    if not path.is_file():
        pytest.skip(f"{filename} not written yet")
    failures = [
        (call, errs)
        for call in ac.call_sites_in_file(path, NAMES)
        if (errs := ac.check_call(MARCH, call))
    ]
    assert not failures, "aiter calls that would not bind:\n" + format_failures(failures)


def test_submission_calls_the_aiter_route():
    """The ROCm route must exist and be visible to this test: if the calls were renamed
    or splatted, the binding check above would pass vacuously."""
    path = ac.REPO_ROOT / "submission.py"
    if not path.is_file():
        pytest.skip("submission.py not written yet")
    called = {call.name for call in ac.call_sites_in_file(path, NAMES)}
    assert MLA_FUNCTIONS <= called, f"submission.py never calls {MLA_FUNCTIONS - called}"


# ---------------------------------------------------------------- the older wheel


def keyword_sets(api: dict, name: str) -> dict[str, set[str]]:
    return {label: ac.keyword_names(params) for label, params in ac.signatures(api, name)}


# Keywords the March 2026 API accepts and the PyPI wheel does not (per signature).
MARCH_ONLY_KEYWORDS = {
    "mla_decode_fwd": {"python": {"page_size", "nhead_kv", "intra_batch_mode",
                                  "return_logits", "return_lse"}},
    "get_mla_metadata_info_v1": {"python": {"num_kv_splits", "intra_batch_mode"}},
    "get_mla_metadata_v1": {
        # The wheel's Python stub calls the buffer `work_info` (and puts it after
        # work_indptr) while its own pybind op says work_info_set: inconsistent there.
        "python": {"kv_last_page_lens", "page_size", "intra_batch_mode", "dtype_q",
                   "dtype_kv", "work_info_set"},
        "pybind": {"kv_last_page_lens", "page_size", "intra_batch_mode", "dtype_q",
                   "dtype_kv"},
    },
    "dynamic_mxfp4_quant": {"python": set()},
    "mxfp4_to_f32": {"python": set()},
    "e8m0_to_f32": {"python": set()},
}


@pytest.mark.parametrize("name", sorted(MARCH_ONLY_KEYWORDS))
def test_wheel_lacks_exactly_these_keywords(name):
    march, wheel = keyword_sets(MARCH, name), keyword_sets(WHEEL, name)
    lacking = {label: march[label] - wheel.get(label, set()) for label in march}
    assert lacking == MARCH_ONLY_KEYWORDS[name]


def test_wheel_only_keywords():
    """What the wheel has that March does not: only the stub's `work_info` spelling."""
    extra = {
        (name, label): kws - keyword_sets(MARCH, name).get(label, set())
        for name in NAMES
        for label, kws in keyword_sets(WHEEL, name).items()
    }
    assert {k: v for k, v in extra.items() if v} == {
        ("get_mla_metadata_v1", "python"): {"work_info"}}


def test_leaderboard_pattern_does_not_bind_on_wheel():
    """Documents why the wheel cannot stand in for the leaderboard's aiter."""
    errors = {s.name: ac.wheel_problems(MARCH, WHEEL, s) for s in sites(LEADERBOARD_PATTERN)}
    assert all(errors.values()), errors
    assert any("unknown keyword 'page_size'" in e for e in errors["mla_decode_fwd"])
    assert any("unknown keyword 'intra_batch_mode'" in e
               for e in errors["get_mla_metadata_info_v1"])
    # 12 positionals: on the wheel, position 2 is num_heads_per_head_k, not
    # kv_last_page_lens, and the 12th lands on kv_granularity (given again by keyword).
    assert any("#2 kv_last_page_lens->num_heads_per_head_k" in e
               for e in errors["get_mla_metadata_v1"])


def test_report_our_call_sites_on_the_wheel(info_report):
    """Informative: which of OUR call sites would not bind on the wheel's API (shown with
    -v or when this fails). Every problem must be one the data above explains (a
    March-only keyword or a shifted positional), so a new kind of incompatibility shows up
    as a failure."""
    march_only = set().union(*(s for d in MARCH_ONLY_KEYWORDS.values() for s in d.values()))
    report = ac.wheel_report()
    info_report("\n[aiter] call sites that would NOT bind on amd-aiter "
                f"{ac.WHEEL_VERSION} (expected: its API is older than the March 2026 one we "
                f"call):\n  " + ("\n  ".join(report) or "(none)"))
    for line in report:
        for problem in line.split(": ", 1)[1].split("; "):
            explained = (
                "positional arguments land elsewhere" in problem
                or "given both by position and by keyword" in problem
                or any(f"unknown keyword '{k}'" in problem for k in march_only)
            )
            assert explained, line


def test_wheel_data_matches_the_unpacked_wheel():
    """The committed wheel facts are what the extractor reads from the wheel that
    tools/setup.sh unpacks (guards the data file against hand edits)."""
    import importlib.util
    import os

    if not ac.wheel_fp4_utils_path().is_file():
        message = f"aiter wheel not unpacked at {ac.wheel_dir()}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    spec = importlib.util.spec_from_file_location(
        "extract_aiter_api", ac.REPO_ROOT / "tools" / "extract_aiter_api.py")
    extractor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extractor)
    source = extractor.DirSource(str(ac.wheel_dir()))
    facts = extractor.extract(source, (extractor.PYBIND_HEADER_PATH,))
    assert facts["source"]["version"] == ac.WHEEL_VERSION
    assert facts["functions"] == WHEEL["functions"]
    assert facts["dtypes"] == WHEEL["dtypes"]
