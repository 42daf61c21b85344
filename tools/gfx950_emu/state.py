"""The state of a running kernel, and nothing that runs it: waves, workgroups, a kernel's launch,
the memory operations in flight, and the form an instruction takes once compiled.

A wave is 64 lanes: 128 SGPRs (hardware numbering, vcc at 106, m0 at 124, exec at 126), SCC,
a vector register file of 512 rows x 64 lanes (v0..v255, then a0..a255), and the queues of
its memory operations in flight. Memory operations complete only when an s_waitcnt retires
them (vmcnt: vector memory in issue order; lgkmcnt: LDS in order, scalar loads last, since
they may return out of order): until then their destination registers are pending."""
from __future__ import annotations

import collections
import dataclasses

import numpy as np

from .listing import EXEC, Kernel, Reg
from .memory import Lds

POISON = np.uint32(0x7FBADBAD)   # a NaN as f32: what a register read before its load's wait holds
BARRIER, END = 1, 2              # what an instruction returns to end its wave's turn


@dataclasses.dataclass
class Compiled:
    """One instruction ready to run: fn(wave) returns None, BARRIER or END."""
    fn: object
    reads: frozenset      # register keys it reads (SGPR n -> n, vector row r -> 1000 + r)
    writes: frozenset
    ins: object           # the listing's Instruction


def reg_keys(reg: Reg) -> frozenset:
    if reg.file == "s":
        return frozenset(range(reg.index, reg.index + reg.count))
    return frozenset(range(1000 + reg.row, 1000 + reg.row + reg.count))


class PendingOp:
    """A memory operation in flight: its registers stay pending until `complete` runs."""
    __slots__ = ("keys", "complete", "scalar", "issued_at", "ins")

    def __init__(self, keys, complete, ins, issued_at, scalar=False):
        self.keys = keys
        self.complete = complete
        self.ins = ins
        self.issued_at = issued_at
        self.scalar = scalar


class Wave:
    def __init__(self, workgroup: "Workgroup", index: int):
        self.workgroup = workgroup
        self.machine = workgroup.machine
        self.index = index
        self.uid = (workgroup.linear, index)
        self.s = np.zeros(128, dtype=np.uint32)
        self.v = np.zeros((512, 64), dtype=np.uint32)
        self.scc = 0
        self.exec = np.ones(64, dtype=bool)
        self.exec_all = True
        self.pc = 0
        self.done = False
        self.executed = 0
        self.vm = collections.deque()     # vector memory ops in flight, issue order
        self.lgkm = []                    # LDS / scalar memory ops in flight
        self.pending = {}                 # register key -> PendingOp
        self.sync = {}                    # other wave index -> time up to which its events are ordered before us
        self.acquired_at = -1             # latest agent-scope acquire ordered before us
        self.mode = 0                     # the MODE hardware register
        self.m0_written = False           # M0 starts undefined
        self.barrier_line = None

    # ---- exec ----
    def exec_changed(self):
        bits = (int(self.s[EXEC]) | (int(self.s[EXEC + 1]) << 32))
        self.exec = unpack_mask(bits)
        self.exec_all = bits == 0xFFFF_FFFF_FFFF_FFFF

    def mask64(self, index: int) -> int:
        return int(self.s[index]) | (int(self.s[index + 1]) << 32)

    def set_mask64(self, index: int, value: int):
        self.s[index] = value & 0xFFFFFFFF
        self.s[index + 1] = (value >> 32) & 0xFFFFFFFF
        if index in (EXEC, EXEC - 1) or index + 1 == EXEC:
            self.exec_changed()

    def knows(self, other_index: int, time: int) -> bool:
        """Whether an event of wave `other_index` at `time` is ordered before this wave's now."""
        if other_index == self.index:
            return True
        return time <= self.sync.get(other_index, -1)

    # ---- memory operations ----
    def issue(self, op: PendingOp, counter: str):
        (self.vm if counter == "vm" else self.lgkm).append(op)
        for key in op.keys:
            self.pending[key] = op

    def retire(self, op: PendingOp):
        for key in op.keys:
            if self.pending.get(key) is op:
                del self.pending[key]
        op.complete(self)

    def wait(self, vmcnt: int | None, lgkmcnt: int | None):
        if vmcnt is not None:
            while len(self.vm) > vmcnt:
                self.retire(self.vm.popleft())
        if lgkmcnt is not None:
            while len(self.lgkm) > lgkmcnt:
                # LDS operations return in order; scalar loads may return out of order:
                # complete the LDS ones first, the scalar ones as late as the count allows
                lds = [op for op in self.lgkm if not op.scalar]
                op = lds[0] if lds else self.lgkm[0]
                self.lgkm.remove(op)
                self.retire(op)


def unpack_mask(bits: int) -> np.ndarray:
    return np.unpackbits(np.array([bits], dtype="<u8").view(np.uint8), bitorder="little").astype(bool)


def pack_mask(mask: np.ndarray) -> int:
    return int(np.packbits(mask.astype(np.uint8), bitorder="little").view("<u8")[0])


class Workgroup:
    """A workgroup of a launch, run by `machine`: its ids, its place in launch order, its LDS
    and its waves."""

    def __init__(self, machine, launch: "KernelLaunch", ids: tuple, linear: int):
        self.machine = machine
        self.launch = launch
        self.ids = ids
        self.linear = linear
        self.lds = Lds(launch.lds_bytes)
        self.waves = [Wave(self, i) for i in range(launch.num_waves)]


@dataclasses.dataclass
class KernelLaunch:
    """A compiled kernel's launch: its code, grid and the initial state of every wave."""
    kernel: Kernel
    grid: tuple            # workgroups (x, y, z)
    num_waves: int         # waves a workgroup (Triton's num_warps)
    lds_bytes: int         # Triton's metadata `shared`
    kernarg_address: int   # the device address of the kernarg segment
    kernarg: np.ndarray    # its bytes (uint8)
    name: str = ""
