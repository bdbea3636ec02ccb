// The switch for the AVX-512 variants of the weight matmuls (VNNI for Q4_0/Q8_0 and the k-quants,
// 512-bit FMAs for F32/F16/BF16; kernels::matmul and matmul_packed; implementation in avx512/). They are bit-identical to the AVX2 kernels, so they are
// part of Isa::kAvx2 (same isa_name, same KV fingerprint) rather than an ISA of their own.
#pragma once

namespace hz::kernels {

// The CPU (and OS) support avx512f/bw/vl/vnni.
bool vnni_supported();
// The variants run whenever active_isa() is kAvx2. On by default where supported; HORIZON_VNNI=0
// turns them off, HORIZON_VNNI=256 keeps only the 256-bit ones (read once, on the first kernel call).
bool vnni_enabled();
// Tests and A/B runs; turning on needs vnni_supported() (checked).
void force_vnni(bool on);
// The variants use 512-bit registers (two 8-row groups per register for the VNNI matmuls, the
// float matmuls and attention) when on; off (HORIZON_VNNI=256), only the VNNI matmuls run, on
// 256-bit registers. On by default. Same bits either way.
bool vnni_wide_enabled();
// Tests and A/B runs (takes effect while vnni_enabled()).
void force_vnni_wide(bool on);
// With the 512-bit variants on, the choice per call on CPUs where a 512-bit operation costs two
// 256-bit ones (AMD Zen 4): one-token packed matmuls on the 256-bit VNNI kernel, float matmuls of
// 16 tokens or more on the AVX2 kernel. On by default on those CPUs; HORIZON_VNNI=512 turns it off.
// Same bits either way.
bool vnni_split_enabled();
// Tests and A/B runs (takes effect while vnni_wide_enabled()).
void force_vnni_split(bool on);

// AMX-INT8 tiles (Intel Xeon from Sapphire Rapids), granted by the OS: asks it on the first call.
bool amx_supported();
// Packed Q4_0/Q8_0 matmuls of 16 tokens or more (prefill, large decode batches) compute their
// block dots on AMX tiles while the 512-bit variants are on (not on CPUs that split
// them). On by default where supported; HORIZON_AMX=0 turns it off. Same bits either way.
bool amx_enabled();
// Tests and A/B runs; turning on needs amx_supported() (checked).
void force_amx(bool on);

}  // namespace hz::kernels
