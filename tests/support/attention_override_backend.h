// A backend that forwards every call to another one except paged attention, which runs a given
// function instead: the attention tests run another kernel (or its host form) through the same
// fixture (tests/support/paged_attention_checks.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "kernels/cuda/backend.h"

namespace hz::test {

class AttentionOverrideBackend : public cuda::Backend {
 public:
  using Attention = std::function<Status(const cuda::PagedAttnArgs&)>;
  AttentionOverrideBackend(cuda::Backend& inner, Attention attention) : in_(inner), attention_(std::move(attention)) {}

  cuda::BackendKind kind() const override { return in_.kind(); }
  std::string describe() const override { return in_.describe(); }
  Result<uint64_t> free_bytes() const override { return in_.free_bytes(); }
  Result<cuda::DeviceMemory> allocate(uint64_t bytes, const char* what) override { return in_.allocate(bytes, what); }
  Status upload(void* dst, const void* src, uint64_t bytes) override { return in_.upload(dst, src, bytes); }
  Status download(void* dst, const void* src, uint64_t bytes) override { return in_.download(dst, src, bytes); }
  Status copy(void* dst, const void* src, uint64_t bytes) override { return in_.copy(dst, src, bytes); }
  Status fill_zero(void* dst, uint64_t bytes) override { return in_.fill_zero(dst, bytes); }
  Status synchronize() override { return in_.synchronize(); }
  Status quantize_q8_0(const float* x, BlockQ8_0* y, int64_t rows, int64_t n) override {
    return in_.quantize_q8_0(x, y, rows, n);
  }
  Status matmul(DType wtype, const void* w, int64_t m, int64_t n, const void* x, int64_t num_tokens, float* y) override {
    return in_.matmul(wtype, w, m, n, x, num_tokens, y);
  }
  Status rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps) override {
    return in_.rms_norm(x, w, y, rows, n, eps);
  }
  Status rope(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const int64_t* pos, const float* theta,
              int32_t rot_dim, float mscale, bool neox) override {
    return in_.rope(x, num_tokens, num_heads, head_dim, pos, theta, rot_dim, mscale, neox);
  }
  Status hadamard_heads(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const float* signs,
                        int32_t group, int32_t inverse) override {
    return in_.hadamard_heads(x, num_tokens, num_heads, head_dim, signs, group, inverse);
  }
  Status swiglu(float* gate, const float* up, int64_t n) override { return in_.swiglu(gate, up, n); }
  Status add(float* y, const float* x, int64_t n) override { return in_.add(y, x, n); }
  Status add_rows(float* y, const float* b, int64_t rows, int64_t n) override { return in_.add_rows(y, b, rows, n); }
  Status embedding(DType type, const void* table, int64_t vocab, int64_t dim, const int32_t* tokens, int64_t num_tokens,
                   float* y) override {
    return in_.embedding(type, table, vocab, dim, tokens, num_tokens, y);
  }
  Status kv_write(const cuda::KvWriteArgs& a) override { return in_.kv_write(a); }
  Status paged_attention(const cuda::PagedAttnArgs& a) override { return attention_(a); }
  bool graphs_supported() const override { return false; }
  Status begin_capture() override { return in_.begin_capture(); }
  Result<std::unique_ptr<cuda::CapturedGraph>> end_capture() override { return in_.end_capture(); }
  Status launch_graph(const cuda::CapturedGraph& g) override { return in_.launch_graph(g); }

 private:
  cuda::Backend& in_;
  Attention attention_;
};

}  // namespace hz::test
