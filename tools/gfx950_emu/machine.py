"""The run loop: kernel launches run over one global memory, workgroup by workgroup.

Each instruction of a kernel is compiled once into a Python function over a wave (the
registry, registry.py, filled by the semantics subpackage); the loop runs a wave until it
reaches an s_barrier or s_endpgm, then the next wave of the workgroup; a barrier releases
when every wave still running has reached it. Workgroups run one after another in launch
order (x fastest), each with its own LDS. Reading or writing a register whose load no
s_waitcnt has retired yet is a "read before wait" violation (the read sees a poison
pattern)."""
from __future__ import annotations

import dataclasses

from . import semantics  # noqa: F401  (its modules register every implemented mnemonic)
from .initial_state import initialize_wave
from .listing import Kernel
from .memory import GlobalMemory
from .registry import compile_instruction
from .reports import EmulationStopped, Violation
from .state import BARRIER, POISON, Compiled, KernelLaunch, Wave, Workgroup

MAX_VIOLATIONS = 50


@dataclasses.dataclass
class LaunchResult:
    name: str
    workgroups: int
    instructions: int
    violations: list


@dataclasses.dataclass(frozen=True)
class AtomicIssue:
    kernel: str        # the launch's name
    workgroup: tuple   # (x, y, z)
    wave: int
    line: int          # in the listing
    active: int        # lanes active (exec)
    performed: int     # lanes whose atomic reached memory (active, in range and in bounds)


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
        # Every vector atomic a wave issued: AtomicIssue (which workgroup and wave, the line,
        # its active lanes and those whose atomic reached memory).
        self.atomics: list[AtomicIssue] = []

    # ---- reports ----
    def violation(self, wave: Wave, kind: str, message: str, ins, lanes=()):
        v = Violation(kind, message, ins.text, ins.line, ins.source, wave.workgroup.ids, wave.index,
                      tuple(int(x) for x in list(lanes)[:8]))
        self.violations.append(v)
        if len(self.violations) >= MAX_VIOLATIONS:
            raise EmulationStopped(f"{MAX_VIOLATIONS} violations; the first: {self.violations[0]}")

    def record_atomic(self, wave: Wave, ins, active: int, performed: int):
        self.atomics.append(AtomicIssue(wave.workgroup.launch.name, wave.workgroup.ids, wave.index, ins.line, active,
                                        performed))

    # ---- code ----
    def compile(self, kernel: Kernel) -> list:
        key = id(kernel)
        if key not in self._compiled:
            self._compiled[key] = [compile_instruction(ins, kernel) for ins in kernel.instructions]
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
