// The hz::kernels entry points: one table of function pointers per ISA, made from kernel_list.inc;
// the active table is picked once (CPU detection, HORIZON_ISA, force_isa; HORIZON_VNNI, force_vnni
// for the VNNI matmuls) and every entry point calls through it. Also the ISA-independent helpers
// (activation types and sizes).
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "base/check.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/vnni_kernels.h"
#include "kernels/kernel_table.h"
#include "kernels/quantize_kquants.h"
#include "kernels/kernels.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/vnni_dispatch.h"

namespace hz::kernels {
namespace {

// f16c and bmi2 straight from CPUID: clang before 16 does not know these names in
// __builtin_cpu_supports (and the fuzz build uses clang 14).
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}
bool cpu_has_bmi2() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 8)) != 0;
}

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  return has;
}

Isa initial_isa() {
  const char* env = std::getenv("HORIZON_ISA");
  if (env != nullptr && std::strcmp(env, "scalar") == 0) return Isa::kScalar;
  return cpu_has_avx2() ? Isa::kAvx2 : Isa::kScalar;
}

std::atomic<Isa>& isa_state() {
  static std::atomic<Isa> isa{initial_isa()};
  return isa;
}

// libgcc's checks include the OS's XCR0 (AVX-512 register state enabled), not only CPUID.
bool cpu_has_vnni() {
  static const bool has = cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return has;
}

// HORIZON_VNNI is that value (0: the variants off, 256: 256-bit registers only, 512: the 512-bit
// kernels everywhere).
bool vnni_env_is(const char* value) {
  const char* env = std::getenv("HORIZON_VNNI");
  return env != nullptr && std::strcmp(env, value) == 0;
}

bool initial_vnni() { return !vnni_env_is("0") && cpu_has_vnni(); }

bool initial_wide() { return !vnni_env_is("256"); }

// The CPU family of an AMD processor (CPUID 1: base plus extended family); 0 on other vendors.
unsigned amd_family() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
  const bool amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;  // "AuthenticAMD"
  if (!amd || !__get_cpuid(1, &a, &b, &c, &d)) return 0;
  return ((a >> 8) & 0xf) + ((a >> 20) & 0xff);
}

// AMD family 19h (Zen 4) executes a 512-bit operation as two 256-bit halves. There the one-token
// packed Q4_0/Q8_0 matmul is faster on the one-group 256-bit kernel (its single weight stream;
// llama-1b matrices, 2 threads: 36-66 GB/s against 28-36 for the group pairs) and the float
// matmul from 16 tokens on the AVX2 tile kernel (F16 2048x8192, 512 tokens: 188-201 GOP/s against
// 129). Same bits either way. HORIZON_VNNI=512 keeps the 512-bit kernels everywhere.
bool cpu_is_zen4() { return amd_family() == 0x19; }

bool initial_split() { return !vnni_env_is("512") && cpu_is_zen4(); }

// AMD family 1Ah (Zen 5): float matmuls of 1-2 tokens (decode) stream F16/BF16/F32 weights faster
// on the AVX2 kernel (F16 2048x8192, one token, 2 threads: 42-44 GB/s against 28-35 for the 512-bit
// one; from 4 tokens the 512-bit kernel is faster: 107 against 91 GOP/s, at 512 tokens 290 against
// 195). Same bits either way. HORIZON_VNNI=512 keeps the 512-bit kernel.
bool cpu_is_zen5() { return amd_family() == 0x1a; }

bool float_decode_on_avx2() {
  static const bool on = !vnni_env_is("512") && cpu_is_zen5();
  return on;
}

// AMX-TILE and AMX-INT8 (CPUID 7.0 EDX bits 24 and 25) with the AVX-512 kernels, and the OS's
// permission to use the tile data state: Linux wants a process to ask for it once
// (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); a refusal leaves AMX off.
bool cpu_has_amx() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!cpu_has_vnni() || !__get_cpuid_count(7, 0, &a, &b, &c, &d) || ((d >> 24) & 3u) != 3u) return false;
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtileData = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtileData) == 0;
  }();
  return has;
}

