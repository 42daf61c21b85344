"""A recording fake of ROCm aiter's persistent MLA decode API, for CPU tests.

It stands in for `submission.aiter_ops` (mla_decode_fwd, get_mla_metadata_info_v1,
get_mla_metadata_v1) so that the aiter route runs end to end without ROCm. It is strict
where aiter is strict, and computes real outputs:

* Signatures: every call is bound against aiter's real parameter lists, read from
  tools/aiter_api/aiter_<commit>.json (the March 2026 source the leaderboard's call
  pattern matches; get_mla_metadata_v1 must also fit its pybind11 op). A call that would
  not bind raises TypeError, as Python / pybind11 would. The bound arguments, defaults
  filled in, are recorded in `FakeAiter.calls`.
* Behaviour, modelled on aiter 2ee06ca214 (aiter/mla.py, aiter/ops/attention.py,
  csrc/py_itfs_cu/asm_mla.cu, csrc/kernels/mla/metadata.cu + metadata/v1_0_device.cuh):
  - get_mla_metadata_info_v1 returns the same 6 (shape, dtype) pairs in the same order
    (work_metadata_ptrs, work_indptr, work_info_set, reduce_indptr, reduce_final_map,
    reduce_partial_map), 1-D shapes as plain ints, sized from cu_num as aiter does.
  - get_mla_metadata_v1 runs its TORCH_CHECKs, requires the six buffers to have exactly
    the shapes/dtypes this fake's get_mla_metadata_info_v1 issued (in aiter's roles), and
    fills them as the v1_0 kernel (fast_mode=False, intra_batch_mode=True) does: the
    per-batch KV split plan depends on the kv_indptr VALUES, the split count is
    min(seqlen_kv // 196, ceil(cu_num / batch), max_split_per_batch) on gfx950 and always
    16 on gfx942, and work_metadata_ptrs receives the addresses of work_indptr and
    work_info_set. Writes past a buffer (real aiter: memory corruption) raise here.
  - mla_decode_fwd checks every tensor (dtype, shape, strides, device), the q/kv scales,
    that a kernel exists for the dtype combination (hsa/<gfx>/mla/mla_asm.csv), and that
    the six metadata buffers are the very objects a get_mla_metadata_v1 call filled (the
    kernel dereferences the addresses stored in work_metadata_ptrs). It then computes the
    result the way the kernel does: it walks work_info_set (kv ranges from METADATA time,
    not from the kv_indptr passed now), gathers rows through kv_indices, dequantizes q and
    KV with their scales (fp8 bytes read as the gfx's hardware format), fp32 softmax
    attention per split, log-sum-exp merge through the reduce maps, bf16 into `o`.
* Consequence worth knowing (it is aiter's, reproduced here): the persistent kernel takes
  its KV ranges from work_info_set, i.e. from the kv_indptr values at metadata time. A
  call with the same shapes but other sequence lengths needs new metadata; with stale
  metadata the output is attention over the old ranges.
* Where aiter reads values (the same sources): get_mla_metadata_v1's host side checks
  strides and dtypes only, then launches one kernel (one workgroup of one wave) on the
  current queue, which reads kv_indptr on the device: building metadata per call adds a
  launch, not a host sync. mla_decode_fwd in persistent mode reads no value on the host
  either (asm_mla.cu copies from the host only when work_meta_data is not given). This
  fake reads the values when called, which on the CPU is the same order. Lengths under
  196 tokens give v1_0 zero splits on gfx950 (the kernel then divides by zero: undefined
  on a GPU, raised here); on gfx942, 17 to 20 tokens give one work item whose kv_end is 1
  to 4 tokens before the sequence's end (this fake's decode reads [kv_start, kv_end) of
  each work item; whether aiter's kernel reads on to the end is not known from source).
* Stricter than aiter (documented choices): q_scale / kv_scale must be None when their
  operand is not fp8 (aiter ignores them); the dtypes given to get_mla_metadata_v1 must
  match the decode's (v1_0 ignores them for 16 heads, v1_2 does not); kv_indices must
  have exactly kv_indptr[-1] entries; only what our route uses is modelled (16 heads,
  page size 1, persistent mode, fast_mode=False + intra_batch_mode=True); anything else
  raises NotImplementedError rather than guessing.

Knobs for tests: `corrupt_output` (the decode writes garbage), `api` (another signature
file, e.g. the older PyPI wheel).
"""
from __future__ import annotations

import ast
import inspect
import math
from dataclasses import dataclass

import torch

