"""aiter.mla of the simulated stack: the fake's persistent decode."""
from .simulated import SIMULATED, forgetting

mla_decode_fwd = forgetting(SIMULATED.mla_decode_fwd)