// HORIZON_AMX=0 keeps the tile kernels off (A/B runs); the OS is then not asked.
bool initial_amx() {
  const char* env = std::getenv("HORIZON_AMX");
  return !(env != nullptr && std::strcmp(env, "0") == 0) && cpu_has_amx();
}

std::atomic<bool>& amx_state() {
  static std::atomic<bool> on{initial_amx()};
  return on;
}

std::atomic<bool>& vnni_state() {
  static std::atomic<bool> on{initial_vnni()};
  return on;
}

std::atomic<bool>& wide_state() {
  static std::atomic<bool> on{initial_wide()};
  return on;
}

// The 512-bit kernels only where they are the faster ones on this CPU (cpu_is_zen4).
std::atomic<bool>& split_state() {
  static std::atomic<bool> on{initial_split()};
  return on;
}

// ---- the tables ----
#define HZ_KERNEL(variants, ret, name, params, args) .name = &ref::name,
constexpr KernelTable kScalarTable = {
#include "kernels/kernel_list.inc"
};
#undef HZ_KERNEL

// A kernel marked `scalar` in the list resolves to ref:: here (see avx2/avx2_kernels.h).
#define HZ_KERNEL(variants, ret, name, params, args) .name = &avx2::name,
constexpr KernelTable kAvx2Table = {
#include "kernels/kernel_list.inc"
};
#undef HZ_KERNEL

// Float matmuls of 1-2 tokens with short rows go to the 16-row kernel (the same bits): in cache, the
// tile kernels spend as long reducing and storing each output as multiplying. Lab (Zen 5, F32, one
// thread, ns per call, AVX2 kernel -> 16-row kernel, one token): 64x64 483 -> 167, 172x64 1201 ->
// 376, 64x172 1012 -> 415, 512x512 22043 -> 15250, 8192x256 176523 -> 148193; beyond, from memory,
// the AVX2 kernel's prefetch wins (32000x256: 1007805 against 1256098; 1024x1024 71512 against 94208).
constexpr int64_t kShortRowMaxN = 512;
constexpr uint64_t kShortRowMaxBytes = uint64_t{8} << 20;

bool short_float_rows(DType wtype, int64_t n, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                      int64_t num_tokens) {
  const bool float_weights = wtype == DType::kF32 || wtype == DType::kF16 || wtype == DType::kBF16;
  return float_weights && num_tokens <= 2 && n <= kShortRowMaxN &&
         static_cast<uint64_t>(row_end - row_begin) * w_row_bytes <= kShortRowMaxBytes;
}

