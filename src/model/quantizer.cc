#include "model/quantizer.h"

#include <algorithm>

#include <fmt/format.h>
#include <cstring>
#include <thread>
#include <vector>

#include "format/gguf.h"
#include "kernels/kernels.h"
#include "model/hf_folder.h"

namespace hz {
namespace {

// GGUF general.file_type ids (llama.cpp's LLAMA_FTYPE_*) for the types we write.
uint32_t file_type_id(DType t) {
  switch (t) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ8_0: return 7;
    case DType::kQ4_K: return 14;  // LLAMA_FTYPE_MOSTLY_Q4_K_S
    case DType::kQ5_K: return 16;  // LLAMA_FTYPE_MOSTLY_Q5_K_S
    case DType::kQ6_K: return 18;
    case DType::kBF16: return 32;
    default: return 0;
  }
}

bool can_write(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kQ8_0 || t == DType::kQ4_0 ||
         t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K;
}

// Source row of GGUF row `r` of a Q/K matrix read from an HF folder (llama): HF keeps each head's
// rows in rotate-half order (i * hd/2 + j), GGUF in adjacent-pair order (2j + i), as llama.cpp's
// converter permutes them.
int64_t hf_source_row(int64_t r, int64_t head_dim) {
  const int64_t h = r / head_dim, k = r % head_dim;
  const int64_t j = k / 2, i = k % 2;
  return h * head_dim + i * (head_dim / 2) + j;
}

// Tensor order of the output: embedding, layers in numeric order, output norm and head.
std::pair<int64_t, std::string> order_key(const std::string& name) {
  if (name == "token_embd.weight") return {-1, name};
  if (name.rfind("blk.", 0) == 0) return {std::atoll(name.c_str() + 4), name};
  return {INT64_MAX, name};
}

uint32_t mix_file_type_id(QuantMix m) {
  switch (m) {
    case QuantMix::kQ4_K_S: return 14;
    case QuantMix::kQ4_K_M: return 15;
    case QuantMix::kQ5_K_S: return 16;
    case QuantMix::kQ5_K_M: return 17;
    default: return 0;
  }
}

bool is_kquant(DType t) { return t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K; }

int32_t layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return static_cast<int32_t>(std::atol(name.c_str() + 4));
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// llama.cpp's rule for which layers get more bits: the first and last eighth, and every third
// layer in between.
bool use_more_bits(int32_t i, int32_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

}  // namespace

DType mix_tensor_type(QuantMix mix, DType base, const MixPosition& p) {
  if (mix == QuantMix::kUniform) return base;
  const bool m_mix = mix == QuantMix::kQ4_K_M || mix == QuantMix::kQ5_K_M;
  if (p.name == "output.weight" || (!p.has_output && p.name == "token_embd.weight")) return DType::kQ6_K;
  if (contains(p.name, "attn_v.weight")) {
    if (p.num_experts == 8) return DType::kQ8_0;
    if (m_mix && use_more_bits(p.layer_idx, p.num_layers)) return DType::kQ6_K;
    if (mix == QuantMix::kQ4_K_S && p.layer_idx < 4) return DType::kQ5_K;
    return base;
  }
  if (contains(p.name, "ffn_down")) {
    if (m_mix && use_more_bits(p.layer_idx, p.num_layers)) return DType::kQ6_K;
    if (mix == QuantMix::kQ4_K_S && p.layer_idx < p.num_layers / 8) return DType::kQ5_K;
    return base;
  }
  if (contains(p.name, "attn_output.weight")) {
    if (p.num_experts == 8 && (mix == QuantMix::kQ4_K_S || mix == QuantMix::kQ4_K_M)) return DType::kQ5_K;
    return base;
  }
  return base;
}

Status quantize_model(const std::string& in_path, const std::string& out_path, const QuantizeOptions& opts,
                      const std::function<void(size_t, size_t)>& progress, QuantizeSummary* summary) {
  for (DType t : {opts.type, opts.embeddings_type.value_or(opts.type), opts.output_type.value_or(opts.type), opts.fallback_type}) {
    if (!can_write(t)) return unimplemented("quantize: output type {} is not supported (use q8_0, q4_0, q4_k, q6_k, f16, bf16, f32)", dtype_name(t));
  }
  // The input: a GGUF, or an HF folder (its metadata image and safetensors tensors).
  std::optional<GgufFile> gguf;
  std::optional<HfFolder> hf;
  const GgufFile* meta;
  std::vector<const TensorInfo*> tensors;
  bool permute_qk = false;
  int32_t head_dim = 0;
  if (is_hf_folder(in_path)) {
    HZ_ASSIGN_OR_RETURN(HfFolder folder, HfFolder::open(in_path));
    hf.emplace(std::move(folder));
    meta = &hf->metadata;
    tensors = hf->tensors->tensor_list();
    std::sort(tensors.begin(), tensors.end(), [](const TensorInfo* a, const TensorInfo* b) { return order_key(a->name) < order_key(b->name); });
    permute_qk = hf->config.arch == "llama";  // qwen2/qwen3 GGUFs keep the HF (NeoX) row order
    head_dim = hf->config.head_dim;
  } else {
    HZ_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(in_path));
    gguf.emplace(std::move(f));
    meta = &*gguf;
    tensors = gguf->tensor_list();
  }
  GgufWriter w(meta->alignment());
  for (const auto& [key, value] : meta->metadata()) {
    if (key != "general.alignment") w.set(key, value);
  }
  w.set_u32("general.file_type", opts.mix != QuantMix::kUniform ? mix_file_type_id(opts.mix) : file_type_id(opts.type));
  // The mix rules need the layer count, the expert count and whether the head is tied.
  MixPosition pos;
  for (const TensorInfo* tp : tensors) {
    pos.num_layers = std::max(pos.num_layers, layer_of(tp->name) + 1);
  }
  pos.has_output = false;
  for (const TensorInfo* tp : tensors) pos.has_output |= tp->name == "output.weight";
  auto arch = meta->get_string_or("general.architecture", "");
  if (arch.ok() && !arch->empty()) {
    auto experts = meta->get_int_or(*arch + ".expert_count", 0);
    if (experts.ok()) pos.num_experts = static_cast<int32_t>(*experts);
  }
  QuantizeSummary local;
  QuantizeSummary& sum = summary != nullptr ? *summary : local;
  auto record = [&sum](DType t, uint64_t bytes) {
    for (auto& r : sum.by_type) {
      if (r.type == t) {
        ++r.num_tensors;
        r.bytes += bytes;
        return;
      }
    }
    sum.by_type.push_back({t, 1, bytes});
  };
  w.set_u32("general.quantization_version", 2);
  bool requant_warned = false;
  for (const TensorInfo* tp : tensors) {
    const TensorInfo& t = *tp;
    if (!traits(t.dtype).supported) return unimplemented("{}: tensor '{}' has type {}, which cannot be read", in_path, t.name, dtype_name(t.dtype));
    DType target = t.dtype;
    const bool matrix = t.dims.size() >= 2 && t.name.size() > 7 && t.name.compare(t.name.size() - 7, 7, ".weight") == 0 &&
                        t.name.find("_norm") == std::string::npos;
    // llama.cpp leaves MoE routers unquantized in its mixes.
    if (matrix && !(opts.mix != QuantMix::kUniform && contains(t.name, "ffn_gate_inp"))) {
      pos.name = t.name;
      pos.layer_idx = layer_of(t.name);
      target = mix_tensor_type(opts.mix, opts.type, pos);
      if (t.name == "token_embd.weight" && opts.embeddings_type) target = *opts.embeddings_type;
      if (t.name == "output.weight" && opts.output_type) target = *opts.output_type;
      if (t.dims[0] % traits(target).block_elems != 0) {
        const DType wanted = target;
        target = is_kquant(target) && t.dims[0] % kQK8_0 == 0 ? DType::kQ8_0 : opts.fallback_type;
        sum.warnings.push_back(fmt::format("{}: rows of {} values are not a multiple of {} ({}): written as {}", t.name,
                                           t.dims[0], traits(wanted).block_elems, dtype_name(wanted), dtype_name(target)));
      }
    }
    record(target, row_bytes(target, static_cast<int64_t>(t.dims[0])) * (t.num_elements() / t.dims[0]));
    // Re-encoding a quantized matrix keeps its error and adds the new type's: said once.
    if (target != t.dtype && traits(t.dtype).block_elems > 1 && !requant_warned) {
      requant_warned = true;
      sum.warnings.push_back(fmt::format("{} is already {}: re-encoding quantized weights keeps their error and adds {}'s; "
                                         "quantize from an F16, BF16 or F32 model where you can",
                                         t.name, dtype_name(t.dtype), dtype_name(target)));
    }
    const bool permute = permute_qk && t.dims.size() == 2 &&
                         (t.name.find(".attn_q.weight") != std::string::npos || t.name.find(".attn_k.weight") != std::string::npos);
    if (permute && t.dims[1] % head_dim != 0)
      return data_loss("{}: tensor '{}' has {} rows, not a multiple of head_dim {}", in_path, t.name, t.dims[1], head_dim);
    if (target == t.dtype && !permute) {
      w.add_tensor_data(t.name, t.dtype, t.dims, t.data);
      continue;
    }
    const TensorInfo* src = &t;
    const int64_t hd = permute ? head_dim : 0;
    w.add_tensor(t.name, target, t.dims, [src, target, hd](uint8_t* dst, uint64_t) {
      const int64_t n = static_cast<int64_t>(src->dims[0]);
      const int64_t rows = static_cast<int64_t>(src->num_elements() / src->dims[0]);
      const uint64_t in_rb = row_bytes(src->dtype, n), out_rb = row_bytes(target, n);
      // Rows are independent: the k-quant searches are costly, so they run on every core (each
      // row's bytes do not depend on which thread encodes it).
      auto encode_rows = [&](int64_t begin, int64_t end) {
        std::vector<float> row(n);
        for (int64_t r = begin; r < end; ++r) {
          const int64_t sr = hd > 0 ? hf_source_row(r, hd) : r;
          kernels::dequantize_row(src->dtype, src->data + sr * in_rb, row.data(), n);
          kernels::encode_row(target, row.data(), dst + r * out_rb, n);
        }
      };
      const int64_t num_threads = is_kquant(target) ? std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), rows) : 1;
      std::vector<std::thread> workers;
      for (int64_t t = 1; t < num_threads; ++t) workers.emplace_back(encode_rows, rows * t / num_threads, rows * (t + 1) / num_threads);
      encode_rows(0, rows / std::max<int64_t>(num_threads, 1));
      for (auto& th : workers) th.join();
    });
  }
  return w.write(out_path, progress);
}

}  // namespace hz
