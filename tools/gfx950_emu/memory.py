"""Global memory and LDS, with the checks that make the emulator more than a calculator.

Global memory is the CPU tensors themselves: each tensor argument's storage is mapped at a
device address of its own (64 GiB apart, so that an address run off one tensor lands in no
other), and every access must fall inside the EXTENT of some tensor argument (the bytes
its view spans, not its whole storage), else it is an out-of-bounds violation naming the
lane. A byte's latest store is remembered, with the bytes it replaced, so that a read can
be checked against the ordering rules and, when it breaks them, see the old bytes:

- a store COMPLETES when its wave's `s_waitcnt vmcnt` retires it (never sooner: loads and
  stores land as late as their waits allow);
- it is RELEASED when, after it completed, a wave that knows of the completion (the storing
  wave itself, or one that passed an s_barrier after the storing wave completed it) runs a
  `buffer_wbl2 sc1` that completes;
- another workgroup may read it once it is released and the reader has ACQUIRED after that
  (its own `buffer_inv sc1`, or one a wave of its workgroup ran before an s_barrier the
  reader passed); another wave of the same workgroup once it completed and a barrier lies
  between (the same rule as LDS); the storing wave itself at once.

Workgroups run one after another in launch order (see machine.py), so "acquired after the
release" holds whenever both happened; an atomic read-modify-write is performed at issue,
coherently (it is the synchronization), and is not subject to these checks.

LDS: one allocation per workgroup of the kernel's `shared` bytes; an access outside it is a
violation. A write lands when its wave's wait retires it (`lgkmcnt` for ds_write, `vmcnt`
for a buffer load into LDS); a read of bytes with a write still in flight (other than the
same wave's own earlier ds_write, which LDS orders), or written by another wave with no
barrier after the write completed, is a race, as is a write to bytes another wave's read (or
the same wave's read on the other path) still has in flight."""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

DEVICE_BASE = 0x1000_0000_0000   # where the first mapped storage goes
REGION_SPACING = 1 << 36          # 64 GiB between storages: a runaway address hits nothing
POISON_BYTE = 0xFF               # what unwritten LDS holds


@dataclasses.dataclass
class Extent:
    lo: int        # first byte (device address)
    hi: int        # one past the last byte
    name: str      # the argument's name


class Region:
    """One storage mapped at `base`: its bytes (a uint8 view of the tensor storage) and, per
    byte, the index of the latest store record (-1: none)."""

    def __init__(self, base: int, data: np.ndarray, name: str):
        self.base = base
        self.data = data
        self.name = name
        self.writer = np.full(data.shape[0], -1, dtype=np.int64)


@dataclasses.dataclass
class StoreRecord:
    """One store (or the bytes of one atomic) of one wave: which bytes, what they held before."""
    wave: object            # the storing Wave
    addresses: np.ndarray   # sorted absolute byte addresses written
    old: np.ndarray         # uint8, the bytes they held before, same order
    issued_at: int
    completed_at: int | None = None
    released_at: int | None = None
    atomic: bool = False
    ins: object = None      # the storing instruction


def _storage_bytes(tensor: torch.Tensor) -> np.ndarray:
    storage = tensor.untyped_storage()
    raw = torch.empty(0, dtype=torch.uint8).set_(storage)
    return raw.numpy()


def tensor_extent_bytes(tensor: torch.Tensor) -> tuple[int, int]:
    """(first byte offset in its storage, bytes spanned) of a view: from its first element to
    one past its last, along its strides."""
    size = tensor.element_size()
    first = tensor.storage_offset() * size
    if tensor.numel() == 0:
        return first, 0
    last = sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride()) if n > 0) * size
    if any(s < 0 for s in tensor.stride()):
        raise ValueError("negative strides are not mapped")
    return first, last + size


