"""Seeding, tensor comparison and cache flushing: the helpers upstream's eval.py and
reference.py import from utils, usable on CPU, NVIDIA and ROCm. describe_platform is ours
only (eval.py's first line, pytest's header)."""
import importlib
import importlib.metadata
import importlib.util
import random
import re
import sys

import numpy as np
import torch

# Keys that mark an MLA input tuple; only those inputs get the mismatch allowance.
_MLA_CONFIG_KEYS = {"num_heads", "num_kv_heads", "qk_head_dim", "kv_lora_rank",
                    "qk_rope_head_dim", "v_head_dim"}

# The leaderboard's flush on a GPU (upstream utils.py): torch.randn of this shape in fp32,
# 64 GB, then freed. Besides evicting the L2 it keeps the GPU busy for milliseconds
# (~16 ms on an H200) right before the harness's start event, so the host has queued the
# whole timed call before the GPU reaches it: the events read device time, not host time.
LEADERBOARD_FLUSH_SHAPE = (16000, 1024, 1024)
# On the CPU: a few times a core's L2, cheap to write (~1 ms); CPU timings only compare routes.
_CPU_FLUSH_BYTES = 8 * 1024 * 1024
_cpu_flush_buffer: list[torch.Tensor] = []
# Per GPU, the largest randn (elements) that fit the last time, when the full one did not.
_gpu_flush_elements: dict[str, int] = {}


def set_seed(seed=42):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def get_device(use_cuda: bool = True) -> torch.device:
    if use_cuda and torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def _mismatch_mask(received: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float):
    """Elements outside atol + rtol*|expected|, plus NaN/Inf that the other side lacks.
    NaN against NaN and equal infinities count as matches. Returns (mask, abs_diff)."""
    received = received.to(torch.float32)
    expected = expected.to(torch.float32)
    diff = (received - expected).abs()
    outside = diff > atol + rtol * expected.abs()
    nan_differs = received.isnan() ^ expected.isnan()
    posinf_differs = received.isposinf() ^ expected.isposinf()
    neginf_differs = received.isneginf() ^ expected.isneginf()
    return outside | nan_differs | posinf_differs | neginf_differs, diff


def mismatch_stats(output: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float
                   ) -> tuple[float, float]:
    """(fraction of mismatching elements, max abs error) under the check rule. A NaN or Inf
    that the other side lacks makes the max error inf. Shapes must match."""
    mask, diff = _mismatch_mask(output, expected, rtol, atol)
    if mask.numel() == 0:
        return 0.0, 0.0
    fraction = int(mask.count_nonzero()) / mask.numel()   # exact: 5% of 10 000 is 500
    nonfinite = ~diff.isfinite()
    if bool((mask & nonfinite).any()):
        return fraction, float("inf")
    # What is left non-finite is NaN/Inf on both sides at the same place: a match.
    return fraction, float(diff.masked_fill(nonfinite, 0.0).max())


def _describe_mismatches(received, expected, mask, max_print) -> list[str]:
    count = int(mask.count_nonzero())
    lines = [f"Number of mismatched elements: {count}"]
    for index in torch.nonzero(mask)[:max_print]:
        i = tuple(index.tolist())
        lines.append(f"ERROR at {i}: {received[i]} {expected[i]}")
    if count > max_print:
        lines.append(f"... and {count - max_print} more mismatched elements.")
    return lines


@torch.no_grad()
def verbose_allclose(received: torch.Tensor, expected: torch.Tensor, rtol=1e-05, atol=1e-08,
                     max_print=5) -> tuple[bool, list[str]]:
    """(all close?, lines describing the first mismatches or the max error)."""
    if received.shape != expected.shape:
        return False, ["SIZE MISMATCH"]
    mask, diff = _mismatch_mask(received, expected, rtol, atol)
    if bool(mask.any()):
        return False, _describe_mismatches(received, expected, mask, max_print)
    max_error = float(diff.nan_to_num(0.0).max()) if diff.numel() else 0.0
    return True, [f"Maximum error: {max_error:.6g}"]


@torch.no_grad()
def verbose_allequal(received: torch.Tensor, expected: torch.Tensor, max_print: int = 5
                     ) -> tuple[bool, list[str]]:
    """(bitwise-equal values?, lines describing the first mismatches)."""
    if received.shape != expected.shape:
        return False, ["SIZE MISMATCH"]
    mask = torch.not_equal(received, expected)
    if bool(mask.any()):
        return False, _describe_mismatches(received, expected, mask, max_print)
    return True, []


def _is_mla_input(data) -> bool:
    return (isinstance(data, tuple) and len(data) >= 5 and isinstance(data[4], dict)
            and _MLA_CONFIG_KEYS.issubset(data[4].keys()))


