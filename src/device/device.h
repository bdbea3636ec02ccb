// The GPU runtime as Status-returning calls: device query, buffers, streams, events and graph
// capture. One header for every build: with CUDA compiled it wraps the CUDA runtime
// (device_cuda.cc); without, device_stub.cc answers every call with a Status saying so, so no
// other file needs an #ifdef. No call aborts: a missing driver or GPU is an error value.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace hz::device {

// True when this binary was built with the CUDA backend (nvcc was found at configure time).
bool compiled();

// What `horizon doctor` and the planner need to know about one GPU.
struct DeviceInfo {
  int32_t ordinal = 0;
  std::string name;              // "NVIDIA H200"
  int32_t cc_major = 0;          // compute capability, 9.0 for Hopper
  int32_t cc_minor = 0;
  int32_t num_sms = 0;
  uint64_t total_bytes = 0;      // device memory
  uint64_t free_bytes = 0;       // free now (other processes included)
  uint64_t l2_bytes = 0;
  uint64_t smem_per_block_optin = 0;  // shared memory a block may opt into
  int32_t driver_version = 0;    // CUDA version the driver supports, 13000 = 13.0
  int32_t runtime_version = 0;   // the runtime this binary was built with
};

// "13.0" from 13000; "none" for 0.
std::string cuda_version_string(int32_t v);
// One line: "NVIDIA H200 (sm_90, 132 SMs), 139.8 GiB free of 140.4 GiB, driver 13.0, runtime 13.0".
std::string describe(const DeviceInfo& d);

// The number of usable GPUs. Errors say why there are none: no CUDA in this build, no driver,
// a driver older than the runtime ("driver version is insufficient"), no device.
Result<int32_t> device_count();
// Device `ordinal` (selects it for this thread). Errors as device_count, or an ordinal out of range.
Result<DeviceInfo> query(int32_t ordinal = 0);
// The check behind `--device cuda`: ok when GPU `ordinal` answers and is a Hopper (sm_90) GPU this
// build has kernels for; otherwise one error naming `flag`.
Status require_gpu(const char* flag, int32_t ordinal = 0);

// A non-ok Status for CUDA error code `err` (cudaError_t as int) raised by `what`; ok for 0.
Status cuda_status(int err, const char* what);

// Device memory: one allocation, freed when the owner goes away. Move-only.
class Buffer {
 public:
  Buffer() = default;
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // `bytes` of device memory (not zeroed). 0 bytes gives an empty buffer. Out of memory is an
  // error naming `what` and the size.
  static Result<Buffer> allocate(uint64_t bytes, const char* what);
  void* data() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  uint64_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  uint64_t bytes_ = 0;
};

// A CUDA stream (non-blocking with respect to the legacy default stream). Move-only.
class Stream {
 public:
  Stream() = default;
  ~Stream();
  Stream(Stream&& o) noexcept;
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  static Result<Stream> create();
  // cudaStream_t as an opaque pointer (kernel launchers cast it back).
  void* handle() const { return handle_; }
  Status synchronize() const;

 private:
  void* handle_ = nullptr;
};

// A CUDA event with timing. Move-only.
class Event {
 public:
  Event() = default;
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  static Result<Event> create();
  Status record(const Stream& s);
  Status synchronize() const;
  // Milliseconds from `start` to this event (both recorded and complete).
  Result<float> elapsed_ms_since(const Event& start) const;

 private:
  void* handle_ = nullptr;
};

// A captured sequence of launches on one stream, replayed as one unit (decode steps per
// batch-size bucket). begin_capture/end_capture bracket the launches. Move-only.
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(Graph&& o) noexcept;
  Graph& operator=(Graph&& o) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  static Status begin_capture(const Stream& s);
  // Ends the capture begun on `s` and instantiates it.
  static Result<Graph> end_capture(const Stream& s);
  Status launch(const Stream& s) const;
  bool empty() const { return exec_ == nullptr; }

 private:
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
};

// Copies and fills on `s` (asynchronous with respect to the host; pinned host memory is not
// required but pageable copies synchronize). `bytes` 0 is a no-op.
Status copy_to_device(void* dst, const void* src, uint64_t bytes, const Stream& s);
Status copy_to_host(void* dst, const void* src, uint64_t bytes, const Stream& s);
Status copy_on_device(void* dst, const void* src, uint64_t bytes, const Stream& s);
Status fill_bytes(void* dst, uint8_t value, uint64_t bytes, const Stream& s);

}  // namespace hz::device
