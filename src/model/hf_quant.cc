#include "model/hf_quant.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstring>

#include "kernels/kv_codec.h"

namespace hz {
namespace {

using json = nlohmann::json;

// quantization_config.<key> as an integer in [lo, hi], or `def` when absent.
Result<int64_t> int_field(const json& q, const char* key, int64_t def, int64_t lo, int64_t hi, const std::string& source) {
  if (!q.contains(key) || q[key].is_null()) return def;
  if (!q[key].is_number_integer())
    return data_loss("{}: quantization_config.{} must be an integer, got {}", source, key, q[key].dump());
  const int64_t v = q[key].get<int64_t>();
  if (v < lo || v > hi) return data_loss("{}: quantization_config.{} = {} is outside [{}, {}]", source, key, v, lo, hi);
  return v;
}

std::string string_field(const json& q, const char* key) {
  return q.contains(key) && q[key].is_string() ? q[key].get<std::string>() : std::string();
}

// [rows, cols] of a block-size field ("weight_block_size", "block_structure").
Status read_block(const json& q, const char* key, const std::string& field, const std::string& source, HfQuantConfig* c) {
  if (!q.contains(key) || q[key].is_null()) return Status();
  const json& b = q[key];
  if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() || b[0].get<int64_t>() < 1 ||
      b[1].get<int64_t>() < 1 || b[0].get<int64_t>() > (1 << 20) || b[1].get<int64_t>() > (1 << 20))
    return data_loss("{}: {} must be two positive integers [rows, columns], got {}", source, field, b.dump());
  c->block_rows = b[0].get<int64_t>();
  c->block_cols = b[1].get<int64_t>();
  return Status();
}

// compressed-tensors: every config group must quantize weights to 8-bit floats (or 8-bit
// symmetric integers) with a scale per tensor, per channel or per block.
Status read_compressed_tensors(const json& q, const std::string& source, HfQuantConfig* c) {
  const std::string format = string_field(q, "format");
  if (format != "float-quantized" && format != "naive-quantized" && format != "int-quantized")
    return unimplemented("{}: quantization_config.format '{}' (compressed-tensors) is not supported: horizon loads "
                         "float-quantized (FP8) and int-quantized (8-bit) weights",
                         source, format);
  if (!q.contains("config_groups") || !q["config_groups"].is_object() || q["config_groups"].empty())
    return data_loss("{}: quantization_config.config_groups is missing or empty", source);
  for (const auto& [name, group] : q["config_groups"].items()) {
    const std::string field = "quantization_config.config_groups." + name + ".weights";
    if (!group.is_object() || !group.contains("weights") || !group["weights"].is_object())
      return data_loss("{}: {} is missing", source, field);
    const json& w = group["weights"];
    const std::string type = string_field(w, "type");
    HZ_ASSIGN_OR_RETURN(int64_t bits, int_field(w, "num_bits", 0, 0, 64, source));
    if (bits != 8 || (type != "float" && type != "int"))
      return unimplemented("{}: {} has {}-bit {} weights; horizon loads 8-bit float (FP8) and 8-bit int weights", source,
                           field, bits, type.empty() ? "untyped" : type);
    if (w.contains("symmetric") && w["symmetric"].is_boolean() && !w["symmetric"].get<bool>())
      return unimplemented("{}: {}.symmetric is false; horizon loads symmetric weights only", source, field);
    const std::string strategy = string_field(w, "strategy");
    if (strategy != "tensor" && strategy != "channel" && strategy != "block")
      return unimplemented("{}: {}.strategy '{}' is not supported (tensor, channel or block)", source, field, strategy);
    if (strategy == "block") HZ_RETURN_IF_ERROR(read_block(w, "block_structure", field + ".block_structure", source, c));
  }
  c->method = HfQuantMethod::kFp8;
  return Status();
}

}  // namespace

std::string HfQuantConfig::describe() const {
  switch (method) {
    case HfQuantMethod::kNone: return "unquantized";
    case HfQuantMethod::kFp8:
      return block_rows > 0 ? fmt::format("{} 8-bit, {}x{} block scales", name, block_rows, block_cols)
                            : fmt::format("{} 8-bit", name);
    case HfQuantMethod::kGptq:
      return group_size > 0 ? fmt::format("GPTQ {}-bit, groups of {}", bits, group_size) : fmt::format("GPTQ {}-bit", bits);
    case HfQuantMethod::kAwq: return fmt::format("AWQ {}-bit, groups of {}", bits, group_size);
  }
  return name;
}