// AVX2 with the AVX-512 VNNI Q4_0/Q8_0 and k-quant matmuls and, with kWide, the k-quant group pairs
// and the 512-bit float matmuls (all bit-identical to the AVX2 ones, so still Isa::kAvx2).
template <bool kWide>
void matmul_vnni_kind(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                      const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  if (wtype == DType::kQ4_0) {
    return vnni::matmul_q4_0(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
  }
  if (wtype == DType::kQ8_0) {
    return vnni::matmul_q8_0(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
  }
  if (wtype == DType::kQ4_K || wtype == DType::kQ5_K || wtype == DType::kQ6_K) {
    return (kWide ? vnni::matmul_kquant : vnni::matmul_kquant_ymm)(wtype, n, w, w_row_bytes, row_begin, row_end, x,
                                                                   x_row_bytes, num_tokens, y, y_stride);
  }
  if (kWide && short_float_rows(wtype, n, w_row_bytes, row_begin, row_end, num_tokens)) {
    return vnni::matmul_float_short_rows(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y,
                                         y_stride);
  }
  if (kWide && (wtype == DType::kF32 || wtype == DType::kF16 || wtype == DType::kBF16)) {
    return vnni::matmul_float(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
  }
  avx2::matmul(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
}

constexpr KernelTable avx2_vnni_table() {
  KernelTable t = kAvx2Table;
  t.matmul = &matmul_vnni_kind<true>;
  t.matmul_packed = &vnni::matmul_packed;
  t.kv_scores = &vnni::kv_scores;
  t.kv_accumulate = &vnni::kv_accumulate;
  t.softmax_tile = &vnni::softmax_tile;
  return t;
}
constexpr KernelTable kAvx2VnniTable = avx2_vnni_table();

// The VNNI matmuls on 256-bit registers only (the float matmuls and attention stay AVX2).
constexpr KernelTable avx2_vnni_ymm_table() {
  KernelTable t = kAvx2Table;
  t.matmul = &matmul_vnni_kind<false>;
  t.matmul_packed = &vnni::matmul_packed_ymm;
  return t;
}
constexpr KernelTable kAvx2VnniYmmTable = avx2_vnni_ymm_table();

// Where a 512-bit operation costs two 256-bit ones (cpu_is_zen4): packed matmuls of 1-2 tokens and
// k-quant matmuls of 1-3 on the 256-bit kernels, float matmuls of 16 tokens or more on the AVX2 tile
// kernel.
constexpr int64_t kSplitFloatTokens = 16;
constexpr int64_t kSplitPackedTokens = 2;

void matmul_vnni_split(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                       const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  if ((wtype == DType::kF32 || wtype == DType::kF16 || wtype == DType::kBF16) && num_tokens >= kSplitFloatTokens) {
    return avx2::matmul(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
  }
  // K-quant decode and few-token steps keep the 256-bit kernel measured on Zen 4 (the 512-bit one
  // was tuned on Zen 5).
  if (wtype == DType::kQ4_K || wtype == DType::kQ5_K || wtype == DType::kQ6_K) {
    return vnni::matmul_kquant_split(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y,
                                     y_stride);
  }
  matmul_vnni_kind<true>(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
}

void matmul_packed_split(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                         int64_t num_tokens, float* y, int64_t y_stride) {
  // Two tokens too (Q4_0 8192x2048, 2 threads: 231-236 GOP/s against 133-185 for the pairs; equal
  // on 2048x8192); from 4 tokens the pairs are faster.
  if (num_tokens <= kSplitPackedTokens) {
    return vnni::matmul_packed_ymm(wtype, n, packed, row_begin, row_end, x, num_tokens, y, y_stride);
  }
  vnni::matmul_packed(wtype, n, packed, row_begin, row_end, x, num_tokens, y, y_stride);
}

constexpr KernelTable avx2_vnni_split_table() {
  KernelTable t = kAvx2VnniTable;
  t.matmul = &matmul_vnni_split;
  t.matmul_packed = &matmul_packed_split;
  return t;
}
constexpr KernelTable kAvx2VnniSplitTable = avx2_vnni_split_table();

// Zen 5 (float_decode_on_avx2): float matmuls of 1-2 tokens on the AVX2 kernel, from 3 tokens on the
// token-pair kernel (F16 2048x2048 and 8192x2048, 2 threads, best GOP/s of the row-pair kernel ->
// token pairs: 4 tokens 100-128 -> 122-151, 8 tokens 166-187 -> 198-224, 64 tokens 240-253 ->
// 284-315, 512 tokens 241-272 -> 300-345; a 3-token step on llama-1b F16, tok/s: 46-49 -> 57-60,
// when it cost more than a 4-token one on the row pairs).
constexpr int64_t kAvx2FloatMaxTokens = 2;
constexpr int64_t kTokenPairMinTokens = 3;

void matmul_vnni_zen5(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
                      const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  const bool float_weights = wtype == DType::kF32 || wtype == DType::kF16 || wtype == DType::kBF16;
  if (short_float_rows(wtype, n, w_row_bytes, row_begin, row_end, num_tokens)) {
    return vnni::matmul_float_short_rows(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y,
                                         y_stride);
  }
  if (float_weights && num_tokens <= kAvx2FloatMaxTokens) {
    return avx2::matmul(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
  }
  if (float_weights && num_tokens >= kTokenPairMinTokens) {
    return vnni::matmul_float_token_pairs(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y,
                                          y_stride);
  }
  matmul_vnni_kind<true>(wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
}

constexpr KernelTable avx2_vnni_zen5_table() {
  KernelTable t = kAvx2VnniTable;
  t.matmul = &matmul_vnni_zen5;
  return t;
}
constexpr KernelTable kAvx2VnniZen5Table = avx2_vnni_zen5_table();

// With AMX: packed Q4_0/Q8_0 matmuls of kAmxMinTokens tokens or more take the tile kernel. Its
// fixed cost per block (tile loads, op and store: about 16 ns for 16 rows, against 4.5 ns for one
// token's VNNI dots) pays from 16 tokens (Q4_0 256x2048 in L2, one thread, ns per 16 rows and
// block, VNNI / AMX: 5 tokens 14.0 / 19.0, 8 tokens 20.5 / 21.7, 16 tokens 34.7 / 32.6, 32 tokens
// 64.5 / 55.3).
constexpr int64_t kAmxMinTokens = 16;

void matmul_packed_amx(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                       int64_t num_tokens, float* y, int64_t y_stride) {
  if (num_tokens >= kAmxMinTokens) return vnni::matmul_packed_amx(wtype, n, packed, row_begin, row_end, x, num_tokens, y, y_stride);
  vnni::matmul_packed(wtype, n, packed, row_begin, row_end, x, num_tokens, y, y_stride);
}

constexpr KernelTable avx2_vnni_amx_table() {
  KernelTable t = kAvx2VnniTable;
  t.matmul_packed = &matmul_packed_amx;
  return t;
}
constexpr KernelTable kAvx2VnniAmxTable = avx2_vnni_amx_table();

// The VNNI matmuls run only under the AVX2 ISA (a forced scalar ISA wins).
const KernelTable* table_for(Isa isa, bool vnni, bool wide, bool split, bool amx) {
  if (isa == Isa::kScalar) return &kScalarTable;
  if (!vnni) return &kAvx2Table;
  if (!wide) return &kAvx2VnniYmmTable;
  if (split) return &kAvx2VnniSplitTable;
  if (float_decode_on_avx2()) return &kAvx2VnniZen5Table;
  return amx ? &kAvx2VnniAmxTable : &kAvx2VnniTable;
}

const KernelTable* current_table() {
  return table_for(isa_state().load(std::memory_order_relaxed), vnni_state().load(std::memory_order_relaxed),
                   wide_state().load(std::memory_order_relaxed), split_state().load(std::memory_order_relaxed),
                   amx_state().load(std::memory_order_relaxed));
}

std::atomic<const KernelTable*>& table_state() {
  static std::atomic<const KernelTable*> table{current_table()};
  return table;
}

void update_table() { table_state().store(current_table(), std::memory_order_relaxed); }

inline const KernelTable& active_table() { return *table_state().load(std::memory_order_relaxed); }

}  // namespace

const KernelTable& kernel_table(Isa isa) { return isa == Isa::kAvx2 ? kAvx2Table : kScalarTable; }

Isa active_isa() { return isa_state().load(std::memory_order_relaxed); }

bool isa_supported(Isa isa) { return isa == Isa::kScalar || cpu_has_avx2(); }

void force_isa(Isa isa) {
  HZ_CHECK_MSG(isa_supported(isa), "force_isa: this CPU lacks the ISA");
  isa_state().store(isa, std::memory_order_relaxed);
  update_table();
}

bool vnni_supported() { return cpu_has_vnni(); }

bool vnni_enabled() { return vnni_state().load(std::memory_order_relaxed); }

void force_vnni(bool on) {
  HZ_CHECK_MSG(!on || cpu_has_vnni(), "force_vnni: this CPU lacks avx512f/bw/vl/vnni");
  vnni_state().store(on, std::memory_order_relaxed);
  update_table();
}

bool vnni_wide_enabled() { return vnni_enabled() && wide_state().load(std::memory_order_relaxed); }

void force_vnni_wide(bool on) {
  wide_state().store(on, std::memory_order_relaxed);
  update_table();
}

bool vnni_split_enabled() { return vnni_wide_enabled() && split_state().load(std::memory_order_relaxed); }

void force_vnni_split(bool on) {
  split_state().store(on, std::memory_order_relaxed);
  update_table();
}

bool amx_supported() { return cpu_has_amx(); }

bool amx_enabled() { return vnni_wide_enabled() && !vnni_split_enabled() && amx_state().load(std::memory_order_relaxed); }

void force_amx(bool on) {
  HZ_CHECK_MSG(!on || cpu_has_amx(), "force_amx: this CPU (or its OS) offers no AMX-INT8");
  amx_state().store(on, std::memory_order_relaxed);
  update_table();
}

const char* isa_name(Isa isa) { return isa == Isa::kAvx2 ? "avx2" : "scalar"; }

const char* cpu_features() {
  static const char* features = [] {
    static char buf[128];
    buf[0] = '\0';
    const char* names[] = {"sse4.2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw", "avx512vnni", "amx-int8"};
    const bool has[] = {
        __builtin_cpu_supports("sse4.2") != 0, __builtin_cpu_supports("avx") != 0,
        __builtin_cpu_supports("avx2") != 0,   __builtin_cpu_supports("fma") != 0,
        cpu_has_f16c(),                        cpu_has_bmi2(),
        __builtin_cpu_supports("avx512f") != 0, __builtin_cpu_supports("avx512bw") != 0,
        __builtin_cpu_supports("avx512vnni") != 0, cpu_has_amx(),
    };
    for (size_t i = 0; i < sizeof(has) / sizeof(has[0]); ++i) {
      if (!has[i]) continue;
      if (buf[0] != '\0') std::strcat(buf, " ");
      std::strcat(buf, names[i]);
    }
    return buf;
  }();
  return features;
}

// ---- ISA-independent helpers ----

DType activation_type(DType wtype) {
  switch (wtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return DType::kF32;
    case DType::kQ8_0:
    case DType::kQ4_0:
      return DType::kQ8_0;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return DType::kQ8_K;
    default:
      HZ_CHECK_MSG(false, "activation_type: unsupported weight dtype");
      return DType::kF32;
  }
}

void encode_row(DType t, const float* x, void* dst, int64_t n) {
  switch (t) {
    case DType::kF32: std::memcpy(dst, x, n * sizeof(float)); break;
    case DType::kF16: f32_to_f16_row(x, static_cast<uint16_t*>(dst), n); break;
    case DType::kBF16: f32_to_bf16_row(x, static_cast<uint16_t*>(dst), n); break;
    case DType::kQ8_0: quantize_row_q8_0(x, static_cast<BlockQ8_0*>(dst), n); break;
    case DType::kQ4_0: quantize_row_q4_0(x, static_cast<BlockQ4_0*>(dst), n); break;
    case DType::kQ4_K: quantize_row_q4_k(x, static_cast<BlockQ4_K*>(dst), n); break;
    case DType::kQ5_K: quantize_row_q5_k(x, static_cast<BlockQ5_K*>(dst), n); break;
    case DType::kQ6_K: quantize_row_q6_k(x, static_cast<BlockQ6_K*>(dst), n); break;
    default: break;
  }
}

uint64_t activation_row_bytes(DType wtype, int64_t n) { return row_bytes(activation_type(wtype), n); }

void quantize_activation_row(DType wtype, const float* x, void* y, int64_t n) {
  switch (activation_type(wtype)) {
    case DType::kQ8_0:
      quantize_row_q8_0(x, static_cast<BlockQ8_0*>(y), n);
      return;
    case DType::kQ8_K:
      quantize_row_q8_k(x, static_cast<BlockQ8_K*>(y), n);
      return;
    default:
      std::memcpy(y, x, n * sizeof(float));
      return;
  }
}

// ---- the entry points: one forwarder per row of kernel_list.inc ----
#define HZ_KERNEL(variants, ret, name, params, args) \
  ret name params { return active_table().name args; }
#include "kernels/kernel_list.inc"
#undef HZ_KERNEL

}  // namespace hz::kernels
