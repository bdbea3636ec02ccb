// GGUF container: reader (memory-mapped, validated) and writer (streamed).
// Knows the container only: metadata key/values and a tensor directory. No model knowledge.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "format/tensor_source.h"
#include "tensor/dtype.h"

namespace hz {

enum class GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
const char* gguf_type_name(GgufType t);

struct GgufValue;

// An array value. Numeric elements are kept as their raw little-endian bytes.
struct GgufArray {
  GgufType elem_type = GgufType::kU8;
  uint64_t count = 0;
  std::vector<uint8_t> raw;            // numeric and bool elements, count * element size bytes
  std::vector<std::string> strings;    // elem_type == kString
  std::vector<GgufValue> nested;       // elem_type == kArray
};

struct GgufValue {
  GgufType type = GgufType::kU8;
  uint64_t u = 0;     // unsigned integer types
  int64_t i = 0;      // signed integer types
  double f = 0;       // float types
  bool b = false;     // bool
  std::string str;    // string
  std::shared_ptr<GgufArray> arr;  // array (shared so values copy cheaply)

  static GgufValue make_u32(uint32_t v) { GgufValue x; x.type = GgufType::kU32; x.u = v; return x; }
  static GgufValue make_i32(int32_t v) { GgufValue x; x.type = GgufType::kI32; x.i = v; return x; }
  static GgufValue make_u64(uint64_t v) { GgufValue x; x.type = GgufType::kU64; x.u = v; return x; }
  static GgufValue make_f32(float v) { GgufValue x; x.type = GgufType::kF32; x.f = v; return x; }
  static GgufValue make_bool(bool v) { GgufValue x; x.type = GgufType::kBool; x.b = v; return x; }
  static GgufValue make_str(std::string v) { GgufValue x; x.type = GgufType::kString; x.str = std::move(v); return x; }
  static GgufValue make_str_array(std::vector<std::string> v);
  static GgufValue make_f32_array(const std::vector<float>& v);
  static GgufValue make_i32_array(const std::vector<int32_t>& v);

  bool is_integer() const;
  bool is_float() const { return type == GgufType::kF32 || type == GgufType::kF64; }
  // A short human-readable rendering (arrays abbreviated), for `horizon inspect`.
  std::string to_display_string(size_t max_items = 8) const;
};

// The GGUF tensor directory entry is the generic one (offset: from the start of the data section).
using GgufTensorInfo = TensorInfo;

class GgufFile : public TensorSource {
 public:
  // Maps and validates a GGUF file; every error names the file and the field.
  static Result<GgufFile> open(const std::string& path);
  // Parses from memory (fuzzing, tests). The buffer must outlive the file object.
  static Result<GgufFile> parse(const uint8_t* data, size_t size, const std::string& name);

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::string& path() const override { return path_; }
  size_t file_size() const { return size_; }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  // Metadata lookups. get_* return nullopt when absent; a present key of the wrong type is
  // an error in require_* and the typed getters with defaults.
  const GgufValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  Result<uint64_t> require_uint(std::string_view key) const;
  Result<uint64_t> get_uint_or(std::string_view key, uint64_t def) const;
  Result<int64_t> get_int_or(std::string_view key, int64_t def) const;
  Result<double> get_float_or(std::string_view key, double def) const;
  Result<bool> get_bool_or(std::string_view key, bool def) const;
  Result<std::string> get_string_or(std::string_view key, std::string def) const;
  Result<std::string> require_string(std::string_view key) const;
  // Array accessors: error when present with the wrong element type; empty when absent.
  Result<const std::vector<std::string>*> get_string_array(std::string_view key) const;
  Result<std::vector<float>> get_f32_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;

  // Tensor lookups: get_ may return null; require_ errors naming the tensor.
  const GgufTensorInfo* get_tensor(std::string_view name) const override;
  std::vector<const TensorInfo*> tensor_list() const override;

 private:
  GgufFile() = default;
  std::string path_;
  std::unique_ptr<MappedFile> map_;  // null when parsed from memory
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Writes a GGUF v3 file. Metadata and tensor infos are collected first; tensor data is produced
// tensor by tensor at write time (a producer callback), so large files stream without being held
// in memory.
class GgufWriter {
 public:
  explicit GgufWriter(uint64_t alignment = 32) : alignment_(alignment) {}

  void set(const std::string& key, GgufValue value);
  void set_u32(const std::string& key, uint32_t v) { set(key, GgufValue::make_u32(v)); }
  void set_i32(const std::string& key, int32_t v) { set(key, GgufValue::make_i32(v)); }
  void set_f32(const std::string& key, float v) { set(key, GgufValue::make_f32(v)); }
  void set_bool(const std::string& key, bool v) { set(key, GgufValue::make_bool(v)); }
  void set_str(const std::string& key, std::string v) { set(key, GgufValue::make_str(std::move(v))); }
  void remove(const std::string& key);

  // `fill` writes exactly row_bytes(dtype, dims[0]) * rows bytes into `dst`.
  using Producer = std::function<void(uint8_t* dst, uint64_t num_bytes)>;
  void add_tensor(const std::string& name, DType dtype, std::vector<uint64_t> dims, Producer fill);
  // Convenience: copies `data` (num_bytes must match the shape).
  void add_tensor_data(const std::string& name, DType dtype, std::vector<uint64_t> dims, const void* data);

  // Streams the file; `progress(done_tensors, total)` may be null.
  Status write(const std::string& path, const std::function<void(size_t, size_t)>& progress = nullptr) const;
  // Writes into memory (tests, fuzz seeds).
  std::vector<uint8_t> write_to_memory() const;

 private:
  struct Tensor {
    std::string name;
    DType dtype;
    std::vector<uint64_t> dims;
    uint64_t num_bytes;
    Producer fill;
  };
  std::vector<uint8_t> header_bytes(std::vector<uint64_t>* offsets) const;

  uint64_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace hz
