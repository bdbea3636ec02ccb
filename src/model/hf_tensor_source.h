// The tensors of a Hugging Face folder (model.safetensors, or the shards that
// model.safetensors.index.json names) under the engine's GGUF tensor names, memory-mapped.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "format/safetensors.h"
#include "format/tensor_source.h"
#include "model/hf_quant.h"

namespace hz {

// "model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight"; nullopt for names the engine
// has no use for (rotary inv_freq buffers, unknown modules).
std::optional<std::string> gguf_name_for_hf(std::string_view hf_name);

class HfTensorSource : public TensorSource {
 public:
  // Maps the shards and validates them against the index; errors name the file and the field.
  // Mapped tensors must be F32, F16 or BF16, or a pre-quantized matrix of `quant`'s method
  // (config.json's quantization_config), which is dequantized at once and stored as `dequant_type`
  // (F32 where its rows do not fit that type's blocks).
  static Result<std::unique_ptr<HfTensorSource>> open(const std::string& dir, const HfQuantConfig& quant = {},
                                                      DType dequant_type = DType::kQ8_0);

  const std::string& path() const override { return dir_; }
  const TensorInfo* get_tensor(std::string_view gguf_name) const override;
  std::vector<const TensorInfo*> tensor_list() const override;

  const std::vector<std::string>& shard_paths() const { return shard_paths_; }
  // HF names that map to no engine tensor (skipped).
  const std::vector<std::string>& unmapped() const { return unmapped_; }
  // The HF name an engine tensor came from.
  const std::string& hf_name(const TensorInfo& t) const;

  // Pre-quantized matrices converted at open: how many, into which types, and the bytes they take.
  struct Dequantized {
    std::string from;  // HfQuantConfig::describe()
    int64_t num_tensors = 0;
    uint64_t bytes = 0;
    std::vector<DType> types;  // distinct, in order of first use
    std::string type_names() const;  // "q8_0/f32"
  };
  const Dequantized& dequantized() const { return dequantized_; }

 private:
  HfTensorSource() = default;
  std::string dir_;
  std::vector<std::string> shard_paths_;
  std::vector<SafetensorsFile> shards_;
  std::vector<TensorInfo> tensors_;
  std::vector<std::string> hf_names_;  // parallel to tensors_
  std::map<std::string, size_t, std::less<>> index_;
  std::vector<std::string> unmapped_;
  std::vector<std::unique_ptr<uint8_t[]>> owned_;  // data of the converted tensors
  Dequantized dequantized_;
};

}  // namespace hz
