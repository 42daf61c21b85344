"""Compile the Triton and Gluon launches of one decode call for a named GPU target, on any
machine.

    python3 -m tools.compile_target gfx950|sm_90 [--language gluon|triton|all]

compiles, into an empty Triton cache, every distinct specialization the autopick offers for
the 8 benchmark shapes on that target (offered_launches) and prints each one's seconds, then
their count and total.

A launch is compiled exactly as Triton's JIT would compile it on that target for the same
arguments: the JIT's own binder (triton.runtime.jit.create_function_from_signature, with
the target's backend) reads the arguments and yields the signature, the constexprs and
the attributes (16-byte aligned pointers and integers divisible by 16: tt.divisibility
16; integers equal to 1 become constants unless the kernel lists them in
do_not_specialize; on ROCm, tensors whose storage is under 2 GB: tt.pointer_range 32,
HIPBackend.get_tensor_specialization), and JITFunction._pack_args turns them into the
compile call, with the launch's options (num_warps, num_stages, AMD options) parsed by
the backend. Nothing here lists argument names, so a new kernel signature or option is
picked up as it is. A Gluon kernel (triton.experimental.gluon.jit, a GluonJITFunction)
takes the same binder and _pack_args; its JIT hands the compiler a GluonASTSource (the
kernel's own layouts, no layout passes) where a Triton kernel's hands an ASTSource, and
so does Specialization.compile.

The arguments are stand-ins on torch's "meta" device: the contract's shapes, dtypes and
strides at the real batch and length (so storage sizes, hence pointer_range, are the
real ones) and no memory. A meta tensor's data pointer is 0, i.e. aligned, as the
device allocator's are. The per-call tensors are built the way KernelRunner builds them
(submission.py); the plan-constant ones by submission's own decode_arguments and
decode_calls. MXFP4 scales are the trimmed (rows, 18) layout; the padded one (row stride
24) specializes the same way (neither stride is 1 nor divisible by 16).

Triton decides between interpreting and compiling when a kernel is decorated, so this
module refuses to load under TRITON_INTERPRET=1: run it in a process without it.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time

if os.environ.get("TRITON_INTERPRET") == "1":
    raise RuntimeError("compile_target compiles kernels: run it with TRITON_INTERPRET unset "
                       "(Triton decides interpret-or-compile when submission.py is imported)")

import torch  # noqa: E402
import triton  # noqa: E402
from triton import knobs  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.compiler.compiler import make_backend  # noqa: E402
from triton.runtime.jit import compute_cache_key, create_function_from_signature  # noqa: E402

import submission as sub  # noqa: E402
from tools.leaderboard import BENCHMARK_SHAPES  # noqa: E402

TARGETS = {
    "gfx950": GPUTarget("hip", "gfx950", 64),  # MI355X (CDNA4)
    "sm_90": GPUTarget("cuda", 90, 32),        # H200
}


# The compilation knobs JITFunction.run hands to the binder with the launch's options:
# instrumentation_mode from Triton 3.6, fpsan_homomorphic_casts from 3.9 (3.5 has neither).
COMPILATION_KNOBS = ("instrumentation_mode", "fpsan_homomorphic_casts")


@dataclasses.dataclass(frozen=True)
class Specialization:
    """What Triton's JIT would compile for one launch on one target."""
    kernel: object       # the JITFunction (a GluonJITFunction for a Gluon kernel)
    signature: dict      # argument name -> type ("*bf16", "i32", "constexpr", ...)
    constexprs: dict     # (argument index,) -> value
    attrs: dict          # (argument index,) -> [["tt.divisibility", 16], ...]
    options: object      # the backend's parsed options (HIPOptions / CUDAOptions)
    key: str             # the JIT's cache key: equal keys of one kernel are one compiled kernel
    target: GPUTarget

    @property
    def language(self) -> str:
        """"gluon" for a Gluon kernel, "triton" for a Triton one."""
        return "gluon" if self.kernel.is_gluon() else "triton"

    @property
    def identity(self) -> tuple:
        """What makes two launches one compiled kernel on this target: the same JIT
        function (its module and name) and the same cache key (the JIT keeps a cache per
        function, so equal keys of two functions are two compiles)."""
        return (self.kernel.fn.__module__, self.kernel.fn.__qualname__, self.key)

    def compile(self):
        if self.kernel.is_gluon():
            from triton.experimental.gluon._runtime import GluonASTSource as source_class
        else:
            source_class = ASTSource
        source = source_class(self.kernel, self.signature, self.constexprs, self.attrs)
        return triton.compile(source, target=self.target, options=self.options.__dict__)

    def constexpr_values(self) -> dict:
        """Argument name -> value of every constexpr (declared or specialized)."""
        names = self.kernel.arg_names
        return {names[path[0]]: value for path, value in self.constexprs.items()}

    def non_default_options(self) -> dict:
        """num_warps, num_stages and every other option the launch sets away from the
        backend's default."""
        defaults = make_backend(self.target).parse_options({}).__dict__
        chosen = self.options.__dict__
        return {name: value for name, value in chosen.items()
                if name in ("num_warps", "num_stages") or value != defaults.get(name)}


