// safetensors container: reader (memory-mapped, validated like the GGUF reader) and a small writer
// for tests and conversions. Knows the container only: a JSON header (dtype, shape, data_offsets
// per tensor, optional string `__metadata__`) followed by the raw little-endian tensor bytes.
#pragma once

#include <cstdint>
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

// One tensor of a safetensors header.
struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;        // as in the header: "F32", "BF16", "F8_E4M3", ...
  std::optional<DType> dtype;    // the engine's type; nullopt for dtypes it has none for (U8, BOOL, F8_*)
  uint32_t elem_bytes = 0;
  std::vector<uint64_t> shape;   // safetensors order: the last dimension is contiguous
  uint64_t begin = 0;            // data_offsets, relative to the data section
  uint64_t end = 0;
  const uint8_t* data = nullptr;  // into the mapping
  uint64_t num_bytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  // Limits (the reference implementation caps the header at 100 MB too).
  static constexpr uint64_t kMaxHeaderBytes = 100u << 20;
  static constexpr size_t kMaxTensors = 1u << 20;
  static constexpr size_t kMaxDims = 8;
  static constexpr size_t kMaxNameBytes = 1u << 16;

  // Maps and validates a file; every error names the file and the field.
  static Result<SafetensorsFile> open(const std::string& path);
  // Parses from memory (fuzzing, tests). The buffer must outlive the object.
  static Result<SafetensorsFile> parse(const uint8_t* data, size_t size, const std::string& name);

  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;

  const std::string& path() const { return path_; }
  size_t file_size() const { return size_; }
  uint64_t header_bytes() const { return header_bytes_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafetensorsTensor* find(std::string_view name) const;

  // The tensor as the engine sees it (GGUF-order dims, under `engine_name`). Refuses, naming the
  // file and tensor, dtypes other than F32/F16/BF16 and data not aligned to the element size.
  Result<TensorInfo> engine_view(const SafetensorsTensor& t, const std::string& engine_name) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  std::unique_ptr<MappedFile> map_;  // null when parsed from memory
  size_t size_ = 0;
  uint64_t header_bytes_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// Builds a safetensors file in memory: tensors are laid out in the order added, the header padded
// with spaces to a multiple of 8 bytes (as the reference writer does) so data stays aligned.
class SafetensorsWriter {
 public:
  // `dtype_name`: "F32", "F16", "BF16", ...; shape in safetensors order; bytes must match.
  void add(const std::string& name, const std::string& dtype_name, std::vector<uint64_t> shape, std::vector<uint8_t> bytes);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  std::vector<uint8_t> to_bytes() const;
  Status write(const std::string& path) const;

 private:
  struct Entry {
    std::string name, dtype_name;
    std::vector<uint64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace hz
