"""Each of the emulator's checks shown firing: a probe kernel (tests/gfx950_probes.py) run
with a deliberate slip, either in its arguments or in its compiled gfx950 listing (a line
of the AMDGCN replaced, as a compiler or hand-written-asm bug would), must be reported, and
the same kernel unchanged runs clean (tests/test_gfx950_emu_probes.py). CPU only."""
import dataclasses

import numpy as np
import pytest
import torch

from conftest import EMULATES_COMPILED_GFX950
from tools import gfx950_emu

pytestmark = EMULATES_COMPILED_GFX950


@pytest.fixture(scope="module")
def emu():
    return gfx950_emu


def run_with_listing(emu, calls, edit=None):
    """Runs calls in one emulated memory, the first call's listing changed by edit(text) ->
    text; returns the machine (its violations) after the run."""
    from tools.gfx950_cases import compile_for_gfx950
    memory = emu.GlobalMemory()
    machine = emu.Machine(memory)
    for index, call in enumerate(calls):
        compiled = compile_for_gfx950(call)
        if index == 0 and edit is not None:
            compiled = dataclasses.replace(compiled, listing=emu.read_listing(edit(compiled.listing.text)))
        with np.errstate(all="ignore"):
            machine.run(emu.build_launch(call, compiled, memory))
    return machine


def replace_once(old, new):
    def edit(text):
        assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in the listing"
        return text.replace(old, new)
    return edit


def kinds(machine):
    return {v.kind for v in machine.violations}


def probe(name):
    import gfx950_probes
    return gfx950_probes.PROBES[name]()


def test_an_address_in_no_argument_is_reported_with_its_lane(emu):
    import gfx950_probes
    n, shift = 333, 5
    x = torch.arange(n, dtype=torch.float32)
    y = torch.zeros(n)  # too short by `shift`: the last kept elements land past its end
    call = gfx950_probes._call(gfx950_probes.masked_copy_kernel, (3,), (x, y, n, shift, 128))
    machine = run_with_listing(emu, [call])
    bad = [v for v in machine.violations if v.kind == "out of bounds"]
    assert bad, kinds(machine)
    assert "past the end of `y_ptr`" in bad[0].message and bad[0].lanes, bad[0]
    assert bad[0].source.startswith("gfx950_probes.py:"), bad[0]


def test_buffer_descriptors_bound_what_their_num_records_says(emu):
    # The masked copy's load descriptor with num_records 256 bytes instead of 0x7ffffffe
    # (its store descriptor, a copy of it, left as compiled): the hardware's range check
    # returns zeros past byte 256, silently (no fault, no report).
    calls, _ = probe("masked loads and stores (buffer ops)")
    x, y = calls[0].args[0], calls[0].args[1]

    def edit(text):
        text = replace_once("s_mov_b32 s10, 0x7ffffffe", "s_mov_b32 s10, 0x100")(text)
        return replace_once("s_mov_b32 s6, s10", "s_mov_b32 s6, 0x7ffffffe")(text)
    machine = run_with_listing(emu, calls, edit)
    assert not machine.violations, machine.violations[:3]
    n, shift = 333, 5
    offs = torch.arange(n)
    kept = offs % 3 != 0
    got = y[offs + shift]
    assert torch.equal(got[kept & (offs < 64)], x[kept & (offs < 64)] * 2)
    assert torch.equal(got[kept & (offs >= 64)], torch.zeros(int((kept & (offs >= 64)).sum())))


def test_a_register_read_before_its_load_is_waited_for_is_reported(emu):
    calls, check = probe("masked loads and stores (buffer ops)")
    machine = run_with_listing(emu, calls, replace_once("\ts_waitcnt vmcnt(0)\n", "\n"))
    bad = [v for v in machine.violations if v.kind == "read before wait"]
    assert bad and "buffer_load_dword" in bad[0].message, kinds(machine)
    with pytest.raises(AssertionError):
        check()  # and the value it read was poison


def test_lds_read_of_a_copy_not_yet_waited_for_is_reported(emu):
    # The Gluon ring's first wait_group made too weak: the read of stage 0 races its copy.
    calls, _ = probe("Gluon LDS ring (buffer loads into LDS, wait_group)")
    machine = run_with_listing(emu, calls, replace_once("s_waitcnt vmcnt(1) lgkmcnt(0)", "s_waitcnt lgkmcnt(0)"))
    bad = [v for v in machine.violations if v.kind == "lds race"]
    assert bad and "buffer load into LDS" in bad[0].message, kinds(machine)


def test_lds_read_of_another_waves_write_without_a_barrier_is_reported(emu):
    calls, _ = probe("layout through LDS (transpose f32)")
    machine = run_with_listing(emu, calls, replace_once("\ts_barrier\n", "\n"))
    bad = [v for v in machine.violations if v.kind == "lds race"]
    assert bad and "no s_barrier" in bad[0].message, kinds(machine)


def test_lds_access_outside_the_allocation_is_reported(emu):
    calls, _ = probe("layout through LDS (transpose f32)")
    machine = run_with_listing(emu, calls, replace_once("ds_write2st64_b32 v33, v2, v3 offset1:32",
                                                        "ds_write2st64_b32 v33, v2, v3 offset0:250 offset1:32"))
    assert "lds out of range" in kinds(machine), kinds(machine)


def test_a_barrier_some_wave_cannot_reach_is_reported_as_a_hang(emu):
    # Wave 0 branches around the barrier to the end of the program.
    calls, _ = probe("layout through LDS (transpose f32)")

    def edit(text):
        assert "s100" not in text
        text = text.replace("\ts_load_dwordx2 s[2:3], s[0:1], 0x0\n",
                            "\tv_readfirstlane_b32 s100, v0\n\ts_load_dwordx2 s[2:3], s[0:1], 0x0\n", 1)
        text = replace_once("\ts_barrier\n", "\ts_cmp_lt_u32 s100, 64\n\ts_cbranch_scc1 .Lwave0_skips\n"
                                             "\ts_barrier\n")(text)
        return replace_once("\ts_endpgm\n", ".Lwave0_skips:\n\ts_endpgm\n")(text)
    machine = run_with_listing(emu, calls, edit)
    bad = [v for v in machine.violations if v.kind == "hang"]
    assert bad and "waves [0] have ended" in bad[0].message, kinds(machine)


def test_an_unimplemented_instruction_stops_the_run_with_its_name(emu):
    calls, _ = probe("masked loads and stores (buffer ops)")
    with pytest.raises(emu.NotImplementedInstruction, match="v_sin_f32"):
        run_with_listing(emu, calls, replace_once("v_add_f32_e32 v0, v2, v2", "v_sin_f32_e32 v0, v2"))


def test_an_unknown_modifier_stops_the_run_with_its_name(emu):
    calls, _ = probe("masked loads and stores (buffer ops)")
    with pytest.raises(emu.ListingError, match="glc"):
        run_with_listing(emu, calls, replace_once("buffer_store_dword v0, v1, s[4:7], 0 offen",
                                                  "buffer_store_dword v0, v1, s[4:7], 0 offen glc"))