def specialize(call: sub.KernelCall, target: GPUTarget) -> Specialization:
    """The JIT's specialization of `call` on `target` (triton/runtime/jit.py, JITFunction.run
    and _pack_args; Triton 3.5 to 3.9)."""
    kernel = call.kernel
    backend = make_backend(target)
    kwargs = dict(call.options)
    kwargs["debug"] = kwargs.get("debug", kernel.debug) or knobs.runtime.debug
    for knob in COMPILATION_KNOBS:  # the ones this Triton's JIT passes to the binder
        if hasattr(knobs.compilation, knob):
            kwargs[knob] = getattr(knobs.compilation, knob)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound_args, specialization, options = binder(*call.args, **kwargs)
    key = compute_cache_key({}, specialization, options)
    options, signature, constexprs, attrs = kernel._pack_args(backend, kwargs, bound_args, specialization, options)
    return Specialization(kernel, signature, constexprs, attrs, options, key, target)


def contract_inputs(batch: int, kv_len: int, device="meta") -> tuple:
    """(q, kv_data, qo_indptr, kv_indptr, config) with the contract's shapes and the
    harness's dtypes (reference.generate_input), uniform lengths; values only on a real
    device, none on "meta"."""
    total_kv = batch * kv_len
    fp4 = getattr(torch, "float4_e2m1fn_x2", torch.uint8)
    e8m0 = getattr(torch, "float8_e8m0fnu", torch.uint8)
    kv_data = {
        "bf16": torch.empty((total_kv, 1, 576), dtype=torch.bfloat16, device=device),
        "fp8": (torch.empty((total_kv, 1, 576), dtype=torch.float8_e4m3fn, device=device),
                torch.empty((1,), dtype=torch.float32, device=device)),
        "mxfp4": (torch.empty((total_kv, 1, 288), dtype=fp4, device=device),
                  torch.empty((total_kv, 18), dtype=e8m0, device=device)),
    }
    q = torch.empty((batch, 16, 576), dtype=torch.bfloat16, device=device)
    qo_indptr = torch.empty((batch + 1,), dtype=torch.int32, device=device)
    kv_indptr = torch.empty((batch + 1,), dtype=torch.int32, device=device)
    config = {"batch_size": batch, "q_seq_len": 1, "kv_seq_len": kv_len, "sm_scale": 576 ** -0.5}
    return q, kv_data, qo_indptr, kv_indptr, config


def decode_kernel_calls(data: tuple, kv_format: str, launch) -> list:
    """The KernelCalls of one Triton decode call on `data`, built as KernelRunner does."""
    q, kv_data, qo_indptr, kv_indptr, config = data
    batch = config["batch_size"]
    kv, kv_scale = sub.kv_operands(kv_data, kv_format, launch)
    out = sub._new_output(q)
    scratch = sub.make_split_scratch(batch, launch, q.device)
    arguments = sub.decode_arguments(kv_format, launch, q, kv, kv_scale, config["sm_scale"], scratch)
    return sub.decode_calls(kv_format, launch, arguments, q, kv, kv_scale, qo_indptr, kv_indptr, out)


