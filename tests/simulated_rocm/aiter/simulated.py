"""The one recording fake behind the simulated aiter's functions (tools/fake_aiter.py, on
gfx950 with 256 CUs, serving the CPU)."""
import torch

from tools.fake_aiter import FakeAiter

SIMULATED = FakeAiter(gfx="gfx950", cu_num=256, device=torch.device("cpu"))


def forgetting(function):
    """The fake records every call (with its tensors) for tests to inspect; nobody reads
    this one's records, so they are dropped after each call instead of piling up."""
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        finally:
            SIMULATED.clear_calls()
    call.__name__ = function.__name__
    return call
