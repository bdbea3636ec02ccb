// Backend: where a device model's memory lives and its kernels run, behind one interface. The CUDA
// backend allocates GPU memory and launches the kernels of cuda_kernels.h on one stream; the host
// backend keeps "device" memory in host RAM and runs the same contracts with the CPU kernels and
// host_reference.h, so the device model, its KV arena and the engine's GPU path run, and are tested,
// on a machine without a GPU (CI). Every call returns a Status: out of memory and launch errors are
// values. Not thread-safe: one engine thread owns a backend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "device/device.h"
#include "kernels/cuda/launch.h"
#include "tensor/dtype.h"

namespace hz::cuda {

// Memory of a backend: GPU memory (CUDA) or host memory (the host backend). Move-only; freed when
// it goes away. Its pointer is only for the backend's calls (not host-addressable for CUDA).
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(DeviceMemory&&) noexcept = default;
  DeviceMemory& operator=(DeviceMemory&&) noexcept = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  uint64_t bytes() const { return bytes_; }

 private:
  friend class CudaBackend;
  friend class HostBackend;
  struct HostFree {
    void operator()(uint8_t* p) const;
  };
  device::Buffer buffer_;                   // CUDA
  std::unique_ptr<uint8_t, HostFree> host_;  // host backend (64-byte aligned)
  void* ptr_ = nullptr;
  uint64_t bytes_ = 0;
};

enum class BackendKind { kCuda, kHost };

// A graph of a backend's kernel calls, captured once and launched as a unit: a CUDA graph, or the
// host emulation's recorded calls. Its calls keep the arguments they were captured with and read
// memory when the graph runs.
class CapturedGraph {
 public:
  virtual ~CapturedGraph() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  // "cuda (NVIDIA H200 ...)" or "host emulation": logs and errors.
  virtual std::string describe() const = 0;
  // Memory a planner may give away now (device memory free; for the host backend, available RAM).
  virtual Result<uint64_t> free_bytes() const = 0;

  // `bytes` of memory (not zeroed); out of memory is an error naming `what` and the size.
  virtual Result<DeviceMemory> allocate(uint64_t bytes, const char* what) = 0;
  // Host -> backend, backend -> host (returns when the data is on the host), backend -> backend.
  // `src` of an upload must stay valid until the next synchronize() or download().
  virtual Status upload(void* dst, const void* src, uint64_t bytes) = 0;
  virtual Status download(void* dst, const void* src, uint64_t bytes) = 0;
  virtual Status copy(void* dst, const void* src, uint64_t bytes) = 0;
  virtual Status fill_zero(void* dst, uint64_t bytes) = 0;
  virtual Status synchronize() = 0;

  // The kernels, with cuda_kernels.h's contracts (every pointer is this backend's memory).
  virtual Status quantize_q8_0(const float* x, BlockQ8_0* y, int64_t rows, int64_t n) = 0;
  virtual Status matmul(DType wtype, const void* w, int64_t m, int64_t n, const void* x, int64_t num_tokens, float* y) = 0;
  virtual Status rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps) = 0;
  virtual Status rope(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const int64_t* pos,
                      const float* theta, int32_t rot_dim, float mscale, bool neox) = 0;
  virtual Status hadamard_heads(float* x, int64_t num_tokens, int32_t num_heads, int32_t head_dim, const float* signs,
                                int32_t group, int32_t inverse) = 0;
  virtual Status swiglu(float* gate, const float* up, int64_t n) = 0;
  virtual Status add(float* y, const float* x, int64_t n) = 0;
  virtual Status add_rows(float* y, const float* b, int64_t rows, int64_t n) = 0;
  virtual Status embedding(DType type, const void* table, int64_t vocab, int64_t dim, const int32_t* tokens,
                           int64_t num_tokens, float* y) = 0;
  virtual Status kv_write(const KvWriteArgs& a) = 0;
  virtual Status paged_attention(const PagedAttnArgs& a) = 0;

  // Graphs: between begin_capture and end_capture the kernel calls above are recorded, not run
  // (on the CUDA backend's stream: a CUDA graph; on the host emulation: the calls themselves);
  // launch_graph runs a captured graph of this backend. Copies and synchronize() are errors while
  // capturing. (HORIZON_CUDA_GRAPHS=0 is read by the device model, which then captures none.)
  virtual bool graphs_supported() const = 0;
  virtual Status begin_capture() = 0;
  virtual Result<std::unique_ptr<CapturedGraph>> end_capture() = 0;
  virtual Status launch_graph(const CapturedGraph& g) = 0;
};

// The CUDA backend on GPU `ordinal`: errors (no CUDA in this build, no driver, no Hopper GPU) name `flag`.
Result<std::unique_ptr<Backend>> make_cuda_backend(const char* flag, int32_t ordinal = 0);
// The host emulation (always available).
std::unique_ptr<Backend> make_host_backend();

}  // namespace hz::cuda