def aiter_kernel_calls(data: tuple, q_in_fp8: bool, variant) -> list:
    """The Triton launches of one aiter-route call of a metadata variant (submission's
    AITER_RUNNERS), built as its runner builds them: a8w8 the Q quantizer's two (the first
    also running the variant's guard on kv_indptr), a16w8 the guard's one. aiter's own
    kernels come compiled with aiter and are not counted here."""
    q, kv_data, _, kv_indptr, config = data
    batch = config["batch_size"]
    kv_buffer, kv_scale = kv_data["fp8"]
    plan_kv_indptr, aiter_kv_indptr = (torch.empty(batch + 1, dtype=torch.int32, device=q.device) for _ in range(2))
    last_page_lens = torch.empty(batch, dtype=torch.int32, device=q.device)
    guard_args = variant.guard_arguments(kv_indptr, plan_kv_indptr, aiter_kv_indptr, last_page_lens, batch,
                                         kv_buffer.shape[0])
    if q_in_fp8:
        scratch = sub.make_q_fp8_scratch(q.shape, kv_buffer.dtype, q.device)
        return sub.q_fp8_guarded_calls(q, scratch, variant, guard_args)
    checked_kv_scale = torch.empty(1, dtype=torch.float32, device=q.device)
    return [sub.kv_scale_guard_call(kv_scale, checked_kv_scale, variant, guard_args)]


@dataclasses.dataclass(frozen=True)
class OfferedLaunch:
    """One candidate the autopick can time for one benchmark shape on a device."""
    route: str         # "triton_fp8", "triton_mxfp4" or "aiter_fp8"
    kv_format: str
    batch: int
    kv_len: int
    rank: int          # its place in the route's candidates; 0 is offered first
    launch: object     # the KernelLaunch, or for aiter {"q_in_fp8": ..., "num_kv_splits": ...}
    calls: list        # its Triton and Gluon launches (KernelCalls)


DEVICE_CUS = {"gfx950": 256, "sm_90": 132}  # MI355X CUs, H200 SMs


def offered_launches(arch: str, with_aiter: bool = True):
    """Every candidate the autopick offers for the benchmark shapes on `arch`, Triton routes
    first (each format's launches in rank order), then, with_aiter (ROCm, where aiter
    imports), the aiter route's Triton launches (AiterRoute.variants: both metadata
    variants, a8w8 and a16w8 at every split count, for sequences of at least
    AITER_MIN_KV_LEN tokens)."""
    num_cus = DEVICE_CUS[arch]
    for kv_format in ("fp8", "mxfp4"):
        for batch, kv_len in BENCHMARK_SHAPES:
            data = contract_inputs(batch, kv_len)
            for rank, launch in enumerate(sub.launch_candidates(kv_format, batch, kv_len, num_cus, arch)):
                yield OfferedLaunch(f"triton_{kv_format}", kv_format, batch, kv_len, rank, launch,
                                    decode_kernel_calls(data, kv_format, launch))
    if not with_aiter:
        return
    for batch, kv_len in BENCHMARK_SHAPES:
        if kv_len < sub.AITER_MIN_KV_LEN:
            continue
        data = contract_inputs(batch, kv_len)
        rank = 0
        for metadata, variant in sub.AITER_RUNNERS.items():  # in AiterRoute.variants' order
            for q_in_fp8 in (True, False):
                for splits in sub.AITER_KV_SPLIT_CANDIDATES:
                    yield OfferedLaunch("aiter_fp8", "fp8", batch, kv_len, rank,
                                        {"q_in_fp8": q_in_fp8, "num_kv_splits": splits, "metadata": metadata},
                                        aiter_kernel_calls(data, q_in_fp8, variant))
                    rank += 1


def distinct_specializations(launches, target: GPUTarget) -> dict:
    """identity -> Specialization, one per kernel a cold JIT cache compiles for these launches."""
    found = {}
    for offered in launches:
        for call in offered.calls:
            spec = specialize(call, target)
            found.setdefault(spec.identity, spec)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description="Compile, on this machine, every distinct kernel specialization "
                                                 "the autopick offers for the 8 benchmark shapes on ARCH; one line "
                                                 "each, then the count and the total seconds (a cold cache).")
    parser.add_argument("arch", choices=sorted(TARGETS))
    parser.add_argument("--language", choices=("gluon", "triton", "all"), default="all")
    args = parser.parse_args()
    specs = distinct_specializations(offered_launches(args.arch, with_aiter=args.arch.startswith("gfx")),
                                     TARGETS[args.arch])
    chosen = [s for s in specs.values() if args.language in ("all", s.language)]
    total = 0.0
    with tempfile.TemporaryDirectory() as cache:
        knobs.cache.dir = cache
        for spec in chosen:
            started = time.perf_counter()
            spec.compile()
            seconds = time.perf_counter() - started
            total += seconds
            print(f"{spec.language} {spec.kernel.fn.__name__} {seconds:.2f} s")
    print(f"{len(chosen)} {args.language} specializations compiled for {args.arch} in {total:.1f} s")


if __name__ == "__main__":
    main()
