"""aiter.mla of the simulated stack: the fake's persistent decode."""
from . import SIMULATED, _forgetting

mla_decode_fwd = _forgetting(SIMULATED.mla_decode_fwd)