@torch.no_grad()
def match_reference(data, output, reference: callable, rtol=1e-05, atol=1e-08,
                    mismatch_allowance=0.05) -> tuple[bool, str]:
    """(passed, message) of `output` against `reference(data)`; the message is the max
    error on a clean pass, a warning on a pass by allowance, the mismatches otherwise.
    For MLA inputs up to `mismatch_allowance` of the elements may miss, as upstream."""
    expected = reference(data)
    good, reasons = verbose_allclose(output, expected, rtol=rtol, atol=atol)
    if not good and _is_mla_input(data) and output.shape == expected.shape:
        fraction, max_err = mismatch_stats(output, expected, rtol, atol)
        if fraction <= mismatch_allowance:
            return True, (f"warning: mismatch_ratio={fraction:.6f} (<= tol_err_ratio="
                          f"{mismatch_allowance}) with rtol={rtol}, atol={atol}, "
                          f"max abs error {max_err:.4g}")
        reasons.insert(0, f"mismatch_ratio={fraction:.6f} > tol_err_ratio={mismatch_allowance}"
                          f" with rtol={rtol}, atol={atol}")
    # A literal backslash-n, as upstream: a result line must stay one line.
    return good, "\\n".join(reasons)


def make_match_reference(reference: callable, **kwargs):
    def wrapped(data, output):
        return match_reference(data, output, reference=reference, **kwargs)
    return wrapped


def clear_l2_cache_large(device: torch.device | None = None):
    """On a GPU, the leaderboard's flush: a 64 GB fp32 randn, freed at once. Where that
    does not fit, the largest randn that does (halving from 64 GB), written as many times
    as make 64 GB, so the GPU stays busy as long. On the CPU, a small buffer is written."""
    device = device or get_device()
    if device.type != "cuda":
        if not _cpu_flush_buffer:
            _cpu_flush_buffer.append(torch.empty(_CPU_FLUSH_BYTES // 4, dtype=torch.int32))
        _cpu_flush_buffer[0].fill_(0x5A5A5A5A)
        return
    total = LEADERBOARD_FLUSH_SHAPE[0] * LEADERBOARD_FLUSH_SHAPE[1] * LEADERBOARD_FLUSH_SHAPE[2]
    elements = _gpu_flush_elements.get(str(device), total)
    while True:
        try:
            dummy = torch.empty(elements, device=device)
            break
        except torch.OutOfMemoryError:
            if elements < (1 << 28):  # under 1 GiB free: no flush as the leaderboard's is possible
                raise
            elements //= 2
    if elements < total:
        _gpu_flush_elements[str(device)] = elements
    for _ in range(-(-total // elements)):
        torch.randn(elements, device=device, out=dummy)
    del dummy


def _torch_build() -> str:
    if torch.version.hip:
        return f"HIP {torch.version.hip}"
    if torch.version.cuda:
        return f"CUDA {torch.version.cuda}"
    return "CPU build"


def _installed_version(module_name: str) -> str:
    """An imported module's __version__, else the version of the distribution providing it."""
    version = getattr(sys.modules[module_name], "__version__", None)
    if version:
        return version
    distributions = importlib.metadata.packages_distributions().get(module_name)
    return importlib.metadata.version(distributions[0]) if distributions else "(version unknown)"


def _describe_module(name: str, probe: str) -> str:
    """'NAME VERSION' where the module `probe` imports, 'NAME not installed' where NAME is not
    found, else 'NAME unusable (the import error)'."""
    if importlib.util.find_spec(name) is None:
        return f"{name} not installed"
    try:
        importlib.import_module(probe)
    except Exception as error:
        first_line = (str(error).splitlines() or [""])[0]
        return f"{name} unusable ({type(error).__name__}: {first_line})"
    return f"{name} {_installed_version(name)}"


def _describe_device() -> str:
    if not torch.cuda.is_available():
        return "CPU (no GPU)"
    properties = torch.cuda.get_device_properties(0)
    if torch.version.hip:
        arch = properties.gcnArchName.split(":")[0]   # 'gfx950:sramecc+:xnack-'
    else:
        arch = f"sm_{properties.major}{properties.minor}"
    count = torch.cuda.device_count()
    return f"{properties.name} ({arch})" + (f", the first of {count}" if count > 1 else "")


# The Triton release lines this project was tested with (docs/setup.md says what each
# gives; results/2026-12-02-cpu-triton-versions has the runs).
TESTED_TRITON_LINES = ((3, 5), (3, 9))


def _triton_range_note() -> str:
    """' (outside the tested Triton 3.5 to 3.9)' for an imported Triton of another line, else ''."""
    match = re.match(r"(\d+)\.(\d+)", getattr(sys.modules.get("triton"), "__version__", None) or "")
    if not match:
        return ""
    (low_major, low_minor), (high_major, high_minor) = TESTED_TRITON_LINES
    if (low_major, low_minor) <= (int(match[1]), int(match[2])) <= (high_major, high_minor):
        return ""
    return f" (outside the tested Triton {low_major}.{low_minor} to {high_major}.{high_minor})"


def describe_platform() -> str:
    """The versions in use and the device, e.g. 'torch 2.11.0+cu130 (CUDA 13.0), triton 3.6.0,
    aiter not installed; device NVIDIA H200 (sm_90)'. aiter counts only with aiter.mla, as in
    reference.py: ROCm's aiter has it, the unrelated `aiter` on PyPI does not. A Triton outside
    TESTED_TRITON_LINES is named so."""
    triton = _describe_module("triton", "triton")
    return (f"torch {torch.__version__} ({_torch_build()}), {triton}{_triton_range_note()}, "
            f"{_describe_module('aiter', 'aiter.mla')}; device {_describe_device()}")
