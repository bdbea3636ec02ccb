#include "format/tensor_source.h"

namespace hz {

uint64_t TensorInfo::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return n;
}

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

Result<const TensorInfo*> TensorSource::require_tensor(std::string_view name) const {
  const TensorInfo* t = get_tensor(name);
  if (t == nullptr) return not_found("{}: required tensor '{}' is missing", path(), name);
  return t;
}

}  // namespace hz
