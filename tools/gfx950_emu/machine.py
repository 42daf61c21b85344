"""Waves, workgroups and the run loop.

A wave is 64 lanes: 128 SGPRs (hardware numbering, vcc at 106, m0 at 124, exec at 126), SCC,
a vector register file of 512 rows x 64 lanes (v0..v255, then a0..a255), and the queues of
its memory operations in flight. Each instruction of a kernel is compiled once into a
Python function over a wave (semantics in salu.py, valu.py, memops.py, mfma.py); the loop
runs a wave until it reaches an s_barrier or s_endpgm, then the next wave of the workgroup;
a barrier releases when every wave still running has reached it.

Workgroups run one after another in launch order (x fastest), each with its own LDS.
Memory operations complete only when an s_waitcnt retires them (vmcnt: vector memory in
issue order; lgkmcnt: LDS in order, scalar loads last, since they may return out of
order): until then their destination registers are pending, and reading or writing one
is a "read before wait" violation (the read sees a poison pattern)."""
from __future__ import annotations

import collections
import dataclasses

import numpy as np

from .listing import EXEC, Kernel, Reg, read_listing
from .memory import GlobalMemory, Lds
from .reports import EmulationStopped, NotImplementedInstruction, Violation

POISON = np.uint32(0x7FBADBAD)   # a NaN as f32: what a register read before its load's wait holds
BARRIER, END = 1, 2
MAX_VIOLATIONS = 50


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
    def __init__(self, machine: "Machine", launch: "KernelLaunch", ids: tuple, linear: int):
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


@dataclasses.dataclass
class LaunchResult:
    name: str
    workgroups: int
    instructions: int
    violations: list


