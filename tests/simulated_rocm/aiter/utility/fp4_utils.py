"""aiter.utility.fp4_utils of the simulated stack. aiter's dynamic_mxfp4_quant is a Triton
kernel for the GPU; this stand-in returns what aiter's current generation returns (ties
to even, scales trimmed to (rows, N // 32), aiter's fp4x2 and e8m0 dtypes) by the torch
implementation of the same rule in reference.py, whose bytes tests/test_aiter_fp4_bitexact.py
checks against aiter's own kernel."""


def dynamic_mxfp4_quant(x, scaling_mode: str = "even", shuffle: bool = False):
    """(data (M, N // 2) fp4x2, scales (M, N // 32) e8m0) of a 2D tensor x (M, N)."""
    if scaling_mode != "even" or shuffle:
        raise NotImplementedError("the simulated aiter quantizes with scaling_mode='even', "
                                  "shuffle=False only (what reference.py asks for)")
    if x.dim() != 2:
        raise ValueError(f"dynamic_mxfp4_quant takes a 2D tensor, got {tuple(x.shape)}")
    import reference  # here, not at import: reference imports this module while it loads

    data, scales = reference.quantize_mxfp4(x[None], ties="even", padded=False)
    return data[0], scales
