#include "model/ffn.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/kernels.h"

namespace hz {

void swiglu_ffn(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x, int64_t num_tokens, float* y,
                FfnScratch& s, const MatmulFn& matmul, const MatmulFn* matmul_same_input, ThreadPool* pool) {
  const int64_t ffn = gate.rows;
  HZ_CHECK(up.rows == ffn && down.cols == ffn && gate.cols == up.cols && down.rows == gate.cols);
  const size_t n = static_cast<size_t>(num_tokens * ffn);
  if (s.gate.size() < n) s.gate.resize(n);
  if (s.up.size() < n) s.up.resize(n);
  matmul(gate, x, num_tokens, s.gate.data());
  (matmul_same_input != nullptr ? *matmul_same_input : matmul)(up, x, num_tokens, s.up.data());
  // Token rows are independent: many of them go across the pool.
  constexpr int64_t kParallelValues = 1 << 15;
  if (pool != nullptr && pool->num_threads() > 1 && num_tokens > 1 && num_tokens * ffn >= kParallelValues) {
    const int64_t tasks = std::min<int64_t>(num_tokens, pool->num_threads() * 4);
    pool->parallel_for(tasks, [&](int64_t task, int) {
      for (int64_t t = task * num_tokens / tasks; t < (task + 1) * num_tokens / tasks; ++t) {
        kernels::swiglu(&s.gate[t * ffn], &s.up[t * ffn], ffn);
      }
    });
  } else {
    for (int64_t t = 0; t < num_tokens; ++t) kernels::swiglu(&s.gate[t * ffn], &s.up[t * ffn], ffn);
  }
  // x has been fully read (both matmuls above), so y may overwrite it.
  matmul(down, s.gate.data(), num_tokens, y);
}

}  // namespace hz
