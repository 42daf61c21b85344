"""A CPU stand-in for ROCm's aiter (tests/simulated_rocm/README.md): one recording fake of
tests/fake_aiter.py, on gfx950 with 256 CUs, serving the CPU, under aiter's own names."""
import sys
from pathlib import Path

import torch

# fake_aiter and the signature files it reads live in tests/; eval.py and other
# subprocesses that inherit PYTHONPATH do not have that folder on their path.
_TESTS = Path(__file__).resolve().parents[2]
if str(_TESTS) not in sys.path:
    sys.path.append(str(_TESTS))

from fake_aiter import FakeAiter  # noqa: E402

__version__ = "0+simulated"
SIMULATED = FakeAiter(gfx="gfx950", cu_num=256, device=torch.device("cpu"))


def _forgetting(function):
    """The fake records every call (with its tensors) for tests to inspect; nobody reads
    this one's records, so they are dropped after each call instead of piling up."""
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        finally:
            SIMULATED.clear_calls()
    call.__name__ = function.__name__
    return call


get_mla_metadata_info_v1 = _forgetting(SIMULATED.get_mla_metadata_info_v1)
get_mla_metadata_v1 = _forgetting(SIMULATED.get_mla_metadata_v1)

from . import dtypes, mla  # noqa: E402,F401  (aiter.dtypes and aiter.mla, as in aiter)
