// The SwiGLU feed-forward block shared by dense layers, routed experts and the shared expert:
// y = (silu(x Wgate) * (x Wup)) Wdown over a batch of token rows.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/thread_pool.h"
#include "model/weights.h"

namespace hz {

// y[num_tokens][w.rows] = x[num_tokens][w.cols] W^T. The model's matmul (threads, activation
// quantization); every output element is independent of num_tokens (kernels::matmul's contract).
using MatmulFn = std::function<void(const Matrix& w, const float* x, int64_t num_tokens, float* y)>;

// ya = x A^T and yb = x B^T for one x (the gate and up projections), possibly in one dispatch.
using MatmulPairFn =
    std::function<void(const Matrix& a, float* ya, const Matrix& b, float* yb, const float* x, int64_t num_tokens)>;

// Scratch for the hidden activations, grown on demand and reused. Move-only by intent.
struct FfnScratch {
  std::vector<float> gate, up;  // [num_tokens][ffn]
};

// fn(begin, end) over the token rows [0, rows) of row_values values each: split across the pool
// (ThreadPool::parallel_range) when there are enough values to pay for the dispatch, else one
// call on this thread. Rows must be independent. pool may be null.
void for_each_row_range(ThreadPool* pool, int64_t rows, int64_t row_values,
                        const std::function<void(int64_t, int64_t)>& fn);

// y[num_tokens][hidden] = SwiGLU FFN of x[num_tokens][hidden]. y may alias x. matmul_pair
// (optional) runs the gate and up projections together (else `matmul` runs each); pool (optional) runs the activation of many tokens across threads.
void swiglu_ffn(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x, int64_t num_tokens, float* y,
                FfnScratch& scratch, const MatmulFn& matmul, const MatmulPairFn* matmul_pair = nullptr,
                ThreadPool* pool = nullptr);

}  // namespace hz
