// Dispatch of the fused attention kernels (kernels/attn_kernels.h).
#include "kernels/attn_kernels.h"

#include "kernels/kernels.h"

namespace hz::kernels {

void kv_scores(KvCodec c, const float* q, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
               int64_t rows, int64_t head_dim, float* scores) {
  if (active_isa() == Isa::kAvx2) return avx2::kv_scores(c, q, num_heads, elems, scales, rows, head_dim, scores);
  ref::kv_scores(c, q, num_heads, elems, scales, rows, head_dim, scores);
}

void kv_accumulate(KvCodec c, const float* p, int32_t num_heads, const uint8_t* elems, const uint8_t* scales,
                   int64_t rows, int64_t head_dim, float* acc) {
  if (active_isa() == Isa::kAvx2) return avx2::kv_accumulate(c, p, num_heads, elems, scales, rows, head_dim, acc);
  ref::kv_accumulate(c, p, num_heads, elems, scales, rows, head_dim, acc);
}

float exp_shift_sum(float* x, int64_t n, float shift) {
  if (active_isa() == Isa::kAvx2) return avx2::exp_shift_sum(x, n, shift);
  return ref::exp_shift_sum(x, n, shift);
}

}  // namespace hz::kernels
