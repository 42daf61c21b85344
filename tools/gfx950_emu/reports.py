"""What the emulator reports: a violation (the program did something a real GPU may fault,
hang or compute wrong on) or an error of the emulator itself (an instruction or modifier it
does not implement)."""
from __future__ import annotations

import dataclasses


class NotImplementedInstruction(NotImplementedError):
    """An instruction, operand form or modifier the emulator does not implement: the run stops
    with its name (nothing is skipped or approximated silently)."""


class EmulationStopped(RuntimeError):
    """The run cannot go on (a hang, a fault the hardware would take, too many violations)."""


@dataclasses.dataclass(frozen=True)
class Violation:
    kind: str          # "out of bounds", "read before wait", "stale global read", "lds race", "hang", ...
    message: str       # what happened, in words
    instruction: str   # the instruction as printed
    line: int          # its line in the listing
    source: str        # submission.py:LINE of the instruction, from the listing's .loc
    workgroup: tuple   # (x, y, z)
    wave: int          # the wave's index in its workgroup
    lanes: tuple = ()  # the lanes concerned (the first few)

    def __str__(self) -> str:
        where = f"workgroup {self.workgroup} wave {self.wave}"
        lanes = f" lanes {list(self.lanes)}" if self.lanes else ""
        src = f" ({self.source})" if self.source else ""
        return f"{self.kind}: {self.message} at line {self.line}{src} `{self.instruction}`, {where}{lanes}"
