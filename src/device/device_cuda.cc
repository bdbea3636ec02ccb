// The device layer over the CUDA runtime (static cudart; the driver is loaded by it at run time,
// never linked). Compiled by the host compiler: only kernels go through nvcc.
#include <cuda_runtime_api.h>

#include <utility>

#include "base/byte_size.h"
#include "device/device.h"

namespace hz::device {
namespace {

cudaStream_t stream_of(const Stream& s) { return static_cast<cudaStream_t>(s.handle()); }

}  // namespace

bool compiled() { return true; }

Status cuda_status(int err, const char* what) {
  if (err == cudaSuccess) return Status();
  const auto e = static_cast<cudaError_t>(err);
  // Clear a sticky-free error so the next call starts clean (sticky errors stay, as CUDA defines).
  (void)cudaGetLastError();
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  switch (e) {
    case cudaErrorInsufficientDriver:
      return make_error(StatusCode::kUnimplemented,
                        "{}: no usable CUDA driver: the driver is missing or older than this build's CUDA runtime {} ({})",
                        what, cuda_version_string(runtime), cudaGetErrorString(e));
    case cudaErrorNoDevice:
      return make_error(StatusCode::kUnimplemented, "{}: no CUDA GPU found ({})", what, cudaGetErrorString(e));
    case cudaErrorMemoryAllocation:
      return make_error(StatusCode::kResourceExhausted, "{}: out of device memory ({})", what, cudaGetErrorString(e));
    default:
      return make_error(StatusCode::kInternal, "{}: CUDA error {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e));
  }
}

Result<int32_t> device_count() {
  int n = 0;
  HZ_RETURN_IF_ERROR(cuda_status(cudaGetDeviceCount(&n), "CUDA"));
  if (n <= 0) return make_error(StatusCode::kUnimplemented, "CUDA: no CUDA GPU found");
  return n;
}

Result<DeviceInfo> query(int32_t ordinal) {
  HZ_ASSIGN_OR_RETURN(int32_t n, device_count());
  if (ordinal < 0 || ordinal >= n) return invalid_argument("CUDA device {} does not exist ({} found)", ordinal, n);
  HZ_RETURN_IF_ERROR(cuda_status(cudaSetDevice(ordinal), "cudaSetDevice"));
  cudaDeviceProp p{};
  HZ_RETURN_IF_ERROR(cuda_status(cudaGetDeviceProperties(&p, ordinal), "cudaGetDeviceProperties"));
  DeviceInfo d;
  d.ordinal = ordinal;
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.num_sms = p.multiProcessorCount;
  d.total_bytes = p.totalGlobalMem;
  d.l2_bytes = static_cast<uint64_t>(p.l2CacheSize);
  d.smem_per_block_optin = p.sharedMemPerBlockOptin;
  size_t free_b = 0, total_b = 0;
  HZ_RETURN_IF_ERROR(cuda_status(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"));
  d.free_bytes = free_b;
  d.total_bytes = total_b;
  cudaDriverGetVersion(&d.driver_version);
  cudaRuntimeGetVersion(&d.runtime_version);
  return d;
}

Status require_gpu(const char* flag, int32_t ordinal) {
  auto d = query(ordinal);
  if (!d.ok()) return Status(d.status().code(), fmt::format("{}: {}", flag, d.status().message()));
  if (d->cc_major != 9 || d->cc_minor != 0) {
    return unimplemented("{}: GPU {} is sm_{}{}; this build has CUDA kernels for sm_90a (Hopper: H100, H200) only", flag,
                         d->name, d->cc_major, d->cc_minor);
  }
  return Status();
}

Buffer::~Buffer() {
  if (ptr_ != nullptr) cudaFree(ptr_);
}
Buffer::Buffer(Buffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

Result<Buffer> Buffer::allocate(uint64_t bytes, const char* what) {
  Buffer b;
  if (bytes == 0) return b;
  const cudaError_t e = cudaMalloc(&b.ptr_, bytes);
  if (e != cudaSuccess) {
    b.ptr_ = nullptr;
    return cuda_status(e, what).with_context(fmt::format("allocating {} of device memory", format_bytes(bytes)));
  }
  b.bytes_ = bytes;
  return b;
}

Stream::~Stream() {
  if (handle_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
}
Stream::Stream(Stream&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (handle_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}
Result<Stream> Stream::create() {
  Stream s;
  cudaStream_t h = nullptr;
  HZ_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&h, cudaStreamNonBlocking), "cudaStreamCreate"));
  s.handle_ = h;
  return s;
}
Status Stream::synchronize() const { return cuda_status(cudaStreamSynchronize(stream_of(*this)), "cudaStreamSynchronize"); }

Event::~Event() {
  if (handle_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
}
Event::Event(Event&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (handle_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}
Result<Event> Event::create() {
  Event ev;
  cudaEvent_t h = nullptr;
  HZ_RETURN_IF_ERROR(cuda_status(cudaEventCreate(&h), "cudaEventCreate"));
  ev.handle_ = h;
  return ev;
}
Status Event::record(const Stream& s) {
  return cuda_status(cudaEventRecord(static_cast<cudaEvent_t>(handle_), stream_of(s)), "cudaEventRecord");
}
Status Event::synchronize() const { return cuda_status(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)), "cudaEventSynchronize"); }
Result<float> Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  HZ_RETURN_IF_ERROR(cuda_status(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.handle_), static_cast<cudaEvent_t>(handle_)), "cudaEventElapsedTime"));
  return ms;
}

Graph::~Graph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_ != nullptr) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}
Graph::Graph(Graph&& o) noexcept : graph_(std::exchange(o.graph_, nullptr)), exec_(std::exchange(o.exec_, nullptr)) {}
Graph& Graph::operator=(Graph&& o) noexcept {
  if (this != &o) {
    Graph old(std::move(*this));
    graph_ = std::exchange(o.graph_, nullptr);
    exec_ = std::exchange(o.exec_, nullptr);
  }
  return *this;
}
Status Graph::begin_capture(const Stream& s) {
  return cuda_status(cudaStreamBeginCapture(stream_of(s), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
}
Result<Graph> Graph::end_capture(const Stream& s) {
  Graph g;
  cudaGraph_t graph = nullptr;
  HZ_RETURN_IF_ERROR(cuda_status(cudaStreamEndCapture(stream_of(s), &graph), "cudaStreamEndCapture"));
  g.graph_ = graph;
  cudaGraphExec_t exec = nullptr;
  HZ_RETURN_IF_ERROR(cuda_status(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate"));
  g.exec_ = exec;
  return g;
}
Status Graph::launch(const Stream& s) const {
  if (exec_ == nullptr) return invalid_argument("launching an empty CUDA graph");
  return cuda_status(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), stream_of(s)), "cudaGraphLaunch");
}

Status copy_to_device(void* dst, const void* src, uint64_t bytes, const Stream& s) {
  if (bytes == 0) return Status();
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_of(s)), "copy to device");
}
Status copy_to_host(void* dst, const void* src, uint64_t bytes, const Stream& s) {
  if (bytes == 0) return Status();
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_of(s)), "copy to host");
}
Status copy_on_device(void* dst, const void* src, uint64_t bytes, const Stream& s) {
  if (bytes == 0) return Status();
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_of(s)), "copy on device");
}
Status fill_bytes(void* dst, uint8_t value, uint64_t bytes, const Stream& s) {
  if (bytes == 0) return Status();
  return cuda_status(cudaMemsetAsync(dst, value, bytes, stream_of(s)), "fill on device");
}

}  // namespace hz::device