from tools import aiter_contract

FAKED = ("mla_decode_fwd", "get_mla_metadata_info_v1", "get_mla_metadata_v1")
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)
# aiter's dtypes.fp8: the byte format the MFMA units read on each arch.
HW_FP8 = {"gfx950": torch.float8_e4m3fn, "gfx942": torch.float8_e4m3fnuz}
NUM_HEADS, QK_HEAD_DIM, V_HEAD_DIM = 16, 576, 512
# Persistent (ps=1) decode kernels for 16 query heads per KV head, from
# hsa/gfx950/mla/mla_asm.csv and hsa/gfx942/mla/mla_asm.csv: (q, kv) -> qSeqLen rows.
# asm_mla.cu pads bf16-Q max_seqlen_q <= 4 to the qSeqLen 4 kernel; fp8 Q takes 1, 2, 4.
PS_KERNELS = {("fp8", "fp8"): (1, 2, 4), ("bf16", "fp8"): (4,), ("bf16", "bf16"): (4,)}
# metadata/v1_0_device.cuh: "Experiments shows 196 per splits can get better performance."
V1_0_TOKENS_PER_SPLIT = 196
WORK_INFO_FIELDS = 8  # batch, partial_qo_loc, qo_start, qo_end, kv_start, kv_end, kv_offset, pad


class FakeAiterError(RuntimeError):
    """What aiter's TORCH_CHECK (c10::Error, a RuntimeError in Python) would raise."""


# ----------------------------------------------------------------------------- signatures


def _default_value(text: str):
    """A recorded default (source text) as a value: Python literals, pybind's spellings."""
    spelled = {"true": True, "false": False, "std::nullopt": None, "nullptr": None}
    if text in spelled:
        return spelled[text]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # an expression (e.g. a dtype name): kept as its text


def _signature(params: list[dict]) -> inspect.Signature:
    return inspect.Signature([
        inspect.Parameter(p["name"], getattr(inspect.Parameter, p["kind"]),
                          default=_default_value(p["default"]) if "default" in p
                          else inspect.Parameter.empty)
        for p in params])


def load_signatures(api: dict) -> dict[str, list[tuple[str, inspect.Signature]]]:
    """Per faked function, every (label, signature) a call must satisfy."""
    missing = [name for name in FAKED if not api["functions"].get(name, {}).get("found")]
    if missing:
        raise ValueError(f"signature file lacks {missing}")
    return {name: [(label, _signature(params))
                   for label, params in aiter_contract.signatures(api, name)]
            for name in FAKED}


# ----------------------------------------------------------------------------- records


@dataclass
class Call:
    name: str
    args: dict  # parameter name -> value, every parameter (defaults filled in)
    metadata: "MetadataState | None" = None  # mla_decode_fwd: the metadata it used

    def __getitem__(self, key):
        return self.args[key]


@dataclass(eq=False)  # compared by identity: one state per get_mla_metadata_v1 call
class MetadataState:
    """What one get_mla_metadata_v1 call filled, and the facts it was built from."""
    buffers: dict  # role -> the tensor object that call received
    batch: int
    kv_indptr: list  # its values at metadata time: the kernel's KV ranges come from them
    splits: list  # KV splits per batch
    max_split_per_batch: int
    max_seqlen_qo: int
    uni_seqlen_qo: int
    page_size: int
    dtype_q: torch.dtype | None
    dtype_kv: torch.dtype | None
    num_works: int
    decode_calls: int = 0


# Roles, in the order get_mla_metadata_info_v1 returns them.
INFO_ROLES = ("work_metadata_ptrs", "work_indptr", "work_info_set", "reduce_indptr",
              "reduce_final_map", "reduce_partial_map")
# get_mla_metadata_v1 parameter -> role; mla_decode_fwd parameter -> role.
METADATA_PARAM_ROLES = {"work_metadata_ptrs": "work_metadata_ptrs", "work_info_set": "work_info_set",
                        "work_indptr": "work_indptr", "reduce_indptr": "reduce_indptr",
                        "reduce_final_map": "reduce_final_map",
                        "reduce_partial_map": "reduce_partial_map"}
DECODE_PARAM_ROLES = {"work_meta_data": "work_metadata_ptrs", "work_indptr": "work_indptr",
                      "work_info_set": "work_info_set", "reduce_indptr": "reduce_indptr",
                      "reduce_final_map": "reduce_final_map", "reduce_partial_map": "reduce_partial_map"}


