"""The state a wave starts in, from the kernel descriptor (AMDHSA code object v5):

- s[0:1] the kernarg segment's address (.amdhsa_user_sgpr_kernarg_segment_ptr); then
  .amdhsa_user_sgpr_kernarg_preload_length dwords of the kernarg segment from
  .amdhsa_user_sgpr_kernarg_preload_offset; the workgroup ids x, y, z (those enabled by
  .amdhsa_system_sgpr_workgroup_id_*) right after the .amdhsa_user_sgpr_count user SGPRs;
- v0 the work-item id (x in bits 0-9; these kernels are one-dimensional);
- EXEC all lanes (every workgroup is whole: num_warps x 64 threads);
- MODE from the float round / denorm / dx10_clamp / ieee directives.

Execution starts at the kernel's first instruction: with kernarg preloading, that is a
compatibility block that loads the same dwords again with s_load (for firmware without
preloading) and branches to the code a preloading GPU starts at; running it reproduces the
preloaded values, so both entries give the same state. Every other register starts as a
poison pattern (a NaN as f32), so that code reading one it never wrote computes NaN."""
from __future__ import annotations

import numpy as np

from .listing import EXEC
from .reports import NotImplementedInstruction
from .state import POISON, KernelLaunch, Wave


def mode_register(descriptor: dict) -> int:
    """MODE bits: [3:0] round modes, [7:4] denorm modes, [8] dx10_clamp, [9] ieee."""
    round32 = descriptor.get(".amdhsa_float_round_mode_32", 0)
    round64 = descriptor.get(".amdhsa_float_round_mode_16_64", 0)
    denorm32 = descriptor.get(".amdhsa_float_denorm_mode_32", 3)
    denorm64 = descriptor.get(".amdhsa_float_denorm_mode_16_64", 3)
    dx10 = descriptor.get(".amdhsa_dx10_clamp", 1)
    ieee = descriptor.get(".amdhsa_ieee_mode", 1)
    return round32 | (round64 << 2) | (denorm32 << 4) | (denorm64 << 6) | (dx10 << 8) | (ieee << 9)


def check_supported(descriptor: dict) -> None:
    """The kernels this emulator runs: no private segment, no dispatch or queue pointers."""
    unsupported = [key for key in (".amdhsa_user_sgpr_dispatch_ptr", ".amdhsa_user_sgpr_queue_ptr",
                                   ".amdhsa_user_sgpr_dispatch_id", ".amdhsa_enable_private_segment",
                                   ".amdhsa_system_sgpr_workgroup_info", ".amdhsa_uses_dynamic_stack",
                                   ".amdhsa_user_sgpr_private_segment_size")
                   if descriptor.get(key, 0)]
    if descriptor.get(".amdhsa_system_vgpr_workitem_id", 0) != 0:
        unsupported.append(".amdhsa_system_vgpr_workitem_id")
    if descriptor.get(".amdhsa_float_denorm_mode_32", 3) != 3 or descriptor.get(".amdhsa_float_round_mode_32", 0):
        unsupported.append("a float mode other than round-to-nearest with denormals")
    if unsupported:
        raise NotImplementedInstruction(f"kernel descriptor settings not emulated: {unsupported}")


def initialize_wave(wave: Wave, launch: KernelLaunch) -> None:
    d = launch.kernel.descriptor
    check_supported(d)
    wave.s[:] = POISON
    wave.v[:] = POISON
    sgpr = 0
    if d.get(".amdhsa_user_sgpr_kernarg_segment_ptr", 0):
        wave.s[0] = launch.kernarg_address & 0xFFFFFFFF
        wave.s[1] = launch.kernarg_address >> 32
        sgpr = 2
    preload = d.get(".amdhsa_user_sgpr_kernarg_preload_length", 0)
    if preload:
        offset = d.get(".amdhsa_user_sgpr_kernarg_preload_offset", 0)
        words = launch.kernarg[offset * 4:(offset + preload) * 4].view(np.uint32)
        wave.s[sgpr:sgpr + preload] = words
    sgpr = d[".amdhsa_user_sgpr_count"]
    for axis, key in enumerate((".amdhsa_system_sgpr_workgroup_id_x", ".amdhsa_system_sgpr_workgroup_id_y",
                                ".amdhsa_system_sgpr_workgroup_id_z")):
        if d.get(key, 1 if axis == 0 else 0):
            wave.s[sgpr] = wave.workgroup.ids[axis]
            sgpr += 1
    wave.v[0] = np.arange(64, dtype=np.uint32) + 64 * wave.index
    wave.s[EXEC] = 0xFFFFFFFF
    wave.s[EXEC + 1] = 0xFFFFFFFF
    wave.exec_changed()
    wave.scc = 0
    wave.mode = mode_register(d)
    wave.pc = 0
