// TensorSource: a directory of named tensors (dtype, GGUF-order dims, data pointer into a memory
// mapping) that model code binds weights from, whatever container holds them (GGUF, safetensors).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace hz {

// One tensor of a container. Non-owning: `data` points into the container's mapping.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<uint64_t> dims;  // GGUF order: dims[0] is the contiguous (row) dimension
  uint64_t offset = 0;          // from the start of the container's data section
  uint64_t num_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping

  uint64_t num_elements() const;
  std::string shape_string() const;
};

// Implemented by GgufFile and by model/hf_tensor_source.h. Implementations are immutable after
// opening, so lookups are safe from several threads.
class TensorSource {
 public:
  virtual ~TensorSource() = default;

  // The file or folder the tensors come from (named in errors).
  virtual const std::string& path() const = 0;
  // null when absent.
  virtual const TensorInfo* get_tensor(std::string_view name) const = 0;
  // Every tensor, in the container's order.
  virtual std::vector<const TensorInfo*> tensor_list() const = 0;

  // Error naming the tensor and the source when absent.
  Result<const TensorInfo*> require_tensor(std::string_view name) const;

 protected:
  TensorSource() = default;
  TensorSource(const TensorSource&) = default;
  TensorSource& operator=(const TensorSource&) = default;
  TensorSource(TensorSource&&) noexcept = default;
  TensorSource& operator=(TensorSource&&) noexcept = default;
};

}  // namespace hz