def _shape_tuple(shape) -> tuple:
    return (shape,) if isinstance(shape, int) else tuple(shape)


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ----------------------------------------------------------------------------- the fake


class FakeAiter:
    """Drop-in for submission.aiter_ops. See the module docstring for what it checks."""

    def __init__(self, api: dict | None = None, *, gfx: str = "gfx950", cu_num: int = 256,
                 device=torch.device("cpu"), corrupt_output: bool = False):
        if gfx not in HW_FP8:
            raise ValueError(f"gfx must be one of {sorted(HW_FP8)}")
        self.api = api if api is not None else aiter_contract.load_api(aiter_contract.MARCH_API_FILE)
        self.signatures = load_signatures(self.api)
        self.gfx, self.cu_num, self.device = gfx, cu_num, torch.device(device)
        self.corrupt_output = corrupt_output
        self.calls: list[Call] = []
        self.issued_infos: list[tuple] = []  # every get_mla_metadata_info_v1 result
        self.metadata: dict[int, MetadataState] = {}  # id(work_metadata_ptrs) -> state

    # ---- recording helpers for tests
    def calls_to(self, name: str) -> list[Call]:
        return [call for call in self.calls if call.name == name]

    def count(self, name: str) -> int:
        return len(self.calls_to(name))

    def clear_calls(self) -> None:
        self.calls.clear()

    # ---- binding
    def _bind(self, name: str, args: tuple, kwargs: dict) -> Call:
        bound = None
        for label, signature in self.signatures[name]:
            try:
                this = signature.bind(*args, **kwargs)
            except TypeError as error:
                raise TypeError(f"aiter.{name} ({label} signature): {error}") from None
            this.apply_defaults()
            bound = bound or this  # the Python-level signature names the arguments
        call = Call(name, dict(bound.arguments))
        self.calls.append(call)
        return call

    # ---- checks shared by the three functions
    def _tensor(self, fn: str, name: str, value, dtypes, ndim: int | None = None,
                shape: tuple | None = None, contiguous: bool = False) -> torch.Tensor:
        where = f"aiter.{fn}: {name}"
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{where}: expected a torch.Tensor, got {type(value).__name__}")
        if value.dtype not in dtypes:
            raise FakeAiterError(f"{where}: dtype {value.dtype}, expected one of {[str(d) for d in dtypes]}")
        if ndim is not None and value.dim() != ndim:
            raise FakeAiterError(f"{where}: {value.dim()}-D {tuple(value.shape)}, expected {ndim}-D")
        if shape is not None and (value.dim() != len(shape) or any(
                s is not None and s != v for s, v in zip(shape, value.shape))):
            raise FakeAiterError(f"{where}: shape {tuple(value.shape)}, expected "
                                 f"{tuple('*' if s is None else s for s in shape)}")
        if value.device != self.device:
            raise FakeAiterError(f"{where}: on {value.device}, expected {self.device}")
        if contiguous and not value.is_contiguous():
            raise FakeAiterError(f"{where}: must be contiguous, strides {value.stride()}")
        return value

    @staticmethod
    def _int(fn: str, name: str, value, minimum: int | None = None) -> int:
        if not _is_int(value):
            raise TypeError(f"aiter.{fn}: {name} must be an int, got {value!r}")
        if minimum is not None and value < minimum:
            raise FakeAiterError(f"aiter.{fn}: {name} = {value} < {minimum}")
        return value

    @staticmethod
    def _bool(fn: str, name: str, value) -> bool:
        if not isinstance(value, bool):
            raise TypeError(f"aiter.{fn}: {name} must be a bool, got {value!r}")
        return value

    @staticmethod
    def _dtype(fn: str, name: str, value, optional: bool = False):
        if value is None and optional:
            return None
        if not isinstance(value, torch.dtype):
            raise TypeError(f"aiter.{fn}: {name} must be a torch.dtype, got {value!r}")
        return value

    # ------------------------------------------------------------------ get_mla_metadata_info_v1
    def get_mla_metadata_info_v1(self, *args, **kwargs):
        fn = "get_mla_metadata_info_v1"
        a = self._bind(fn, args, kwargs).args
        batch = self._int(fn, "batch_size", a["batch_size"], 1)
        max_seqlen_qo = self._int(fn, "max_seqlen_qo", a["max_seqlen_qo"], 1)
        num_head_qo = self._int(fn, "num_head_qo", a["num_head_qo"], 1)
        q_dtype, kv_dtype = self._dtype(fn, "q_dtype", a["q_dtype"]), self._dtype(fn, "kv_dtype", a["kv_dtype"])
        is_sparse = self._bool(fn, "is_sparse", a["is_sparse"])
        fast_mode = self._bool(fn, "fast_mode", a["fast_mode"])
        intra_batch_mode = self._bool(fn, "intra_batch_mode", a.get("intra_batch_mode", False))
        num_kv_splits = self._int(fn, "num_kv_splits", a.get("num_kv_splits", 32), 1)
        assert num_head_qo % 16 == 0  # aiter's own assert
        hw_fp8 = HW_FP8[self.gfx]
        natively_128 = (self.gfx == "gfx942" and num_head_qo == 128 and kv_dtype == hw_fp8
                        and q_dtype == hw_fp8)
        tiles_per_batch = math.ceil(max_seqlen_qo * num_head_qo / (128 if num_head_qo == 16 or natively_128 else 16))
        batch = batch * max_seqlen_qo if is_sparse else batch
        tile_cnt = batch * tiles_per_batch
        cu = self.cu_num
        if fast_mode:
            max_work = (batch + cu - 1) * tiles_per_batch
            max_split_tiles = min(batch + cu - 1, (cu - 1) * 2) * tiles_per_batch
        else:
            max_work = max_split_tiles = tile_cnt * cu
        if intra_batch_mode:
            max_work = max_split_tiles = tile_cnt * num_kv_splits
        info = ((2, torch.uint64), (cu + 1, torch.int32), ((max_work, WORK_INFO_FIELDS), torch.int32),
                (tile_cnt + 1, torch.int32), ((tile_cnt, 2), torch.int32), (max_split_tiles, torch.int32))
        self.issued_infos.append(info)
        return info

    # ------------------------------------------------------------------ get_mla_metadata_v1
    def _local_splits(self, seqlen_kv: int, max_split: int, splits_per_cu: int) -> int:
        if self.gfx == "gfx942":
            return 16
        return min(seqlen_kv // V1_0_TOKENS_PER_SPLIT, splits_per_cu, max_split)

    def get_mla_metadata_v1(self, *args, **kwargs):
        fn = "get_mla_metadata_v1"
        a = self._bind(fn, args, kwargs).args
        gran = self._int(fn, "kv_granularity", a["kv_granularity"], 1)
        page_size = self._int(fn, "page_size", a["page_size"], 1)
        if gran & (gran - 1) or page_size & (page_size - 1):
            raise FakeAiterError(f"aiter.{fn}: kv_granularity and page_size must be powers of 2")
        qo_indptr = self._tensor(fn, "seqlens_qo_indptr", a["seqlens_qo_indptr"], (torch.int32,), ndim=1)
        batch = qo_indptr.shape[0] - 1
        kv_indptr = self._tensor(fn, "seqlens_kv_indptr", a["seqlens_kv_indptr"], (torch.int32,),
                                 shape=(batch + 1,))
        last_page = self._tensor(fn, "kv_last_page_lens", a["kv_last_page_lens"], (torch.int32,),
                                 shape=(batch,))
        for name, t in (("seqlens_qo_indptr", qo_indptr), ("seqlens_kv_indptr", kv_indptr),
                        ("kv_last_page_lens", last_page)):
            if t.stride(0) != 1:
                raise FakeAiterError(f"aiter.{fn}: {name} should be continuous!")
        heads_per_k = self._int(fn, "num_heads_per_head_k", a["num_heads_per_head_k"], 1)
        heads_k = self._int(fn, "num_heads_k", a["num_heads_k"], 1)
        self._bool(fn, "is_causal", a["is_causal"])
        max_seqlen_qo = self._int(fn, "max_seqlen_qo", a["max_seqlen_qo"])
        uni_seqlen_qo = self._int(fn, "uni_seqlen_qo", a["uni_seqlen_qo"])
        max_split = self._int(fn, "max_split_per_batch", a["max_split_per_batch"])
        fast_mode = self._bool(fn, "fast_mode", a["fast_mode"])
        intra_batch_mode = self._bool(fn, "intra_batch_mode", a.get("intra_batch_mode", False))
        dtype_q = self._dtype(fn, "dtype_q", a.get("dtype_q"), optional=True)
        dtype_kv = self._dtype(fn, "dtype_kv", a.get("dtype_kv"), optional=True)
        buffers = {METADATA_PARAM_ROLES[p]: a[p] for p in METADATA_PARAM_ROLES}
        for role, t in buffers.items():
            self._tensor(fn, role, t, (torch.uint64, torch.int32), contiguous=True)
        self._match_issued_info(fn, buffers)

        if fast_mode or not intra_batch_mode:
            raise NotImplementedError("the fake models get_mla_metadata_v1's v1_0 path only "
                                      "(fast_mode=False, intra_batch_mode=True), the one the "
                                      "leaderboard's reference uses")
        if heads_per_k * heads_k != NUM_HEADS:
            raise NotImplementedError(f"the fake models {NUM_HEADS} query heads only")
        if page_size != 1:
            raise NotImplementedError("the fake models page_size 1 only")
        if uni_seqlen_qo < 1 or max_split < 1:
            raise FakeAiterError(f"aiter.{fn}: v1_0 needs uni_seqlen_qo >= 1 (it places queries at "
                                 f"batch * uni_seqlen_qo) and max_split_per_batch >= 1; got "
                                 f"{uni_seqlen_qo}, {max_split}")
        qo = qo_indptr.tolist()
        if any(qo[b + 1] - qo[b] != uni_seqlen_qo for b in range(batch)):
            raise FakeAiterError(f"aiter.{fn}: v1_0 ignores qo_indptr and assumes every sequence "
                                 f"has uni_seqlen_qo = {uni_seqlen_qo} queries; qo_indptr = {qo}")
        state = self._plan_v1_0(fn, buffers, batch, kv_indptr.tolist(), heads_k, gran, max_split,
                                uni_seqlen_qo)
        state.max_seqlen_qo, state.page_size = max_seqlen_qo, page_size
        state.dtype_q, state.dtype_kv = dtype_q, dtype_kv
        self.metadata[id(buffers["work_metadata_ptrs"])] = state
        return None

    def _match_issued_info(self, fn: str, buffers: dict) -> None:
        """The buffers must be shaped exactly as one get_mla_metadata_info_v1 result says,
        each in its own role (a swapped unpacking shows up here)."""
        if not self.issued_infos:
            raise FakeAiterError(f"aiter.{fn}: buffers not sized by get_mla_metadata_info_v1")

        def mismatches(info):
            return [f"{role}: {tuple(buffers[role].shape)} {buffers[role].dtype}, info says "
                    f"{_shape_tuple(shape)} {dtype}"
                    for role, (shape, dtype) in zip(INFO_ROLES, info)
                    if tuple(buffers[role].shape) != _shape_tuple(shape) or buffers[role].dtype != dtype]

        if any(not mismatches(info) for info in self.issued_infos):
            return
        raise FakeAiterError(f"aiter.{fn}: metadata buffers do not match get_mla_metadata_info_v1: "
                             + "; ".join(mismatches(self.issued_infos[-1])))

    def _plan_v1_0(self, fn, buffers, batch, kvp, heads_k, gran, max_split, uni) -> MetadataState:
        """kn_get_mla_metadata_v1_0 (metadata/v1_0_device.cuh), for 16 heads."""
        num_cu = self.cu_num // heads_k
        splits_per_cu = _ceil_div(num_cu, batch)
        split, payload, shift, lds_kv = [0] * batch, [0] * batch, [0] * batch, [0] * (batch + 1)
        for b in range(batch):
            kv_begin = kvp[b]
            kv_end = max(kvp[b + 1], kv_begin + 1)
            seqlen = kv_end - kv_begin
            blocks = _ceil_div(seqlen, gran)
            splits = self._local_splits(seqlen, max_split, splits_per_cu)
            if splits < 1:
                raise FakeAiterError(
                    f"aiter.{fn}: sequence {b} has {seqlen} KV tokens: the v1_0 split count "
                    f"min({seqlen} // {V1_0_TOKENS_PER_SPLIT}, ceil({num_cu} / {batch}), {max_split}) is 0 "
                    f"and the kernel divides by it (undefined on the GPU)")
            payload[b] = _ceil_div(blocks, splits)
            split[b] = _ceil_div(blocks, payload[b])
            tail = seqlen % (payload[b] * gran)
            if 0 < tail <= 4 and split[b] > 1:
                split[b] -= 1
            lds_kv[b + 1] = kv_end
        for b in range(1, batch):
            shift[b] = shift[b - 1] + split[b - 1]
        work_end = shift[-1] + split[-1]

        work_info = buffers["work_info_set"]
        partial_map, reduce_indptr = buffers["reduce_partial_map"], buffers["reduce_indptr"]
        final_map, work_indptr = buffers["reduce_final_map"], buffers["work_indptr"]
        for role, have, need in (("work_info_set", work_info.shape[0], work_end),
                                 ("reduce_partial_map", partial_map.shape[0], work_end),
                                 ("reduce_indptr", reduce_indptr.shape[0], batch + 1),
                                 ("reduce_final_map", final_map.shape[0], batch),
                                 ("work_indptr", work_indptr.shape[0], num_cu + 1)):
            if have < need:
                raise FakeAiterError(
                    f"aiter.{fn}: {role} has {have} rows but this plan writes {need} (splits per "
                    f"batch {split}): real aiter writes out of bounds")

        rows, partials = [], []
        reduce_vals, final_vals = [0] * reduce_indptr.shape[0], []
        for b in range(batch):
            kv_begin = lds_kv[b]
            kv_end = max(lds_kv[b + 1], kv_begin + 1)
            for sid in range(split[b]):
                work_index = shift[b] + sid
                partial = -1 if split[b] == 1 else work_index * uni
                kv_start = kv_begin + sid * payload[b] * gran
                kv_stop = min(kv_start + payload[b] * gran, kv_end)
                kv_offset = kv_end - kv_stop
                if kv_offset <= 4 and split[b] > 1:
                    kv_stop, kv_offset = kv_end, 0
                rows.append([b, partial, b * uni, b * uni + uni, kv_start, kv_stop, kv_offset, 0])
                partials.append(partial)
            reduce_vals[b + 1] = shift[b] + split[b]
            final_vals.append([b * uni, b * uni + uni])
        for i in range(batch + 1, len(reduce_vals)):
            reduce_vals[i] = work_end
        per_cu, res = divmod(work_end, num_cu)
        indptr_vals = [0] * (num_cu + 1)
        for i in range(1, res):
            indptr_vals[i] = min(i * (per_cu + 1), work_end)
        for i in range(res, num_cu + 1):
            indptr_vals[i] = res * (per_cu + 1) + (i - res) * per_cu

        work_info[:work_end] = torch.tensor(rows, dtype=torch.int32).reshape(work_end, WORK_INFO_FIELDS)
        partial_map[:work_end] = torch.tensor(partials, dtype=torch.int32)
        reduce_indptr.copy_(torch.tensor(reduce_vals, dtype=torch.int32))
        final_map[:batch] = torch.tensor(final_vals, dtype=torch.int32)
        work_indptr[:num_cu + 1] = torch.tensor(indptr_vals, dtype=torch.int32)
        pointers = buffers["work_metadata_ptrs"].view(torch.int64)
        pointers[0], pointers[1] = work_indptr.data_ptr(), work_info.data_ptr()
        return MetadataState(buffers=dict(buffers), batch=batch, kv_indptr=list(kvp), splits=split,
                             max_split_per_batch=max_split, max_seqlen_qo=0, uni_seqlen_qo=uni,
                             page_size=0, dtype_q=None, dtype_kv=None, num_works=work_end)

    # ------------------------------------------------------------------ mla_decode_fwd
    def mla_decode_fwd(self, *args, **kwargs):
        fn = "mla_decode_fwd"
        call = self._bind(fn, args, kwargs)
        a = call.args
        if a["work_meta_data"] is None:
            raise NotImplementedError("the fake models persistent mode (work_meta_data given) only")
        state = self._metadata_for(fn, a)
        call.metadata = state
        batch = state.batch

        q = self._tensor(fn, "q", a["q"], (torch.bfloat16,) + FP8_DTYPES, ndim=3)
        if not q.is_contiguous():  # asm_mla.cu TORCH_CHECK
            raise FakeAiterError(f"aiter.{fn}: only support Q.is_contiguous() for now (strides {q.stride()})")
        total_q, nhead, head_size = q.shape
        kv = self._tensor(fn, "kv_buffer", a["kv_buffer"], (torch.bfloat16,) + FP8_DTYPES, ndim=4)
        num_pages, page_size, nhead_kv, kv_dim = kv.shape
        if kv.stride(-1) != 1:
            raise FakeAiterError(f"aiter.{fn}: kv_buffer's last dimension must be contiguous")
        o = self._tensor(fn, "o", a["o"], (torch.bfloat16,), shape=(total_q, nhead, V_HEAD_DIM))
        if o.stride(-1) != 1:
            raise FakeAiterError(f"aiter.{fn}: o's last dimension must be contiguous")
        qo_indptr = self._tensor(fn, "qo_indptr", a["qo_indptr"], (torch.int32,), shape=(batch + 1,), contiguous=True)
        kv_indptr = self._tensor(fn, "kv_indptr", a["kv_indptr"], (torch.int32,), shape=(batch + 1,), contiguous=True)
        kv_indices = self._tensor(fn, "kv_indices", a["kv_indices"], (torch.int32,), ndim=1, contiguous=True)
        self._tensor(fn, "kv_last_page_lens", a["kv_last_page_lens"], (torch.int32,), shape=(batch,),
                     contiguous=True)
        max_seqlen_q = self._int(fn, "max_seqlen_q", a["max_seqlen_q"], 1)
        if self._int(fn, "page_size", a["page_size"], 1) != page_size:
            raise FakeAiterError(f"aiter.{fn}: page_size={a['page_size']} but kv_buffer pages hold {page_size}")
        if self._int(fn, "nhead_kv", a["nhead_kv"], 1) != 1 or nhead_kv != 1:
            raise FakeAiterError(f"aiter.{fn}: only support num_kv_heads==1 for now")
        if head_size != kv_dim:
            raise FakeAiterError(f"aiter.{fn}: only support head_size == KV.size(3) for now "
                                 f"({head_size} vs {kv_dim})")
        if (nhead, head_size) != (NUM_HEADS, QK_HEAD_DIM) or page_size != 1:
            raise NotImplementedError("the fake models 16 heads of 576 dims, page_size 1 only")
        assert a["logit_cap"] <= 0, f"logit_cap={a['logit_cap']} is not support yet"  # aiter's assert
        sm_scale = a["sm_scale"]
        if sm_scale is not None and not isinstance(sm_scale, (int, float)):
            raise TypeError(f"aiter.{fn}: sm_scale must be a float, got {sm_scale!r}")

        q_fp8, kv_fp8 = q.dtype in FP8_DTYPES, kv.dtype in FP8_DTYPES
        q_type, kv_type = ("fp8" if q_fp8 else "bf16"), ("fp8" if kv_fp8 else "bf16")
        kernels = PS_KERNELS.get((q_type, kv_type), ())
        if not any(max_seqlen_q <= rows for rows in kernels):  # asm_mla.cu pads up to a kernel's rows
            raise FakeAiterError(f"aiter.{fn}: cannot find suitable kernel (q {q_type}, kv {kv_type}, "
                                 f"gqa 16, ps 1, max_seqlen_q {max_seqlen_q}) for {self.gfx}")
        q_scale = self._scale(fn, "q_scale", a["q_scale"], q_fp8)
        kv_scale = self._scale(fn, "kv_scale", a["kv_scale"], kv_fp8)

        if total_q != batch * max_seqlen_q or max_seqlen_q != state.uni_seqlen_qo:
            raise FakeAiterError(f"aiter.{fn}: {total_q} query rows, metadata was built for {batch} "
                                 f"sequences of {state.uni_seqlen_qo}; max_seqlen_q={max_seqlen_q}")
        if max_seqlen_q != state.max_seqlen_qo or page_size != state.page_size:
            raise FakeAiterError(f"aiter.{fn}: metadata built for max_seqlen_qo={state.max_seqlen_qo}, "
                                 f"page_size={state.page_size}; decode passes {max_seqlen_q}, {page_size}")
        for name, given, used in (("dtype_q", state.dtype_q, q.dtype), ("dtype_kv", state.dtype_kv, kv.dtype)):
            if given is not None and given != used:
                raise FakeAiterError(f"aiter.{fn}: metadata built with {name}={given}, decode uses {used}")
        total_kv = int(kv_indptr[-1])
        if kv_indices.shape[0] != total_kv:
            raise FakeAiterError(f"aiter.{fn}: kv_indices has {kv_indices.shape[0]} entries, "
                                 f"kv_indptr[-1] = {total_kv}")
        if total_kv and (int(kv_indices.min()) < 0 or int(kv_indices.max()) >= num_pages):
            raise FakeAiterError(f"aiter.{fn}: kv_indices point outside the {num_pages} pages")

        state.decode_calls += 1
        self._decode(q, q_scale, kv, kv_scale, kv_indices, o, state,
                     1.0 / math.sqrt(head_size) if sm_scale is None else float(sm_scale))
        if self.corrupt_output:
            o.copy_(torch.randn(o.shape, generator=torch.Generator().manual_seed(len(self.calls))) * 4)
        logits = torch.empty((state.buffers["reduce_partial_map"].shape[0] * max_seqlen_q, 1, nhead, V_HEAD_DIM),
                             dtype=torch.float32, device=q.device)
        return logits, None

    def _scale(self, fn: str, name: str, value, operand_is_fp8: bool):
        if not operand_is_fp8:
            if value is not None:
                raise FakeAiterError(f"aiter.{fn}: {name} given for a non-fp8 operand")
            return None
        if value is None:  # asm_mla.cu asserts q_scale and kv_scale for fp8 Q
            raise FakeAiterError(f"aiter.{fn}: {name} is required with an fp8 operand")
        return self._tensor(fn, name, value, (torch.float32,), shape=(1,))

    def _metadata_for(self, fn: str, a: dict) -> MetadataState:
        passed = {role: a[param] for param, role in DECODE_PARAM_ROLES.items()}
        missing = [param for param, role in DECODE_PARAM_ROLES.items() if passed[role] is None]
        if missing:
            raise FakeAiterError(f"aiter.{fn}: persistent mode needs {missing}")
        state = self.metadata.get(id(passed["work_metadata_ptrs"]))
        if state is None or state.buffers["work_metadata_ptrs"] is not passed["work_metadata_ptrs"]:
            raise FakeAiterError(f"aiter.{fn}: work_meta_data was not filled by get_mla_metadata_v1 "
                                 f"(call it on these buffers first)")
        wrong = [role for role, t in passed.items() if state.buffers[role] is not t]
        if wrong:
            raise FakeAiterError(f"aiter.{fn}: {wrong} are not the buffers get_mla_metadata_v1 filled "
                                 f"with this work_meta_data (copies or buffers of another plan)")
        pointers = passed["work_metadata_ptrs"].view(torch.int64).tolist()
        if pointers != [passed["work_indptr"].data_ptr(), passed["work_info_set"].data_ptr()]:
            raise FakeAiterError(f"aiter.{fn}: work_meta_data no longer points at work_indptr / "
                                 f"work_info_set")
        return state

    def _decode(self, q, q_scale, kv, kv_scale, kv_indices, o, state: MetadataState, sm_scale: float):
        """Split-K attention over the metadata's work list, then the reduce, as the kernels do."""
        hw_fp8 = HW_FP8[self.gfx]

        def dequantize(t, scale):
            values = t.view(hw_fp8).float() if t.dtype in FP8_DTYPES else t.float()
            return values * scale.float() if scale is not None else values

        q_f = dequantize(q, q_scale)
        kv_f = dequantize(kv.reshape(kv.shape[0], kv.shape[-1]), kv_scale)
        work_info = state.buffers["work_info_set"].tolist()
        indices = kv_indices.long()
        partial_out, partial_lse = {}, {}
        for work in range(state.buffers["work_indptr"][-1].item()):
            _, partial, qo_start, qo_end, kv_start, kv_stop, _, _ = work_info[work]
            queries = q_f[qo_start:qo_end].reshape(-1, q_f.shape[-1])
            rows = kv_f[indices[kv_start:kv_stop]]
            scores = (queries @ rows.T) * sm_scale
            peak = scores.amax(dim=-1, keepdim=True)
            weights = torch.exp(scores - peak)
            total = weights.sum(dim=-1, keepdim=True)
            out = (weights @ rows[:, :V_HEAD_DIM]) / total
            if partial == -1:
                o[qo_start:qo_end] = out.reshape(qo_end - qo_start, NUM_HEADS, V_HEAD_DIM).to(o.dtype)
            else:
                partial_out[partial], partial_lse[partial] = out, peak + torch.log(total)
        reduce_indptr = state.buffers["reduce_indptr"].tolist()
        final_map = state.buffers["reduce_final_map"].tolist()
        partial_map = state.buffers["reduce_partial_map"].tolist()
        for b in range(state.batch):
            locs = [loc for loc in partial_map[reduce_indptr[b]:reduce_indptr[b + 1]] if loc != -1]
            if not locs:
                continue
            lse = torch.stack([partial_lse[loc] for loc in locs])
            weights = torch.softmax(lse, dim=0)
            merged = (weights * torch.stack([partial_out[loc] for loc in locs])).sum(dim=0)
            qo_start, qo_end = final_map[b]
            o[qo_start:qo_end] = merged.reshape(qo_end - qo_start, NUM_HEADS, V_HEAD_DIM).to(o.dtype)


def load_wheel_api() -> dict:
    """The older PyPI wheel's signatures (amd-aiter 0.1.7.post2.dev18)."""
    return aiter_contract.load_api(aiter_contract.WHEEL_API_FILE)