class GlobalMemory:
    """The device address space of one emulated launch sequence."""

    def __init__(self):
        self.regions: list[Region] = []
        self.extents: list[Extent] = []
        self.stores: list[StoreRecord] = []
        self._by_storage: dict[int, Region] = {}
        self._bases = np.zeros(0, dtype=np.int64)

    # ---- mapping ----
    def map_tensor(self, tensor: torch.Tensor, name: str) -> int:
        """The device address of `tensor`'s first element; its view's extent becomes legal."""
        if tensor.device.type != "cpu":
            raise ValueError(f"{name}: the emulator's memory is CPU tensors, got {tensor.device}")
        key = tensor.untyped_storage().data_ptr()
        region = self._by_storage.get(key)
        if region is None:
            base = DEVICE_BASE + len(self.regions) * REGION_SPACING
            # keep the storage's alignment modulo 256 (the JIT specialized on real pointers)
            base += key % 256
            region = Region(base, _storage_bytes(tensor), name)
            self.regions.append(region)
            self._by_storage[key] = region
            self._bases = np.array([r.base for r in self.regions], dtype=np.int64)
        first, span = tensor_extent_bytes(tensor)
        address = region.base + first
        if span and not any(e.lo == address and e.hi == address + span for e in self.extents):
            self.extents.append(Extent(address, address + span, name))
        return address

    def map_bytes(self, data: np.ndarray, name: str) -> int:
        """Maps a host byte array (the kernarg segment) as its own region, wholly legal."""
        base = DEVICE_BASE + len(self.regions) * REGION_SPACING
        region = Region(base, data, name)
        self.regions.append(region)
        self._bases = np.array([r.base for r in self.regions], dtype=np.int64)
        self.extents.append(Extent(base, base + data.shape[0], name))
        return base

    # ---- checks ----
    def out_of_bounds(self, start: np.ndarray, nbytes: int) -> np.ndarray:
        """Per address, whether [a, a + nbytes) lies outside every argument's extent."""
        end = start + nbytes
        if start.shape[0]:
            lo, hi = int(start.min()), int(end.max())
            for ext in self.extents:   # the usual case: every lane inside one argument
                if ext.lo <= lo and hi <= ext.hi:
                    return np.zeros(start.shape, dtype=bool)
        bad = np.ones(start.shape, dtype=bool)
        for ext in self.extents:
            bad &= ~((start >= ext.lo) & (end <= ext.hi))
        return bad

    def locate(self, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(region index, offset in it) of each address; assumes the bounds check passed."""
        index = np.searchsorted(self._bases, start, side="right") - 1
        return index, start - self._bases[index]

    # ---- data ----
    def read(self, start: np.ndarray, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
        """(bytes [n, nbytes] uint8, latest store record index of each byte [n, nbytes])."""
        out = np.zeros((start.shape[0], nbytes), dtype=np.uint8)
        writers = np.full((start.shape[0], nbytes), -1, dtype=np.int64)
        if start.shape[0] == 0:
            return out, writers
        for rows, region, positions in self._spans(start, nbytes):
            out[rows] = region.data[positions]
            writers[rows] = region.writer[positions]
        return out, writers

    def write(self, start: np.ndarray, data: np.ndarray, record_index: int) -> np.ndarray:
        """Writes data [n, nbytes]; returns the replaced bytes, same shape."""
        old = np.zeros_like(data)
        for rows, region, positions in self._spans(start, data.shape[1]):
            old[rows] = region.data[positions]
            region.data[positions] = data[rows]
            region.writer[positions] = record_index
        return old

    def _spans(self, start: np.ndarray, nbytes: int):
        """Per mapped region the accesses fall in: (which of them, the region, the byte
        positions [k, nbytes] in its storage)."""
        index, offset = self.locate(start)
        span = np.arange(nbytes)
        for r in np.unique(index):
            rows = index == r
            yield rows, self.regions[r], offset[rows][:, None] + span

    def old_bytes(self, record_index: int, addresses: np.ndarray) -> np.ndarray:
        """What `addresses` held before store `record_index` (they are among its bytes)."""
        record = self.stores[record_index]
        where = np.searchsorted(record.addresses, addresses)
        return record.old[where]


class Lds:
    """One workgroup's LDS allocation with per-byte ordering state."""

    def __init__(self, size: int):
        self.size = size
        self.data = np.full(size, POISON_BYTE, dtype=np.uint8)   # LDS starts undefined: NaN as bf16/f32
        self.writer_wave = np.full(size, -1, dtype=np.int64)    # wave index of the latest write
        self.written_at = np.full(size, -1, dtype=np.int64)     # when it completed (-1: never)
        self.pending = np.full(size, -1, dtype=np.int64)        # op id of a write in flight (-1: none)
        self.pending_wave = np.full(size, -1, dtype=np.int64)
        self.pending_path = np.zeros(size, dtype=np.int8)       # 1: ds path, 2: vector-memory path
        self.readers = np.zeros(size, dtype=np.int32)           # reads in flight covering the byte
        self.reads_in_flight: list = []                         # (op id, wave index, path, positions)

    def out_of_range(self, start: np.ndarray, nbytes: int) -> np.ndarray:
        return (start < 0) | (start + nbytes > self.size)