class Machine:
    """Runs kernel launches over one GlobalMemory, collecting violations."""

    def __init__(self, memory: GlobalMemory, max_wave_instructions: int = 5_000_000):
        self.memory = memory
        self.time = 0
        self.violations: list[Violation] = []
        self.max_wave_instructions = max_wave_instructions
        self._compiled: dict[int, list] = {}
        self.unreleased: dict[int, list] = {}   # workgroup -> its stores not yet released
        self.trace = None                        # fn(wave, Compiled) before each instruction, for debugging

    # ---- reports ----
    def violation(self, wave: Wave, kind: str, message: str, ins, lanes=()):
        v = Violation(kind, message, ins.text, ins.line, ins.source, wave.workgroup.ids, wave.index,
                      tuple(int(x) for x in list(lanes)[:8]))
        self.violations.append(v)
        if len(self.violations) >= MAX_VIOLATIONS:
            raise EmulationStopped(f"{MAX_VIOLATIONS} violations; the first: {self.violations[0]}")

    # ---- code ----
    def compile(self, kernel: Kernel) -> list:
        key = id(kernel)
        if key not in self._compiled:
            from . import semantics
            self._compiled[key] = [semantics.compile_instruction(ins, kernel) for ins in kernel.instructions]
        return self._compiled[key]

    # ---- running ----
    def run(self, launch: KernelLaunch) -> LaunchResult:
        code = self.compile(launch.kernel)
        first_violation = len(self.violations)
        executed = 0
        gx, gy, gz = launch.grid
        linear = 0
        for z in range(gz):
            for y in range(gy):
                for x in range(gx):
                    wg = Workgroup(self, launch, (x, y, z), linear)
                    linear += 1
                    executed += self._run_workgroup(wg, code)
        self._end_of_kernel()
        return LaunchResult(launch.name or launch.kernel.name, linear, executed,
                            self.violations[first_violation:])

    def _end_of_kernel(self):
        """A kernel's end releases everything it stored to the next launch (and the host)."""
        self.time += 1
        for records in self.unreleased.values():
            for record in records:
                record.released_at = self.time
        self.unreleased.clear()
        self.time += 1

    def _run_workgroup(self, wg: Workgroup, code: list) -> int:
        from .launch_state import initialize_wave
        for wave in wg.waves:
            initialize_wave(wave, wg.launch)
            wave.acquired_at = self.time  # a kernel's start acquires what earlier launches released
        while True:
            progressed = False
            for wave in wg.waves:
                if wave.done or wave.barrier_line is not None:
                    continue
                self._run_wave(wave, code)
                progressed = True
            live = [w for w in wg.waves if not w.done]
            if not live:
                break
            waiting = [w for w in live if w.barrier_line is not None]
            if len(waiting) == len(live):
                self._release_barrier(wg, live, code)
            elif not progressed:
                raise EmulationStopped("no wave can make progress")
        for wave in wg.waves:  # what is still in flight at s_endpgm lands after the program
            wave.wait(0, 0)
        return sum(w.executed for w in wg.waves)

    def _release_barrier(self, wg: Workgroup, live: list, code: list):
        ended = [w.index for w in wg.waves if w.done]
        lines = {w.barrier_line for w in live}
        ins = code[live[0].pc - 1].ins
        if ended:
            self.violation(live[0], "hang", f"s_barrier waited for by waves {[w.index for w in live]} "
                           f"while waves {ended} have ended: a barrier some wave cannot reach", ins)
        if len(lines) > 1:
            self.violation(live[0], "barrier mismatch", f"waves wait at different s_barrier lines {sorted(lines)}",
                           ins)
        arrived = {w.index: w.arrived_at for w in live}
        acquired = max(w.acquired_at for w in live)
        for w in live:
            for other, t in arrived.items():
                if other != w.index:
                    w.sync[other] = max(w.sync.get(other, -1), t)
            w.acquired_at = acquired
            w.barrier_line = None

    def _run_wave(self, wave: Wave, code: list):
        pending = wave.pending
        limit = self.max_wave_instructions
        n = len(code)
        while True:
            if wave.pc >= n:
                raise EmulationStopped(f"wave {wave.uid} ran past the end of the program")
            c = code[wave.pc]
            if pending:
                keys = pending.keys()
                if not keys.isdisjoint(c.reads):
                    self._read_before_wait(wave, c, c.reads & keys)
                if not keys.isdisjoint(c.writes):
                    self._read_before_wait(wave, c, c.writes & keys, writing=True)
            wave.pc += 1
            wave.executed += 1
            self.time += 1
            if self.trace is not None:
                self.trace(wave, c)
            result = c.fn(wave)
            if result is not None:
                if result == BARRIER:
                    wave.barrier_line = c.ins.line
                    wave.arrived_at = self.time
                else:
                    wave.done = True
                return
            if wave.executed > limit:
                raise EmulationStopped(f"wave {wave.uid} ran {limit} instructions: a hang?")

    def _read_before_wait(self, wave: Wave, c: Compiled, keys, writing=False):
        op = wave.pending[next(iter(keys))]
        names = sorted(_key_name(k) for k in keys)
        verb = "overwrites" if writing else "reads"
        self.violation(wave, "read before wait",
                       f"{verb} {', '.join(names[:4])} while the load at line {op.ins.line} `{op.ins.text}` "
                       f"is still in flight (no s_waitcnt retired it)", c.ins)
        # the load now lands nowhere: what the register holds is poison
        for key in keys:
            del wave.pending[key]
            op.keys = tuple(k for k in op.keys if k != key)
            if not writing:
                if key >= 1000:
                    wave.v[key - 1000] = POISON
                else:
                    wave.s[key] = POISON


def _key_name(key: int) -> str:
    if key >= 1000 + 256:
        return f"a{key - 1256}"
    if key >= 1000:
        return f"v{key - 1000}"
    return f"s{key}"


def load_kernel(text: str) -> Kernel:
    return read_listing(text)


__all__ = ["Machine", "KernelLaunch", "Wave", "Compiled", "NotImplementedInstruction", "pack_mask", "unpack_mask"]
