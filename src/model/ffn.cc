#include "model/ffn.h"

#include "base/check.h"
#include "kernels/kernels.h"

namespace hz {

void for_each_row_range(ThreadPool* pool, int64_t rows, int64_t row_values,
                        const std::function<void(int64_t, int64_t)>& fn) {
  constexpr int64_t kParallelValues = 1 << 15;
  if (pool == nullptr || pool->num_threads() < 2 || rows < 2 || rows * row_values < kParallelValues) return fn(0, rows);
  pool->parallel_range(rows, [&](int64_t begin, int64_t end, int) { fn(begin, end); });
}

void swiglu_ffn(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x, int64_t num_tokens, float* y,
                FfnScratch& s, const MatmulFn& matmul, const MatmulPairFn* matmul_pair, ThreadPool* pool) {
  const int64_t ffn = gate.rows;
  HZ_CHECK(up.rows == ffn && down.cols == ffn && gate.cols == up.cols && down.rows == gate.cols);
  const size_t n = static_cast<size_t>(num_tokens * ffn);
  if (s.gate.size() < n) s.gate.resize(n);
  if (s.up.size() < n) s.up.resize(n);
  if (matmul_pair != nullptr) {
    (*matmul_pair)(gate, s.gate.data(), up, s.up.data(), x, num_tokens);
  } else {
    matmul(gate, x, num_tokens, s.gate.data());
    matmul(up, x, num_tokens, s.up.data());
  }
  for_each_row_range(pool, num_tokens, ffn, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) kernels::swiglu(&s.gate[t * ffn], &s.up[t * ffn], ffn);
  });
  // x has been fully read (both matmuls above), so y may overwrite it.
  matmul(down, s.gate.data(), num_tokens, y);
}

}  // namespace hz
