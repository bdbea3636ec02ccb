// The hz::kernels entry points: pick the implementation once (CPU detection, HORIZON_ISA, force_isa;
// HORIZON_VNNI, force_vnni for the VNNI matmuls) and forward each call to it. Also the
// ISA-independent helpers (activation types and sizes).
#include <cpuid.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "base/check.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/vnni_kernels.h"
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

inline bool use_avx2() { return isa_state().load(std::memory_order_relaxed) == Isa::kAvx2; }

// libgcc's checks include the OS's XCR0 (AVX-512 register state enabled), not only CPUID.
bool cpu_has_vnni() {
  static const bool has = cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return has;
}

bool initial_vnni() {
  const char* env = std::getenv("HORIZON_VNNI");
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  return cpu_has_vnni();
}

std::atomic<bool>& vnni_state() {
  static std::atomic<bool> on{initial_vnni()};
  return on;
}

// The VNNI matmuls run only under the AVX2 ISA (a forced scalar ISA wins).
inline bool use_vnni() { return use_avx2() && vnni_state().load(std::memory_order_relaxed); }

}  // namespace

Isa active_isa() { return isa_state().load(std::memory_order_relaxed); }

bool isa_supported(Isa isa) { return isa == Isa::kScalar || cpu_has_avx2(); }

void force_isa(Isa isa) {
  HZ_CHECK_MSG(isa_supported(isa), "force_isa: this CPU lacks the ISA");
  isa_state().store(isa, std::memory_order_relaxed);
}

bool vnni_supported() { return cpu_has_vnni(); }

bool vnni_enabled() { return vnni_state().load(std::memory_order_relaxed); }

void force_vnni(bool on) {
  HZ_CHECK_MSG(!on || cpu_has_vnni(), "force_vnni: this CPU lacks avx512f/bw/vl/vnni");
  vnni_state().store(on, std::memory_order_relaxed);
}

const char* isa_name(Isa isa) { return isa == Isa::kAvx2 ? "avx2" : "scalar"; }

const char* cpu_features() {
  static const char* features = [] {
    static char buf[128];
    buf[0] = '\0';
    const char* names[] = {"sse4.2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw", "avx512vnni"};
    const bool has[] = {
        __builtin_cpu_supports("sse4.2") != 0, __builtin_cpu_supports("avx") != 0,
        __builtin_cpu_supports("avx2") != 0,   __builtin_cpu_supports("fma") != 0,
        cpu_has_f16c(),                        cpu_has_bmi2(),
        __builtin_cpu_supports("avx512f") != 0, __builtin_cpu_supports("avx512bw") != 0,
        __builtin_cpu_supports("avx512vnni") != 0,
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

// ---- forwarding ----
#define HZ_DISPATCH(name, ...)                                  \
  do {                                                          \
    if (use_avx2()) return ::hz::kernels::avx2::name(__VA_ARGS__); \
    return ::hz::kernels::ref::name(__VA_ARGS__);               \
  } while (0)

uint64_t checksum64(const void* p, size_t n, uint64_t seed) { HZ_DISPATCH(checksum64, p, n, seed); }
void f16_to_f32_row(const uint16_t* x, float* y, int64_t n) { HZ_DISPATCH(f16_to_f32_row, x, y, n); }
void f32_to_f16_row(const float* x, uint16_t* y, int64_t n) { HZ_DISPATCH(f32_to_f16_row, x, y, n); }
void bf16_to_f32_row(const uint16_t* x, float* y, int64_t n) { HZ_DISPATCH(bf16_to_f32_row, x, y, n); }
void f32_to_bf16_row(const float* x, uint16_t* y, int64_t n) { HZ_DISPATCH(f32_to_bf16_row, x, y, n); }
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) { HZ_DISPATCH(quantize_row_q8_0, x, y, n); }
void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n) { HZ_DISPATCH(quantize_row_q4_0, x, y, n); }
void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t n) { HZ_DISPATCH(quantize_row_q8_k, x, y, n); }
void dequantize_row(DType type, const void* x, float* y, int64_t n) { HZ_DISPATCH(dequantize_row, type, x, y, n); }

void vec_dot(DType wtype, int64_t n, const void* w_row, const void* x_row, float* out) {
  HZ_DISPATCH(vec_dot, wtype, n, w_row, x_row, out);
}

void matmul(DType wtype, int64_t n, const void* w, uint64_t w_row_bytes, int64_t row_begin, int64_t row_end,
            const void* x, uint64_t x_row_bytes, int64_t num_tokens, float* y, int64_t y_stride) {
  if (use_vnni()) {
    if (wtype == DType::kQ4_0) {
      return vnni::matmul_q4_0(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    }
    if (wtype == DType::kQ8_0) {
      return vnni::matmul_q8_0(n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
    }
  }
  HZ_DISPATCH(matmul, wtype, n, w, w_row_bytes, row_begin, row_end, x, x_row_bytes, num_tokens, y, y_stride);
}

void matmul_packed(DType wtype, int64_t n, const void* packed, int64_t row_begin, int64_t row_end, const void* x,
                   int64_t num_tokens, float* y, int64_t y_stride) {
  if (use_vnni()) return vnni::matmul_packed(wtype, n, packed, row_begin, row_end, x, num_tokens, y, y_stride);
  HZ_DISPATCH(matmul_packed, wtype, n, packed, row_begin, row_end, x, num_tokens, y, y_stride);
}

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) { HZ_DISPATCH(rms_norm, x, w, y, n, eps); }
void swiglu(float* gate, const float* up, int64_t n) { HZ_DISPATCH(swiglu, gate, up, n); }
void add(float* y, const float* x, int64_t n) { HZ_DISPATCH(add, y, x, n); }
void axpy(float* y, float a, const float* x, int64_t n) { HZ_DISPATCH(axpy, y, a, x, n); }
void scale(float* x, float a, int64_t n) { HZ_DISPATCH(scale, x, a, n); }
void softmax(float* x, int64_t n) { HZ_DISPATCH(softmax, x, n); }
float dot_f32(const float* a, const float* b, int64_t n) { HZ_DISPATCH(dot_f32, a, b, n); }
float dot_f32_f16(const float* a, const uint16_t* b, int64_t n) { HZ_DISPATCH(dot_f32_f16, a, b, n); }
void axpy_f16(float* y, float a, const uint16_t* x, int64_t n) { HZ_DISPATCH(axpy_f16, y, a, x, n); }

#undef HZ_DISPATCH

}  // namespace hz::kernels
