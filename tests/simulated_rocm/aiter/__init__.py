"""A CPU stand-in for ROCm's aiter (tests/simulated_rocm/README.md): one recording fake of
tools/fake_aiter.py (simulated.py), under aiter's own names."""
from . import dtypes, mla  # noqa: F401  (aiter.dtypes and aiter.mla, as in aiter)
from .simulated import SIMULATED, forgetting

__version__ = "0+simulated"
get_mla_metadata_info_v1 = forgetting(SIMULATED.get_mla_metadata_info_v1)
get_mla_metadata_v1 = forgetting(SIMULATED.get_mla_metadata_v1)
