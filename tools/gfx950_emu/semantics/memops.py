"""Memory instructions: scalar loads (SMEM), global and buffer (MUBUF) loads, stores and
atomics, buffer loads into LDS, cache control (buffer_wbl2, buffer_inv) and LDS (DS).

Every access is checked when it issues (memory.py says against what); its data reaches the
destination registers, or LDS for a load into LDS, only when an s_waitcnt retires it.

Buffer addressing (raw buffers, the only kind these kernels build: stride 0, no swizzle,
no add_tid): the address is base + soffset + voffset (offen) + the instruction's offset;
a lane whose voffset + offset reaches num_records (the descriptor's third word) is out of
range: its load returns zeros and its store is dropped, as the hardware's range check
does. The kernels' descriptors carry num_records 0x7ffffffe, so this drops only the
offsets of 2^31 and more: Triton's masked lanes (0x80000000) and the MXFP4 Gluon form's
scale rows outside its tile (0x80000000 + the block, as the immediate offset); every other
lane must lie inside a tensor, which the extent check decides. An out-of-range lane reads
nothing (no extent check, no byte read) and its load returns 0 (AMD's statements:
sources/memory_and_launch.md 1.3; tests/test_gfx950_emu_probes.py holds byte loads to it)."""
from __future__ import annotations

import re

import numpy as np

from ..registry import check_modifiers, register
from ..reports import NotImplementedInstruction
from ..state import PendingOp
from . import numerics as nm
from .operands import U32, scalar_reader, sgpr_index, vector_reader, vgpr_row

LANES = np.arange(64)
_SIZES = {"byte": 1, "ubyte": 1, "sbyte": 1, "ushort": 2, "short": 2, "dword": 4, "dwordx2": 8, "dwordx3": 12, "dwordx4": 16}


def _size(mnemonic: str) -> int:
    return _SIZES[mnemonic.rsplit("_", 1)[1]]


# ---- shared checks ----
def _check_bounds(wave, ins, address: np.ndarray, lanes: np.ndarray, nbytes: int) -> np.ndarray:
    """Lanes whose [address, address + nbytes) is inside some tensor argument; reports the others."""
    memory = wave.machine.memory
    bad = memory.out_of_bounds(address, nbytes)
    if bad.any():
        where = lanes[bad]
        first = int(address[bad][0])
        wave.machine.violation(wave, "out of bounds",
                               f"{nbytes}-byte access at device address {first:#x} lies in no tensor argument "
                               f"({_nearest(memory, first)})", ins, where)
    return ~bad


def _nearest(memory, address: int) -> str:
    best = None
    for ext in memory.extents:
        gap = address - ext.hi if address >= ext.hi else ext.lo - address
        if best is None or gap < best[0]:
            best = (gap, ext)
    if best is None:
        return "no tensor mapped"
    gap, ext = best
    side = "past the end of" if address >= ext.hi else "before"
    return f"{gap} bytes {side} `{ext.name}` [{ext.lo:#x}, {ext.hi:#x})"


def _visible_bytes(wave, ins, data: np.ndarray, writers: np.ndarray, addresses: np.ndarray) -> np.ndarray:
    """Applies the ordering rules to bytes just read: each byte whose latest store the
    reading wave may not see yet is reported and replaced by what it held before."""
    if (writers < 0).all():
        return data
    memory = wave.machine.memory
    for record_index in np.unique(writers[writers >= 0]):
        record = memory.stores[record_index]
        problem = _ordering_problem(wave, record)
        if problem is None:
            continue
        where = writers == record_index
        wave.machine.violation(wave, "stale global read",
                               f"reads bytes stored at line {record.ins.line} `{record.ins.text}` by workgroup "
                               f"{record.wave.workgroup.ids} wave {record.wave.index}, {problem}", ins)
        data = data.copy()
        data[where] = memory.old_bytes(record_index, addresses[where])
    return data


def _ordering_problem(reader, record) -> str | None:
    writer = record.wave
    if record.atomic or writer is reader:
        return None
    if writer.workgroup is reader.workgroup:
        if record.completed_at is None:
            return "a store still in flight (no s_waitcnt of its wave retired it)"
        if not reader.knows(writer.index, record.completed_at):
            return "with no s_barrier between its completion and this read"
        return None
    if record.completed_at is None:
        return "which its wave never waited for (still in flight)"
    if record.released_at is None:
        return "which no release (buffer_wbl2 sc1 after the wave's wait) made visible to other workgroups"
    if reader.acquired_at <= record.released_at:
        return "with no acquire (buffer_inv sc1) in this workgroup after the release"
    return None


