// The switch for the AVX-512 variants of the weight matmuls (VNNI for Q4_0/Q8_0 and the k-quants,
// 512-bit FMAs for F32/F16/BF16; kernels::matmul and matmul_packed; implementation in avx512/). They are bit-identical to the AVX2 kernels, so they are
// part of Isa::kAvx2 (same isa_name, same KV fingerprint) rather than an ISA of their own.
#pragma once

namespace hz::kernels {

// The CPU (and OS) support avx512f/bw/vl/vnni.
bool vnni_supported();
// The variants run whenever active_isa() is kAvx2. On by default where supported; HORIZON_VNNI=0
// turns them off (read once, on the first kernel call).
bool vnni_enabled();
// Tests and A/B runs; turning on needs vnni_supported() (checked).
void force_vnni(bool on);

}  // namespace hz::kernels
