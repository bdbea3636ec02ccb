// The device layer of a build without CUDA: every call that would touch a GPU returns one error
// saying so; objects stay empty. Keeps device.h's callers free of #ifdefs.
#include <utility>

#include "device/device.h"

namespace hz::device {
namespace {

Status no_cuda(const char* what) {
  return unimplemented("{}: this build has no CUDA backend (configured without nvcc or with -DHORIZON_CUDA=OFF; "
                       "rebuild with nvcc installed)", what);
}

}  // namespace

bool compiled() { return false; }

Status cuda_status(int err, const char* what) {
  return err == 0 ? Status() : make_error(StatusCode::kInternal, "{}: CUDA error {}", what, err);
}
Result<int32_t> device_count() { return no_cuda("CUDA"); }
Result<DeviceInfo> query(int32_t) { return no_cuda("CUDA"); }
Status require_gpu(const char* flag, int32_t) { return no_cuda(flag); }

Buffer::~Buffer() = default;
Buffer::Buffer(Buffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  ptr_ = std::exchange(o.ptr_, nullptr);
  bytes_ = std::exchange(o.bytes_, 0);
  return *this;
}
Result<Buffer> Buffer::allocate(uint64_t bytes, const char* what) {
  if (bytes == 0) return Buffer();
  return no_cuda(what);
}

Stream::~Stream() = default;
Stream::Stream(Stream&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
Stream& Stream::operator=(Stream&& o) noexcept {
  handle_ = std::exchange(o.handle_, nullptr);
  return *this;
}
Result<Stream> Stream::create() { return no_cuda("creating a CUDA stream"); }
Status Stream::synchronize() const { return no_cuda("cudaStreamSynchronize"); }

Event::~Event() = default;
Event::Event(Event&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
Event& Event::operator=(Event&& o) noexcept {
  handle_ = std::exchange(o.handle_, nullptr);
  return *this;
}
Result<Event> Event::create() { return no_cuda("creating a CUDA event"); }
Status Event::record(const Stream&) { return no_cuda("cudaEventRecord"); }
Status Event::synchronize() const { return no_cuda("cudaEventSynchronize"); }
Result<float> Event::elapsed_ms_since(const Event&) const { return no_cuda("cudaEventElapsedTime"); }

Graph::~Graph() = default;
Graph::Graph(Graph&& o) noexcept : graph_(std::exchange(o.graph_, nullptr)), exec_(std::exchange(o.exec_, nullptr)) {}
Graph& Graph::operator=(Graph&& o) noexcept {
  graph_ = std::exchange(o.graph_, nullptr);
  exec_ = std::exchange(o.exec_, nullptr);
  return *this;
}
Status Graph::begin_capture(const Stream&) { return no_cuda("CUDA graph capture"); }
Result<Graph> Graph::end_capture(const Stream&) { return no_cuda("CUDA graph capture"); }
Status Graph::launch(const Stream&) const { return no_cuda("cudaGraphLaunch"); }

Status copy_to_device(void*, const void*, uint64_t bytes, const Stream&) { return bytes == 0 ? Status() : no_cuda("copy to device"); }
Status copy_to_host(void*, const void*, uint64_t bytes, const Stream&) { return bytes == 0 ? Status() : no_cuda("copy to host"); }
Status copy_on_device(void*, const void*, uint64_t bytes, const Stream&) { return bytes == 0 ? Status() : no_cuda("copy on device"); }
Status fill_bytes(void*, uint8_t, uint64_t bytes, const Stream&) { return bytes == 0 ? Status() : no_cuda("fill on device"); }

}  // namespace hz::device
