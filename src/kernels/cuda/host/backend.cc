// The two backends of kernels/cuda/backend.h: CUDA (cuda_kernels.h on one stream) and the host
// emulation (the CPU kernels, one thread, and host_reference.h).
#include "kernels/cuda/backend.h"

#include <sys/sysinfo.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/host_reference.h"
#include "kernels/kernels.h"
#include "kernels/ref/ref_kernels.h"

namespace hz::cuda {

void DeviceMemory::HostFree::operator()(uint8_t* p) const { std::free(p); }

class CudaBackend : public Backend {
 public:
  CudaBackend(device::Stream stream, device::DeviceInfo info) : stream_(std::move(stream)), info_(std::move(info)) {}

  BackendKind kind() const override { return BackendKind::kCuda; }
  std::string describe() const override { return "cuda: " + device::describe(info_); }
  Result<uint64_t> free_bytes() const override {
    HZ_ASSIGN_OR_RETURN(const device::DeviceInfo d, device::query(info_.ordinal));
    return d.free_bytes;
  }

  Result<DeviceMemory> allocate(uint64_t bytes, const char* what) override {
    DeviceMemory m;
    HZ_ASSIGN_OR_RETURN(m.buffer_, device::Buffer::allocate(bytes, what));
    m.ptr_ = m.buffer_.data();
    m.bytes_ = bytes;
    return m;
  }
  Status upload(void* dst, const void* src, uint64_t bytes) override { return device::copy_to_device(dst, src, bytes, stream_); }
  Status download(void* dst, const void* src, uint64_t bytes) override {
    HZ_RETURN_IF_ERROR(device::copy_to_host(dst, src, bytes, stream_));
    return stream_.synchronize();
  }
  Status copy(void* dst, const void* src, uint64_t bytes) override { return device::copy_on_device(dst, src, bytes, stream_); }
  Status fill_zero(void* dst, uint64_t bytes) override { return device::fill_bytes(dst, 0, bytes, stream_); }
  Status synchronize() override { return stream_.synchronize(); }

  Status quantize_q8_0(const float* x, BlockQ8_0* y, int64_t rows, int64_t n) override {
    return cuda::quantize_q8_0(x, y, rows, n, stream_);
  }
  Status matmul(DType wtype, const void* w, int64_t m, int64_t n, const void* x, int64_t num_tokens, float* y) override {
    return cuda::matmul(wtype, w, m, n, x, num_tokens, y, stream_);
  }
  Status rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps) override {
    return cuda::rms_norm(x, w, y, rows, n, eps, stream_);
  }
  Status rope(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const int64_t* pos, const float* theta,
              int32_t rot_dim, float mscale, bool neox) override {
    return cuda::rope(x, num_tokens, num_heads, head_dim, pos, theta, rot_dim, mscale, neox, stream_);
  }
  Status hadamard_heads(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const float* signs, int32_t group,
                        int32_t inverse) override {
    return cuda::hadamard_heads(x, num_tokens, num_heads, head_dim, signs, group, inverse, stream_);
  }
  Status swiglu(float* gate, const float* up, int64_t n) override { return cuda::swiglu(gate, up, n, stream_); }
  Status add(float* y, const float* x, int64_t n) override { return cuda::add(y, x, n, stream_); }
  Status add_rows(float* y, const float* b, int64_t rows, int64_t n) override { return cuda::add_rows(y, b, rows, n, stream_); }
  Status embedding(DType type, const void* table, int64_t vocab, int64_t dim, const int32_t* tokens, int64_t num_tokens,
                   float* y) override {
    return cuda::embedding(type, table, vocab, dim, tokens, num_tokens, y, stream_);
  }
  Status kv_write(const KvWriteArgs& a) override { return cuda::kv_write(a, stream_); }
  Status paged_attention(const PagedAttnArgs& a) override { return cuda::paged_attention(a, stream_); }

