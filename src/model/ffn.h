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

// Scratch for the hidden activations, grown on demand and reused. Move-only by intent.
struct FfnScratch {
  std::vector<float> gate, up;  // [num_tokens][ffn]
};

// y[num_tokens][hidden] = SwiGLU FFN of x[num_tokens][hidden]. y may alias x. matmul_same_input
// (optional) runs the up projection right after the gate one on the same x (it may reuse the
// gate's quantized activations); pool (optional) runs the activation of many tokens across threads.
void swiglu_ffn(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x, int64_t num_tokens, float* y,
                FfnScratch& scratch, const MatmulFn& matmul, const MatmulFn* matmul_same_input = nullptr,
                ThreadPool* pool = nullptr);

}  // namespace hz