Result<HfQuantConfig> parse_hf_quant_config(const json& config, const std::string& source) {
  HfQuantConfig c;
  if (!config.is_object() || !config.contains("quantization_config") || config["quantization_config"].is_null()) return c;
  const json& q = config["quantization_config"];
  if (!q.is_object()) return data_loss("{}: quantization_config must be an object", source);
  c.name = string_field(q, "quant_method");
  if (c.name == "fp8") {
    const std::string fmt_name = string_field(q, "fmt");
    if (!fmt_name.empty() && fmt_name != "e4m3")
      return unimplemented("{}: quantization_config.fmt '{}' is not supported (FP8 weights must be e4m3)", source, fmt_name);
    HZ_RETURN_IF_ERROR(read_block(q, "weight_block_size", "quantization_config.weight_block_size", source, &c));
    c.method = HfQuantMethod::kFp8;
  } else if (c.name == "compressed-tensors") {
    HZ_RETURN_IF_ERROR(read_compressed_tensors(q, source, &c));
  } else if (c.name == "gptq") {
    HZ_ASSIGN_OR_RETURN(int64_t bits, int_field(q, "bits", -1, -1, 64, source));
    if (bits != 2 && bits != 4 && bits != 8)
      return unimplemented("{}: quantization_config.bits = {}: horizon loads 2-, 4- and 8-bit GPTQ weights", source, bits);
    HZ_ASSIGN_OR_RETURN(int64_t group, int_field(q, "group_size", -1, -1, int64_t{1} << 30, source));
    if (group == 0) return data_loss("{}: quantization_config.group_size must be -1 or positive, got 0", source);
    const std::string format = string_field(q, "checkpoint_format");
    if (!format.empty() && format != "gptq" && format != "gptq_v2")
      return unimplemented("{}: quantization_config.checkpoint_format '{}' is not supported (gptq, gptq_v2)", source, format);
    c.method = HfQuantMethod::kGptq;
    c.bits = static_cast<int32_t>(bits);
    c.group_size = group > 0 ? group : 0;
    // The original GPTQ format stores every zero point minus one.
    c.zero_offset = format == "gptq_v2" ? 0 : 1;
  } else if (c.name == "awq") {
    HZ_ASSIGN_OR_RETURN(int64_t bits, int_field(q, "bits", 4, 0, 64, source));
    if (bits != 4) return unimplemented("{}: quantization_config.bits = {}: horizon loads 4-bit AWQ weights", source, bits);
    HZ_ASSIGN_OR_RETURN(int64_t group, int_field(q, "group_size", 128, 1, int64_t{1} << 30, source));
    const std::string version = string_field(q, "version");
    if (!version.empty() && version != "gemm" && version != "GEMM")
      return unimplemented("{}: quantization_config.version '{}' is not supported: horizon loads AWQ's gemm layout", source, version);
    if (q.contains("zero_point") && q["zero_point"].is_boolean() && !q["zero_point"].get<bool>())
      return unimplemented("{}: quantization_config.zero_point is false; horizon loads AWQ weights with zero points", source);
    c.method = HfQuantMethod::kAwq;
    c.bits = 4;
    c.group_size = group;
  } else {
    return unimplemented("{}: quantization_config.quant_method '{}' is not supported: horizon loads fp8, "
                         "compressed-tensors (8-bit), gptq and awq checkpoints, or unquantized ones",
                         source, c.name);
  }
  return c;
}

void dequant_scaled8_rows(const uint8_t* weight, bool e4m3, int64_t cols, const float* scale, int64_t block_rows,
                          int64_t block_cols, int64_t row_begin, int64_t row_end, float* out) {
  const int64_t scale_cols = (cols + block_cols - 1) / block_cols;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* w = weight + r * cols;
    const float* s = scale + (r / block_rows) * scale_cols;
    float* o = out + (r - row_begin) * cols;
    if (e4m3) {
      static const auto kValues = [] {
        std::array<float, 256> v{};
        for (int i = 0; i < 256; ++i) v[i] = kernels::e4m3_to_f32(static_cast<uint8_t>(i));
        return v;
      }();
      for (int64_t c = 0; c < cols; ++c) o[c] = kValues[w[c]] * s[c / block_cols];
    } else {
      for (int64_t c = 0; c < cols; ++c) o[c] = static_cast<float>(static_cast<int8_t>(w[c])) * s[c / block_cols];
    }
  }
}

void dequant_gptq_rows(const int32_t* qweight, const int32_t* qzeros, const float* scales, const int32_t* g_idx,
                       int64_t in, int64_t out, int32_t bits, int64_t group_size, int32_t zero_offset,
                       int64_t row_begin, int64_t row_end, float* dst) {
  const int32_t pack = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const int64_t zero_cols = out / pack;
  for (int64_t o = row_begin; o < row_end; ++o) {
    float* d = dst + (o - row_begin) * in;
    const int64_t zc = o / pack;
    const int32_t zshift = static_cast<int32_t>(o % pack) * bits;
    for (int64_t i = 0; i < in; ++i) {
      const int64_t g = g_idx != nullptr ? g_idx[i] : (group_size > 0 ? i / group_size : 0);
      const uint32_t word = static_cast<uint32_t>(qweight[(i / pack) * out + o]);
      const int32_t q = static_cast<int32_t>((word >> ((i % pack) * bits)) & mask);
      const int32_t z = static_cast<int32_t>((static_cast<uint32_t>(qzeros[g * zero_cols + zc]) >> zshift) & mask) + zero_offset;
      d[i] = scales[g * out + o] * static_cast<float>(q - z);
    }
  }
}

void dequant_awq_rows(const int32_t* qweight, const int32_t* qzeros, const float* scales, int64_t in, int64_t out,
                      int64_t group_size, int64_t row_begin, int64_t row_end, float* dst) {
  // Output column j of a packed word sits in nibble kNibble[j] (AWQ packs columns 0 2 4 6 1 3 5 7).
  static constexpr int32_t kNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  const int64_t words = out / 8;
  for (int64_t o = row_begin; o < row_end; ++o) {
    float* d = dst + (o - row_begin) * in;
    const int64_t wc = o / 8;
    const int32_t shift = kNibble[o % 8] * 4;
    for (int64_t i = 0; i < in; ++i) {
      const int64_t g = i / group_size;
      const int32_t q = static_cast<int32_t>((static_cast<uint32_t>(qweight[i * words + wc]) >> shift) & 15u);
      const int32_t z = static_cast<int32_t>((static_cast<uint32_t>(qzeros[g * words + wc]) >> shift) & 15u);
      d[i] = static_cast<float>(q - z) * scales[g * out + o];
    }
  }
}

}  // namespace hz