  bool graphs_supported() const override { return true; }
  Status begin_capture() override { return device::Graph::begin_capture(stream_); }
  Result<std::unique_ptr<CapturedGraph>> end_capture() override {
    HZ_ASSIGN_OR_RETURN(device::Graph g, device::Graph::end_capture(stream_));
    auto out = std::make_unique<Graph>();
    out->graph = std::move(g);
    return std::unique_ptr<CapturedGraph>(std::move(out));
  }
  Status launch_graph(const CapturedGraph& g) override { return static_cast<const Graph&>(g).graph.launch(stream_); }

 private:
  struct Graph : CapturedGraph {
    device::Graph graph;
  };
  device::Stream stream_;
  device::DeviceInfo info_;
};

Result<std::unique_ptr<Backend>> make_cuda_backend(const char* flag, int32_t ordinal) {
  HZ_RETURN_IF_ERROR(device::require_gpu(flag, ordinal));
  HZ_ASSIGN_OR_RETURN(device::DeviceInfo info, device::query(ordinal));
  HZ_ASSIGN_OR_RETURN(device::Stream stream, device::Stream::create());
  return std::unique_ptr<Backend>(new CudaBackend(std::move(stream), std::move(info)));
}

// ---- host emulation ----

class HostBackend : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::kHost; }
  std::string describe() const override { return "host emulation of the CUDA backend"; }
  Result<uint64_t> free_bytes() const override {
    struct sysinfo si {};
    if (sysinfo(&si) != 0) return Status(StatusCode::kInternal, "sysinfo failed");
    return static_cast<uint64_t>(si.freeram) * si.mem_unit;
  }

  Result<DeviceMemory> allocate(uint64_t bytes, const char* what) override {
    DeviceMemory m;
    if (bytes == 0) return m;
    const uint64_t rounded = (bytes + 63) / 64 * 64;
    auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, rounded));
    if (p == nullptr) return make_error(StatusCode::kResourceExhausted, "out of memory: {} bytes for {}", bytes, what);
    m.host_.reset(p);
    m.ptr_ = p;
    m.bytes_ = bytes;
    return m;
  }
  Status upload(void* dst, const void* src, uint64_t bytes) override { return copy(dst, src, bytes); }
  Status download(void* dst, const void* src, uint64_t bytes) override { return copy(dst, src, bytes); }
  Status copy(void* dst, const void* src, uint64_t bytes) override {
    HZ_RETURN_IF_ERROR(not_capturing("a copy"));
    if (bytes > 0) std::memmove(dst, src, bytes);
    return Status();
  }
  Status fill_zero(void* dst, uint64_t bytes) override {
    HZ_RETURN_IF_ERROR(not_capturing("a fill"));
    if (bytes > 0) std::memset(dst, 0, bytes);
    return Status();
  }
  Status synchronize() override { return not_capturing("synchronize"); }

  Status quantize_q8_0(const float* x, BlockQ8_0* y, int64_t rows, int64_t n) override {
    return run([=] {
      for (int64_t r = 0; r < rows; ++r) kernels::quantize_row_q8_0(x + r * n, y + r * (n / kQK8_0), n);
      return Status();
    });
  }
  Status matmul(DType wtype, const void* w, int64_t m, int64_t n, const void* x, int64_t num_tokens, float* y) override {
    return run([=] {
      kernels::matmul(wtype, n, w, row_bytes(wtype, n), 0, m, x, kernels::activation_row_bytes(wtype, n), num_tokens, y, m);
      return Status();
    });
  }
  Status rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps) override {
    return run([=, this] {
      if (w == nullptr && static_cast<int64_t>(ones_.size()) < n) ones_.assign(n, 1.0f);
      for (int64_t r = 0; r < rows; ++r) kernels::rms_norm(x + r * n, w != nullptr ? w : ones_.data(), y + r * n, n, eps);
      return Status();
    });
  }
  Status rope(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const int64_t* pos, const float* theta,
              int32_t rot_dim, float mscale, bool neox) override {
    return run([=] {
      host::rope(x, num_tokens, num_heads, head_dim, pos, theta, rot_dim, mscale, neox);
      return Status();
    });
  }
  Status hadamard_heads(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const float* signs, int32_t group,
                        int32_t inverse) override {
    return run([=] {
      for (int64_t r = 0; r < num_tokens * num_heads; ++r) {
        const float* sg = signs + static_cast<int64_t>(r % num_heads / group) * head_dim;
        kernels::ref::hadamard_rows(x + r * head_dim, 1, head_dim, sg, inverse);
      }
      return Status();
    });
  }
  Status swiglu(float* gate, const float* up, int64_t n) override {
    return run([=] {
      kernels::swiglu(gate, up, n);
      return Status();
    });
  }
  Status add(float* y, const float* x, int64_t n) override {
    return run([=] {
      kernels::add(y, x, n);
      return Status();
    });
  }
  Status add_rows(float* y, const float* b, int64_t rows, int64_t n) override {
    return run([=] {
      for (int64_t r = 0; r < rows; ++r) kernels::add(y + r * n, b, n);
      return Status();
    });
  }
  Status embedding(DType type, const void* table, int64_t vocab, int64_t dim, const int32_t* tokens, int64_t num_tokens,
                   float* y) override {
    return run([=] {
      const uint64_t rb = row_bytes(type, dim);
      for (int64_t t = 0; t < num_tokens; ++t) {
        float* yr = y + t * dim;
        if (tokens[t] < 0 || tokens[t] >= vocab) {
          for (int64_t i = 0; i < dim; ++i) yr[i] = std::numeric_limits<float>::quiet_NaN();
          continue;
        }
        kernels::dequantize_row(type, static_cast<const uint8_t*>(table) + static_cast<uint64_t>(tokens[t]) * rb, yr, dim);
      }
      return Status();
    });
  }
  Status kv_write(const KvWriteArgs& a) override {
    return run([=] {
      host::kv_write(a);
      return Status();
    });
  }
  // The kernel the GPU would run: the chunked kernel's phases (attention_lanes.h), or the first
  // kernel's host form under HORIZON_CUDA_ATTENTION=simple. The same values either way.
  Status paged_attention(const PagedAttnArgs& a) override {
    const bool chunked = default_attention_kernel() == AttentionKernel::kChunked;
    return run([=] {
      if (chunked) {
        host::paged_attention_chunked(a);
      } else {
        host::paged_attention(a);
      }
      return Status();
    });
  }

  bool graphs_supported() const override { return true; }
  Status begin_capture() override {
    if (capture_ != nullptr) return invalid_argument("host emulation: a capture is already under way");
    capture_ = std::make_unique<Graph>();
    return Status();
  }
  Result<std::unique_ptr<CapturedGraph>> end_capture() override {
    if (capture_ == nullptr) return invalid_argument("host emulation: no capture under way");
    return std::unique_ptr<CapturedGraph>(std::move(capture_));
  }
  Status launch_graph(const CapturedGraph& g) override {
    HZ_RETURN_IF_ERROR(not_capturing("launching a graph"));
    for (const auto& call : static_cast<const Graph&>(g).calls) HZ_RETURN_IF_ERROR(call());
    return Status();
  }

 private:
  // The recorded calls of a host graph, run in order by launch_graph.
  struct Graph : CapturedGraph {
    std::vector<std::function<Status()>> calls;
  };
  // A kernel call: run now, or recorded (with its arguments) while capturing.
  template <typename F>
  Status run(F&& f) {
    if (capture_ != nullptr) {
      capture_->calls.emplace_back(std::forward<F>(f));
      return Status();
    }
    return f();
  }
  Status not_capturing(const char* what) const {
    if (capture_ == nullptr) return Status();
    return invalid_argument("host emulation: {} while capturing a graph", what);
  }

  std::unique_ptr<Graph> capture_;
  std::vector<float> ones_;
};

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<HostBackend>(); }

}  // namespace hz::cuda
