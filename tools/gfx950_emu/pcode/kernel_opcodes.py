"""The opcodes the project's gfx950 kernels use, and where AMD's pseudocode tables say nothing
of one: what the oracle must cover (tests/test_gfx950_pcode.py checks it does;
bench/pcode_coverage.py and bench/pcode_throughput.py report on it)."""

# The opcodes of every gfx950 kernel the project compiles (the listings of the 8 leaderboard
# shapes' kernels, 207 mnemonics with their encoding suffixes, 184 without; s_cmpk_lt_u32 added with
# the Gluon forms' parallel merge, v_subrev_u32 with the MXFP4 Gluon form's tile shift).
KERNEL_OPCODES = (
    'buffer_inv', 'buffer_load_dword', 'buffer_load_dwordx2', 'buffer_load_dwordx4',
    'buffer_load_ubyte', 'buffer_store_dword', 'buffer_store_dwordx4', 'buffer_store_short',
    'buffer_wbl2', 'ds_bpermute_b32', 'ds_read2_b32', 'ds_read2_b64', 'ds_read2st64_b32',
    'ds_read2st64_b64', 'ds_read_b128', 'ds_read_b32', 'ds_read_b64_tr_b16', 'ds_read_b64_tr_b8',
    'ds_read_u16', 'ds_read_u8', 'ds_swizzle_b32', 'ds_write2_b32', 'ds_write2_b64',
    'ds_write2st64_b32', 'ds_write2st64_b64', 'ds_write_b128', 'ds_write_b16',
    'ds_write_b16_d16_hi', 'ds_write_b32', 'ds_write_b64', 'ds_write_b8', 'global_atomic_add',
    'global_load_dword', 'global_load_dwordx2', 'global_load_dwordx4', 'global_store_dword',
    'global_store_dwordx2', 'global_store_dwordx4', 's_abs_i32', 's_add_i32', 's_add_u32',
    's_addc_u32', 's_addk_i32', 's_and_b32', 's_and_b64', 's_and_saveexec_b64', 's_andn2_b64',
    's_ashr_i32', 's_barrier', 's_bcnt1_i32_b64', 's_bfe_u32', 's_branch', 's_cbranch_execnz',
    's_cbranch_execz', 's_cbranch_scc0', 's_cbranch_scc1', 's_cbranch_vccnz', 's_cmp_eq_u32',
    's_cmp_ge_i32', 's_cmp_ge_u32', 's_cmp_gt_i32', 's_cmp_lg_u32', 's_cmp_lt_i32',
    's_cmpk_lg_i32', 's_cmpk_lt_u32', 's_cselect_b32', 's_cselect_b64', 's_endpgm', 's_load_dword',
    's_load_dwordx2', 's_load_dwordx4', 's_load_dwordx8', 's_lshl_b32', 's_lshl_b64', 's_lshr_b32',
    's_max_i32', 's_min_i32', 's_min_u32', 's_mov_b32', 's_mov_b64', 's_movk_i32', 's_mul_hi_i32',
    's_mul_hi_u32', 's_mul_i32', 's_nop', 's_not_b32', 's_or_b32', 's_or_b64',
    's_setreg_imm32_b32', 's_sub_i32', 's_waitcnt', 's_xor_b32', 'v_accvgpr_read_b32',
    'v_accvgpr_write_b32', 'v_add3_u32', 'v_add_f32', 'v_add_lshl_u32', 'v_add_u32', 'v_and_b32',
    'v_and_or_b32', 'v_ashrrev_i32', 'v_bfe_i32', 'v_bfe_u32', 'v_bfrev_b32', 'v_bitop3_b16',
    'v_bitop3_b32', 'v_cmp_eq_u32', 'v_cmp_gt_f32', 'v_cmp_gt_i16', 'v_cmp_gt_i32', 'v_cmp_gt_i64',
    'v_cmp_gt_u32', 'v_cmp_lt_f32', 'v_cmp_lt_i16', 'v_cmp_lt_i32', 'v_cmp_ne_u32',
    'v_cmp_neq_f32', 'v_cmp_nlt_f32', 'v_cmp_o_f32', 'v_cmp_u_f32', 'v_cndmask_b32',
    'v_cvt_f32_u32', 'v_cvt_pk_bf16_f32', 'v_cvt_scalef32_pk_bf16_fp4',
    'v_cvt_scalef32_pk_fp8_f32', 'v_cvt_u32_f32', 'v_div_fixup_f32', 'v_div_fmas_f32',
    'v_div_scale_f32', 'v_exp_f32', 'v_fma_f32', 'v_fmac_f32', 'v_ldexp_f32', 'v_log_f32',
    'v_lshl_add_u32', 'v_lshl_add_u64', 'v_lshl_or_b32', 'v_lshlrev_b16', 'v_lshlrev_b32',
    'v_lshlrev_b64', 'v_lshrrev_b16', 'v_lshrrev_b32', 'v_mad_u32_u24', 'v_mad_u64_u32',
    'v_max3_f32', 'v_max3_i32', 'v_max3_u16', 'v_max_f32', 'v_max_i32', 'v_max_u16',
    'v_mbcnt_hi_u32_b32', 'v_mbcnt_lo_u32_b32', 'v_med3_i32', 'v_mfma_f32_16x16x128_f8f6f4',
    'v_mfma_f32_16x16x32_bf16', 'v_mfma_f32_16x16x32_fp8_fp8', 'v_mfma_scale_f32_16x16x128_f8f6f4',
    'v_min_i32', 'v_min_u32', 'v_mov_b32', 'v_mov_b64', 'v_mul_f32', 'v_mul_hi_i32',
    'v_mul_i32_i24', 'v_mul_lo_u32', 'v_mul_u32_u24', 'v_not_b32', 'v_or3_b32', 'v_or_b32',
    'v_perm_b32', 'v_permlane16_swap_b32', 'v_permlane32_swap_b32', 'v_pk_add_f32', 'v_pk_fma_f32',
    'v_pk_mul_f32', 'v_rcp_f32', 'v_rcp_iflag_f32', 'v_readfirstlane_b32', 'v_readlane_b32',
    'v_sub_co_u32', 'v_sub_f32', 'v_sub_u32', 'v_subb_co_u32', 'v_subrev_u32', 'v_xad_u32', 'v_xor_b32',
)
# In none of AMD's CDNA pseudocode tables (tinygrad 0.14.0's PCODE).
NO_PCODE = {
    "buffer_inv", "buffer_wbl2", "ds_read_b64_tr_b16", "ds_read_b64_tr_b8", "s_barrier", "s_endpgm",
    "v_accvgpr_read_b32", "v_accvgpr_write_b32", "v_mfma_scale_f32_16x16x128_f8f6f4",
}
# Entries that hold prose instead of code (a swizzle table, a wait-count summary, the MFMAs'
# one-line "D = A (16x32) * B (32x16) + C" summaries).
PROSE = {"ds_swizzle_b32", "s_waitcnt", "v_mfma_f32_16x16x128_f8f6f4", "v_mfma_f32_16x16x32_bf16",
         "v_mfma_f32_16x16x32_fp8_fp8"}
