"""The emulator's semantics against an oracle it does not share: small Triton and Gluon
kernels (tests/gfx950_probes.py) compiled for gfx950 by the project's own path, run in the
emulator, and compared with torch, bit for bit where the operation is exact and within its
documented rounding where not (exp2, log2: 1 ulp). CPU only: compile and emulate."""
import pytest

from conftest import EMULATES_COMPILED_GFX950

pytestmark = EMULATES_COMPILED_GFX950


def _probe_names():
    import gfx950_probes
    return list(gfx950_probes.PROBES)


@pytest.mark.parametrize("name", _probe_names())
def test_probe_kernel_matches_torch(name):
    import gfx950_probes
    from tools.gfx950_cases import run_calls
    if name.startswith("Gluon") and gfx950_probes.gluon is None:
        pytest.skip("this Triton's Gluon does not import")
    calls, check = gfx950_probes.PROBES[name]()
    machine, results = run_calls(calls)
    assert not machine.violations, "\n".join(str(v) for v in machine.violations[:5])
    check()
