"""The project's tools: the libraries that bench/'s commands and the tests share (compiling a
launch as Triton's JIT would for a named GPU, reading gfx950 AMDGCN, the leaderboard's shapes
and clock, the robustness inputs, a recording fake of aiter, the named edits of
submission.py), the gfx950 emulator, and set-up. Run a tool's command from the repository's
root as `python3 -m tools.NAME`; nothing here is imported by submission.py."""