def _byte_addresses(address: np.ndarray, nbytes: int) -> np.ndarray:
    return (address[:, None] + np.arange(nbytes)).reshape(-1)


def _load_global(wave, ins, address, lanes, nbytes):
    """[lanes, nbytes] bytes read by the in-bounds lanes (zeros for the others)."""
    ok = _check_bounds(wave, ins, address, lanes, nbytes)
    data = np.zeros((address.shape[0], nbytes), dtype=np.uint8)
    if ok.any():
        got, writers = wave.machine.memory.read(address[ok], nbytes)
        got = _visible_bytes(wave, ins, got, writers, (address[ok][:, None] + np.arange(nbytes)))
        data[ok] = got
    return data


def _store_global(wave, ins, address, lanes, data):
    """Writes data [lanes, nbytes]; the store completes when a wait retires it."""
    nbytes = data.shape[1]
    ok = _check_bounds(wave, ins, address, lanes, nbytes)
    machine = wave.machine
    memory = machine.memory
    if not ok.any():
        return None
    from ..memory import StoreRecord
    addresses = _byte_addresses(address[ok], nbytes)
    order = np.argsort(addresses, kind="stable")
    record = StoreRecord(wave, addresses[order], np.zeros(0, dtype=np.uint8), machine.time)
    record.ins = ins
    index = len(memory.stores)
    memory.stores.append(record)
    old = memory.write(address[ok], data[ok], index)
    record.old = old.reshape(-1)[order]
    machine.unreleased.setdefault(wave.workgroup.linear, []).append(record)
    return record


def _deliver(rows, data):
    """A completion writing data [64, nbytes] (little-endian dwords) to vector rows, active lanes."""
    def complete(wave, mask=None):
        words = data.view(np.uint32) if data.shape[1] % 4 == 0 else None
        if words is None:
            value = np.zeros(64, dtype=U32)
            for i in range(data.shape[1]):
                value |= data[:, i].astype(U32) << U32(8 * i)
            words = value[:, None]
        for j, row in enumerate(rows):
            np.copyto(wave.v[row], words[:, j], where=True if mask is None else mask)
    return complete


def _issue_vector_load(wave, ins, rows, data, active):
    keys = tuple(1000 + r for r in rows)
    deliver = _deliver(rows, data)
    wave.issue(PendingOp(keys, lambda w: deliver(w, active), ins, wave.machine.time), "vm")


# ---- SMEM ----
def _compile_s_load(ins, kernel):
    check_modifiers(ins, set())
    dst = ins.operands[0].value
    nbytes = 4 * dst.count
    if 4 * {"dword": 1, "dwordx2": 2, "dwordx4": 4, "dwordx8": 8, "dwordx16": 16}[ins.mnemonic.rsplit("_", 1)[1]] \
            != nbytes:
        raise NotImplementedInstruction("s_load destination size")
    base = scalar_reader(ins.operands[1], "b64")
    offset = scalar_reader(ins.operands[2], "b32")
    index = dst.index

    def run(wave):
        address = np.array([(base(wave) + offset(wave)) & ~3], dtype=np.int64)
        data = _load_global(wave, ins, address, np.array([0]), nbytes)
        words = data.view(np.uint32)[0].copy()

        def complete(w):
            w.s[index:index + dst.count] = words
        wave.issue(PendingOp(tuple(range(index, index + dst.count)), complete, ins, wave.machine.time,
                             scalar=True), "lgkm")
    return run, 1


register("s_load_dword", "s_load_dwordx2", "s_load_dwordx4", "s_load_dwordx8")(_compile_s_load)


# ---- global ----
def _global_address(ins, vaddr_index: int):
    """fn(wave) -> 64 device addresses: saddr + zero-extended 32-bit vaddr + offset, or the
    64-bit vaddr + offset when saddr is `off`."""
    offset = ins.modifiers.get("offset", 0)
    data_follows = "_store_" in ins.mnemonic or "_atomic_" in ins.mnemonic   # vaddr, vdata, saddr
    saddr = ins.operands[vaddr_index + (2 if data_follows else 1)]
    vaddr = ins.operands[vaddr_index]
    if saddr.value == "off":
        read = vector_reader(vaddr, "b64")
        return lambda wave: read(wave).astype(np.int64) + offset
    base = scalar_reader(saddr, "b64")
    read = vector_reader(vaddr, "b32")
    return lambda wave: base(wave) + read(wave).astype(np.int64) + offset


def _compile_global_load(ins, kernel):
    check_modifiers(ins, {"offset", "nt", "sc0", "sc1"})
    nbytes = _size(ins.mnemonic)
    rows = list(range(vgpr_row(ins.operands[0]), vgpr_row(ins.operands[0]) + max(1, nbytes // 4)))
    address_of = _global_address(ins, 1)

    def run(wave):
        active = wave.exec.copy()
        lanes = LANES[active]
        address = nm.lanes(address_of(wave))[active]
        data = np.zeros((64, nbytes), dtype=np.uint8)
        data[active] = _load_global(wave, ins, address, lanes, nbytes)
        _issue_vector_load(wave, ins, rows, data, active)
    return run, 1


def _vector_bytes(wave, row: int, nbytes: int) -> np.ndarray:
    words = max(1, nbytes // 4)
    return np.ascontiguousarray(wave.v[row:row + words].T).view(np.uint8)[:, :nbytes]


def _issue_store_completion(wave, ins, record):
    def complete(w):
        if record is not None:
            record.completed_at = w.machine.time
    wave.issue(PendingOp((), complete, ins, wave.machine.time), "vm")


def _compile_global_store(ins, kernel):
    check_modifiers(ins, {"offset", "nt", "sc0", "sc1"})
    nbytes = _size(ins.mnemonic)
    data_row = vgpr_row(ins.operands[1])
    address_of = _global_address(ins, 0)

    def run(wave):
        active = wave.exec.copy()
        address = nm.lanes(address_of(wave))[active]
        data = _vector_bytes(wave, data_row, nbytes)[active]
        record = _store_global(wave, ins, address, LANES[active], data)
        _issue_store_completion(wave, ins, record)
    return run, 0


@register("global_atomic_add")
def _global_atomic_add(ins, kernel):
    check_modifiers(ins, {"offset", "sc0", "sc1", "nt"})
    returns = bool(ins.modifiers.get("sc0"))
    first = 1 if returns else 0
    data_row = vgpr_row(ins.operands[first + 1])
    address_of = _global_address(ins, first)
    dst_row = vgpr_row(ins.operands[0]) if returns else None

    def run(wave):
        active = wave.exec.copy()
        old = _atomic_add_lanes(wave, ins, nm.lanes(address_of(wave)), active, wave.v[data_row], active)
        if returns:
            data = old.view(np.uint8).reshape(64, 4).copy()
            _issue_vector_load(wave, ins, [dst_row], data, active)
        else:
            wave.issue(PendingOp((), lambda w: None, ins, wave.machine.time), "vm")
    return run, (1 if returns else 0)


register(*(f"global_load_{size}" for size in ("ubyte", "ushort", "dword", "dwordx2", "dwordx3", "dwordx4")))(
    _compile_global_load)
register(*(f"global_store_{size}" for size in ("byte", "short", "dword", "dwordx2", "dwordx3", "dwordx4")))(
    _compile_global_store)


# ---- buffer ----
def _descriptor_reader(op):
    index = sgpr_index(op)
    if op.value.count != 4:
        raise NotImplementedInstruction("a buffer descriptor needs 4 SGPRs")

    def read(wave):
        w = [int(x) for x in wave.s[index:index + 4]]
        base = w[0] | ((w[1] & 0xFFFF) << 32)
        stride = (w[1] >> 16) & 0x3FFF
        swizzle = (w[1] >> 31) & 1
        add_tid = (w[3] >> 23) & 1
        if stride or swizzle or add_tid:
            raise NotImplementedInstruction(f"buffer descriptor with stride {stride}, swizzle {swizzle}, "
                                            f"add_tid {add_tid} (only raw buffers are emulated)")
        return base, w[2]
    return read


def _buffer_operands(ins, first):
    """(voffset reader, descriptor reader, soffset reader) for a MUBUF instruction whose
    vaddr is operand `first`."""
    if not ins.modifiers.get("offen") or ins.modifiers.get("idxen"):
        raise NotImplementedInstruction("buffer addressing other than offen")
    voffset = vector_reader(ins.operands[first], "b32")
    descriptor = _descriptor_reader(ins.operands[first + 1])
    soffset = scalar_reader(ins.operands[first + 2], "b32")
    return voffset, descriptor, soffset


def _buffer_lanes(wave, ins, voffset, descriptor, soffset, nbytes):
    """(active lanes, their device addresses, in range [64, dwords]) of a raw-buffer access:
    each dword (or the whole access, below 4 bytes) is in range when voffset + offset + its
    end is at most num_records (soffset is not range-checked)."""
    base, num_records = descriptor(wave)
    offset = nm.lanes(voffset(wave), np.int64) + ins.modifiers.get("offset", 0)
    active = wave.exec.copy()
    ends = np.minimum(4 * np.arange(1, max(1, nbytes // 4) + 1), nbytes)
    in_range = offset[:, None] + ends[None, :] <= num_records
    address = base + soffset(wave) + offset
    return active, address, in_range


def _dword_mask(in_range: np.ndarray, nbytes: int) -> np.ndarray:
    """[64, nbytes] bytes in range, from the per-dword range check."""
    return np.repeat(in_range, 4, axis=1)[:, :nbytes] if nbytes >= 4 else np.repeat(in_range, nbytes, axis=1)


def _buffer_read(wave, ins, active, address, in_range, nbytes):
    """[64, nbytes] bytes a buffer load returns: zeros for out-of-range dwords."""
    data = np.zeros((64, nbytes), dtype=np.uint8)
    any_dword = active & in_range.any(axis=1)
    if any_dword.any():
        # the lane's in-range part is read (a lane straddling num_records reads its first dwords)
        whole = active & in_range.all(axis=1)
        if whole.any():
            data[whole] = _load_global(wave, ins, address[whole], LANES[whole], nbytes)
        for lane in np.flatnonzero(any_dword & ~whole):
            keep = _dword_mask(in_range[lane:lane + 1], nbytes)[0]
            got = _load_global(wave, ins, address[lane:lane + 1], LANES[lane:lane + 1], nbytes)[0]
            data[lane] = np.where(keep, got, 0)
    return data


def _compile_buffer_load(ins, kernel):
    check_modifiers(ins, {"offset", "offen", "sc0", "sc1", "nt", "lds"})
    nbytes = _size(ins.mnemonic)
    if ins.modifiers.get("lds"):
        return _compile_buffer_load_lds(ins, nbytes)
    rows = list(range(vgpr_row(ins.operands[0]), vgpr_row(ins.operands[0]) + max(1, nbytes // 4)))
    voffset, descriptor, soffset = _buffer_operands(ins, 1)

    def run(wave):
        active, address, in_range = _buffer_lanes(wave, ins, voffset, descriptor, soffset, nbytes)
        data = _buffer_read(wave, ins, active, address, in_range, nbytes)
        if nbytes < 4:
            padded = np.zeros((64, 4), dtype=np.uint8)
            padded[:, :nbytes] = data
            data = padded
        _issue_vector_load(wave, ins, rows, data, active)
    return run, 1


def _compile_buffer_store(ins, kernel):
    check_modifiers(ins, {"offset", "offen", "sc0", "sc1", "nt"})
    nbytes = _size(ins.mnemonic)
    data_row = vgpr_row(ins.operands[0])
    voffset, descriptor, soffset = _buffer_operands(ins, 1)

    def run(wave):
        active, address, in_range = _buffer_lanes(wave, ins, voffset, descriptor, soffset, nbytes)
        if (active & in_range.any(axis=1) & ~in_range.all(axis=1)).any():
            raise NotImplementedInstruction("a buffer store straddling num_records")
        writes = active & in_range.all(axis=1)
        data = _vector_bytes(wave, data_row, nbytes)
        record = _store_global(wave, ins, address[writes], LANES[writes], data[writes])
        _issue_store_completion(wave, ins, record)
    return run, 0


register(*(f"buffer_load_{size}" for size in ("ubyte", "ushort", "dword", "dwordx2", "dwordx3", "dwordx4")))(
    _compile_buffer_load)
register(*(f"buffer_store_{size}" for size in ("byte", "short", "dword", "dwordx2", "dwordx3", "dwordx4")))(
    _compile_buffer_store)


def _compile_buffer_load_lds(ins, nbytes):
    """A buffer load into LDS: lane l's nbytes land at LDS address M0 + offset + l * 4 (16 for
    the 12- and 16-byte loads) when the load's vmcnt is retired; out-of-range dwords write
    zeros (Triton's lowering relies on that; the kernels here clamp instead of masking)."""
    voffset, descriptor, soffset = _buffer_operands(ins, 0)
    inst_offset = ins.modifiers.get("offset", 0)
    lane_stride = 4 if nbytes <= 4 else 16

    def run(wave):
        active, address, in_range = _buffer_lanes(wave, ins, voffset, descriptor, soffset, nbytes)
        data = _buffer_read(wave, ins, active, address, in_range, nbytes)
        if not wave.m0_written:
            wave.machine.violation(wave, "uninitialized register", "a load into LDS reads M0, which no "
                                   "instruction of the wave has written (its initial value is undefined)", ins)
        lds_base = int(wave.s[124]) & 0x3FFFF
        lds_address = lds_base + inst_offset + LANES * lane_stride
        lds_write(wave, ins, lds_address[active], data[active], path=2)
    return run, 0


@register("buffer_atomic_add")
def _buffer_atomic_add(ins, kernel):
    """buffer_atomic_add vdata, voffset, srsrc, soffset offen [sc0: returns the old value
    into vdata]: performed at issue, lane by lane, coherently; out-of-range lanes do nothing."""
    check_modifiers(ins, {"offset", "offen", "sc0", "sc1", "nt"})
    returns = bool(ins.modifiers.get("sc0"))
    data_row = vgpr_row(ins.operands[0])
    voffset, descriptor, soffset = _buffer_operands(ins, 1)

    def run(wave):
        active, address, in_range = _buffer_lanes(wave, ins, voffset, descriptor, soffset, 4)
        lanes = active & in_range[:, 0]
        old = _atomic_add_lanes(wave, ins, address, lanes, wave.v[data_row], active)
        if returns:
            _issue_vector_load(wave, ins, [data_row], old.view(np.uint8).reshape(64, 4).copy(), active)
        else:
            wave.issue(PendingOp((), lambda w: None, ins, wave.machine.time), "vm")
    return run, (1 if returns else 0)


def _atomic_add_lanes(wave, ins, address, lanes, data, active) -> np.ndarray:
    """Adds data[lane] at address[lane] for each lane in order (one address may take several
    lanes); returns each lane's old value. The machine records the issue (the wave's active
    lanes, those performed)."""
    from ..memory import StoreRecord
    memory = wave.machine.memory
    old = np.zeros(64, dtype=U32)
    where = np.flatnonzero(lanes)
    ok = _check_bounds(wave, ins, address[where], where, 4)
    wave.machine.record_atomic(wave, ins, int(active.sum()), int(np.count_nonzero(ok)))
    for lane, good in zip(where, ok):
        if not good:
            continue
        a = np.array([address[lane]])
        current, _ = memory.read(a, 4)
        value = int(current.view(np.uint32)[0, 0])
        old[lane] = value
        new = np.array([(value + int(data[lane])) & 0xFFFFFFFF], dtype=np.uint32)
        record = StoreRecord(wave, _byte_addresses(a, 4), current.reshape(-1).copy(), wave.machine.time,
                             atomic=True, ins=ins)
        memory.stores.append(record)
        memory.write(a, new.view(np.uint8).reshape(1, 4), len(memory.stores) - 1)
    return old


@register("buffer_wbl2")
def _wbl2(ins, kernel):
    """The agent-scope write-back: it reaches L2 after the wave's earlier vector memory
    operations (they are in order), so it releases the wave's own earlier stores, and the
    stores of other waves that completed before an s_barrier this wave passed since; the
    release takes effect when a wait retires the write-back."""
    check_modifiers(ins, {"sc0", "sc1"})
    if not ins.modifiers.get("sc1"):
        raise NotImplementedInstruction("buffer_wbl2 without sc1 (only the agent-scope write-back is emulated)")

    def run(wave):
        machine = wave.machine
        records = machine.unreleased.get(wave.workgroup.linear, [])
        covered = [r for r in records if r.wave is wave or
                   (r.completed_at is not None and wave.knows(r.wave.index, r.completed_at))]

        def complete(w):
            for r in covered:
                if r.released_at is None:
                    r.released_at = w.machine.time
            remaining = [r for r in machine.unreleased.get(w.workgroup.linear, []) if r.released_at is None]
            machine.unreleased[w.workgroup.linear] = remaining
        wave.issue(PendingOp((), complete, ins, machine.time), "vm")
    return run, 0


@register("buffer_inv")
def _inv(ins, kernel):
    check_modifiers(ins, {"sc0", "sc1"})
    if not ins.modifiers.get("sc1"):
        raise NotImplementedInstruction("buffer_inv without sc1 (only the agent-scope invalidate is emulated)")

    def run(wave):
        def complete(w):
            w.acquired_at = w.machine.time
        wave.issue(PendingOp((), complete, ins, wave.machine.time), "vm")
    return run, 0


# ---- LDS ----
_op_ids = iter(range(1, 1 << 62))


def lds_write(wave, ins, address: np.ndarray, data: np.ndarray, path: int):
    """Writes data [n, nbytes] at LDS addresses (path 1: a DS write, whose data LDS applies
    in order for its own wave; path 2: a buffer load into LDS, whose data lands at its
    completion)."""
    lds = wave.workgroup.lds
    nbytes = data.shape[1]
    bad = lds.out_of_range(address, nbytes)
    if bad.any():
        wave.machine.violation(wave, "lds out of range",
                               f"{nbytes}-byte LDS access at {int(address[bad][0])} outside the kernel's "
                               f"{lds.size} bytes", ins, np.flatnonzero(bad))
        address, data = address[~bad], data[~bad]
    positions = _byte_addresses(address, nbytes)
    values = data.reshape(-1)
    _check_lds_write(wave, ins, lds, positions, path)
    op_id = next(_op_ids)
    lds.pending[positions] = op_id
    lds.pending_wave[positions] = wave.index
    lds.pending_path[positions] = path
    if path == 1:
        lds.data[positions] = values

    def complete(w):
        mine = lds.pending[positions] == op_id
        p = positions[mine]
        if path == 2:
            lds.data[p] = values[mine]
        lds.pending[p] = -1
        lds.writer_wave[p] = w.index
        lds.written_at[p] = w.machine.time
    wave.issue(PendingOp((), complete, ins, wave.machine.time), "vm" if path == 2 else "lgkm")


def _check_lds_write(wave, ins, lds, positions, path):
    if lds.readers[positions].any():
        for op_id, reader, read_path, read_positions in lds.reads_in_flight:
            if reader == wave.index and read_path == path:
                continue
            if np.intersect1d(read_positions, positions).size:
                wave.machine.violation(wave, "lds race", f"writes LDS bytes that wave {reader}'s read "
                                       f"is still reading (no wait or barrier in between)", ins)
                break
    pending = lds.pending[positions]
    if (pending >= 0).any():
        other = (lds.pending_wave[positions] != wave.index) | (lds.pending_path[positions] != path)
        if (other & (pending >= 0)).any():
            wave.machine.violation(wave, "lds race", "writes LDS bytes another write still has in flight", ins)


def lds_read(wave, ins, address: np.ndarray, nbytes: int):
    """([n, nbytes] bytes read at LDS addresses, checked for races; release(wave)): the read
    stays in flight, for the write-after-read checks, until the caller's completion calls
    release."""
    lds = wave.workgroup.lds
    out = np.zeros((address.shape[0], nbytes), dtype=np.uint8)
    bad = lds.out_of_range(address, nbytes)
    if bad.any():
        wave.machine.violation(wave, "lds out of range",
                               f"{nbytes}-byte LDS read at {int(address[bad][0])} outside the kernel's "
                               f"{lds.size} bytes", ins, np.flatnonzero(bad))
    good = ~bad
    positions = _byte_addresses(address[good], nbytes)
    pending = lds.pending[positions]
    if (pending >= 0).any():
        foreign = (pending >= 0) & ((lds.pending_wave[positions] != wave.index) | (lds.pending_path[positions] != 1))
        if foreign.any():
            p = positions[foreign][0]
            wave.machine.violation(wave, "lds race",
                                   f"reads LDS byte {int(p)} while a write to it is still in flight "
                                   f"({'a buffer load into LDS' if lds.pending_path[p] == 2 else 'a DS write'} "
                                   f"of wave {int(lds.pending_wave[p])} that no wait has retired)", ins)
    writer = lds.writer_wave[positions]
    foreign = (writer >= 0) & (writer != wave.index) & (pending < 0)
    if foreign.any():
        for w in np.unique(writer[foreign]):
            latest = lds.written_at[positions][foreign & (writer == w)].max()
            if not wave.knows(int(w), int(latest)):
                wave.machine.violation(wave, "lds race", f"reads LDS bytes wave {int(w)} wrote with no "
                                       f"s_barrier after its write completed", ins)
                break
    out[good] = lds.data[positions].reshape(-1, nbytes)
    op_id = next(_op_ids)
    lds.readers[positions] += 1   # a position read twice by one read counts once, both ways
    entry = (op_id, wave.index, 1, positions)
    lds.reads_in_flight.append(entry)

    def release(w):
        lds.readers[positions] -= 1
        lds.reads_in_flight.remove(entry)
    return out, release


def _ds_offsets(ins, base: str):
    m = ins.modifiers
    if base.startswith(("ds_read2", "ds_write2")):
        unit = 8 if base.endswith("b64") else 4
        if "st64" in base:
            unit *= 64
        return (m.get("offset0", 0) * unit, m.get("offset1", 0) * unit)
    return (m.get("offset", 0),)


def _compile_ds_read(ins, kernel):
    check_modifiers(ins, {"offset", "offset0", "offset1"})
    name = ins.mnemonic
    if name.startswith("ds_read2"):
        elem = 8 if name.endswith("b64") else 4
    else:
        elem = {"ds_read_b32": 4, "ds_read_b64": 8, "ds_read_b128": 16, "ds_read_u8": 1, "ds_read_u16": 2}[name]
    offsets = _ds_offsets(ins, name)
    dst = ins.operands[0].value
    rows = list(range(dst.row, dst.row + dst.count))
    addr = vector_reader(ins.operands[1], "b32")
    total = elem * len(offsets)
    if max(1, total // 4) != len(rows):
        raise NotImplementedInstruction("destination size")

    def run(wave):
        active = wave.exec.copy()
        base = nm.lanes(addr(wave), np.int64)[active]
        reads = [lds_read(wave, ins, base + off, elem) for off in offsets]
        data = np.zeros((64, max(4, total)), dtype=np.uint8)
        data[active, :total] = np.concatenate([part for part, _ in reads], axis=1)
        deliver = _deliver(rows, data)

        def complete(w):
            deliver(w, active)
            for _, release in reads:
                release(w)
        wave.issue(PendingOp(tuple(1000 + r for r in rows), complete, ins, wave.machine.time), "lgkm")
    return run, 1


register("ds_read_b32", "ds_read_b64", "ds_read_b128", "ds_read_u8", "ds_read_u16", "ds_read2_b32", "ds_read2_b64",
         "ds_read2st64_b32", "ds_read2st64_b64")(_compile_ds_read)


def _compile_ds_write(ins, kernel):
    check_modifiers(ins, {"offset", "offset0", "offset1"})
    name = ins.mnemonic
    offsets = _ds_offsets(ins, name)
    addr = vector_reader(ins.operands[0], "b32")
    if name.startswith("ds_write2"):
        elem = 8 if name.endswith("b64") else 4
        sources = [(vgpr_row(ins.operands[1]), 0), (vgpr_row(ins.operands[2]), 0)]
    else:
        elem = {"ds_write_b8": 1, "ds_write_b8_d16_hi": 1, "ds_write_b16": 2, "ds_write_b16_d16_hi": 2,
                "ds_write_b32": 4, "ds_write_b64": 8, "ds_write_b96": 12, "ds_write_b128": 16}[name]
        sources = [(vgpr_row(ins.operands[1]), 2 if name.endswith("d16_hi") else 0)]  # d16_hi: from bits 16 up

    def run(wave):
        active = wave.exec.copy()
        base = nm.lanes(addr(wave), np.int64)[active]
        for (row, skip), off in zip(sources, offsets):
            words = max(1, elem // 4)
            raw = np.ascontiguousarray(wave.v[row:row + words].T).view(np.uint8)[:, skip:skip + elem]
            lds_write(wave, ins, base + off, raw[active], path=1)
    return run, 0


register("ds_write_b8", "ds_write_b8_d16_hi", "ds_write_b96", "ds_write_b16", "ds_write_b16_d16_hi", "ds_write_b32", "ds_write_b64", "ds_write_b128",
         "ds_write2_b32", "ds_write2_b64", "ds_write2st64_b32", "ds_write2st64_b64")(_compile_ds_write)


@register("ds_bpermute_b32")
def _bpermute(ins, kernel):
    check_modifiers(ins, {"offset"})
    dst = vgpr_row(ins.operands[0])
    addr = vector_reader(ins.operands[1], "b32")
    data_row = vgpr_row(ins.operands[2])
    offset = ins.modifiers.get("offset", 0)

    def run(wave):
        _gather_lanes(wave, ins, dst, data_row, ((nm.lanes(addr(wave), np.int64) + offset) // 4) % 64)
    return run, 1


def _gather_lanes(wave, ins, dst: int, data_row: int, src: np.ndarray):
    """An LDS-pipe cross-lane read: each active lane of row dst gets lane src[i] of
    data_row (0 where that lane is inactive), when lgkmcnt retires it."""
    values = np.where(wave.exec[src], wave.v[data_row][src], U32(0))
    active = wave.exec.copy()

    def complete(w):
        np.copyto(w.v[dst], values, where=active)
    wave.issue(PendingOp((1000 + dst,), complete, ins, wave.machine.time), "lgkm")


_SWAP = re.compile(r"swizzle\(SWAP,(\d+)\)$")


@register("ds_swizzle_b32")
def _swizzle(ins, kernel):
    """Bitmask mode (the kernels' swizzle(SWAP, n) is and 0x1f, or 0, xor n): within each
    32 lanes, lane i reads lane ((i & and) | or) ^ xor; an inactive source reads 0."""
    check_modifiers(ins, {"swizzle", "offset"})
    if "swizzle" in ins.modifiers:
        m = _SWAP.match(ins.modifiers["swizzle"])
        if not m:
            raise NotImplementedInstruction(f"ds_swizzle offset {ins.modifiers['swizzle']}")
        offset = 0x1F | (int(m.group(1)) << 10)
    else:
        offset = ins.modifiers.get("offset", 0)
    if offset & 0x8000:
        raise NotImplementedInstruction(f"ds_swizzle offset {offset:#x} (quad-perm / FFT / rotate modes)")
    and_mask, or_mask, xor_mask = offset & 0x1F, (offset >> 5) & 0x1F, (offset >> 10) & 0x1F
    dst = vgpr_row(ins.operands[0])
    data_row = vgpr_row(ins.operands[1])
    src = (LANES & ~31) | (((LANES & and_mask) | or_mask) ^ xor_mask)

    def run(wave):
        _gather_lanes(wave, ins, dst, data_row, src)
    return run, 1


def _compile_ds_read_tr(ins, kernel):
    """ds_read_b64_tr_b8 / _b16 (gfx950): each lane reads 8 bytes at its address, n elements
    (8 of b8, 4 of b16); within each group of 16 lanes those 16 x n elements are the rows of a
    tile (n rows by 16 columns, row j held by lanes (16 / n) j .. in column order), and lane
    i receives column i: element j of lane i is element i % n of lane (16 / n) j + i // n."""
    check_modifiers(ins, {"offset"})
    bits = 8 if ins.mnemonic.endswith("b8") else 16
    n = 64 // bits
    per_row = 16 // n
    dst = ins.operands[0].value
    if dst.count != 2:
        raise NotImplementedInstruction("destination size")
    rows = [dst.row, dst.row + 1]
    addr = vector_reader(ins.operands[1], "b32")
    offset = ins.modifiers.get("offset", 0)
    i = np.arange(16)
    j = np.arange(n)
    source_lane = per_row * j[None, :] + (i[:, None] // n)          # [16 out lanes, n]
    source_element = np.broadcast_to((i % n)[:, None], (16, n))
    group = (LANES // 16) * 16

    def run(wave):
        if not wave.exec_all:
            raise NotImplementedInstruction("a transpose read with a partial EXEC")
        base = nm.lanes(addr(wave), np.int64) + offset
        if (base % 8).any():
            wave.machine.violation(wave, "misaligned lds access", "a transpose read's address is not 8-byte "
                                   "aligned (the ISA requires it aligned to the data size)", ins,
                                   np.flatnonzero(base % 8))
        raw, release = lds_read(wave, ins, base, 8)                          # [64, 8] bytes
        elements = raw.view(np.uint8 if bits == 8 else np.uint16)           # [64, n]
        out_lane = LANES % 16
        picked = elements[group[:, None] + source_lane[out_lane], source_element[out_lane]]   # [64, n]
        data = np.ascontiguousarray(picked).view(np.uint8).reshape(64, 8)
        deliver = _deliver(rows, data)

        def complete(w):
            deliver(w, None)
            release(w)
        wave.issue(PendingOp((1000 + rows[0], 1000 + rows[1]), complete, ins, wave.machine.time), "lgkm")
    return run, 1


register("ds_read_b64_tr_b8", "ds_read_b64_tr_b16")(_compile_ds_read_tr)
