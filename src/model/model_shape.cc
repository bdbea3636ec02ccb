#include "model/model_shape.h"

#include "format/json_limits.h"
#include "model/arch.h"
#include "model/hf_quant.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace hz {

KvGeometry ModelShape::kv_geometry() const {
  KvGeometry g;
  g.num_layers = num_layers;
  if (is_mla()) {
    g.num_streams = 1;
    g.num_heads = 1;
    g.head_dim = kv_lora_rank + qk_rope_head_dim;
  } else {
    g.num_streams = 2;
    g.num_heads = num_kv_heads;
    g.head_dim = head_dim;
  }
  return g;
}

Status ModelShape::validate() const {
  auto need = [&](uint64_t v, const char* field) -> Status {
    if (v == 0) return invalid_argument("{}: {} is 0 or missing", source, field);
    return Status();
  };
  HZ_RETURN_IF_ERROR(need(num_layers, "the number of layers"));
  HZ_RETURN_IF_ERROR(need(hidden, "the hidden size"));
  HZ_RETURN_IF_ERROR(need(num_heads, "the number of attention heads"));
  HZ_RETURN_IF_ERROR(need(vocab, "the vocabulary size"));
  // Bounds keep every product below 2^64 (a 2^20-wide, 2^12-layer model is far beyond any real one).
  const uint64_t kMax = uint64_t{1} << 24;
  for (auto [v, field] : std::initializer_list<std::pair<uint64_t, const char*>>{{num_layers, "layers"}, {hidden, "hidden size"}, {num_heads, "heads"},
                          {num_kv_heads, "KV heads"}, {head_dim, "head_dim"}, {ffn, "FFN size"}, {vocab, "vocab size"},
                          {num_experts, "experts"}, {moe_ffn, "expert FFN size"}, {kv_lora_rank, "kv_lora_rank"},
                          {q_lora_rank, "q_lora_rank"}, {qk_rope_head_dim, "qk_rope_head_dim"},
                          {qk_nope_head_dim, "qk_nope_head_dim"}, {v_head_dim, "v_head_dim"},
                          {num_shared_experts, "shared experts"}, {shared_expert_ffn, "shared expert FFN size"}}) {
    if (v > kMax) return invalid_argument("{}: {} {} is implausibly large", source, field, v);
  }
  if (num_layers > 4096) return invalid_argument("{}: {} layers is implausibly many", source, num_layers);
  if (is_mla()) {
    HZ_RETURN_IF_ERROR(need(qk_rope_head_dim, "qk_rope_head_dim"));
    HZ_RETURN_IF_ERROR(need(v_head_dim, "v_head_dim"));
  } else {
    HZ_RETURN_IF_ERROR(need(num_kv_heads, "the number of KV heads"));
    HZ_RETURN_IF_ERROR(need(head_dim, "head_dim"));
    if (num_heads % num_kv_heads != 0)
      return invalid_argument("{}: {} attention heads are not a multiple of {} KV heads", source, num_heads, num_kv_heads);
  }
  if (num_experts > 0) {
    HZ_RETURN_IF_ERROR(need(num_experts_used, "the number of experts used per token"));
    HZ_RETURN_IF_ERROR(need(moe_ffn, "the expert FFN size"));
    if (num_experts_used > num_experts)
      return invalid_argument("{}: {} experts used per token but only {} experts", source, num_experts_used, num_experts);
  }
  if (first_k_dense > num_layers)
    return invalid_argument("{}: first_k_dense_replace {} exceeds the {} layers", source, first_k_dense, num_layers);
  if (first_k_dense > 0 || num_experts == 0) HZ_RETURN_IF_ERROR(need(ffn, "the FFN size (intermediate_size)"));
  // Totals in floating point, so that absurd combinations are refused before any uint64 product
  // can overflow: 10^15 parameters or 1 GB of KV per token are far beyond any real model.
  double params = 0;
  for (const auto& c : enumerate_weights(*this)) params += double(c.rows) * double(c.row_len) * double(c.count);
  if (params > 1e15) return invalid_argument("{}: the shape implies {:.3g} parameters, implausibly many", source, params);
  KvGeometry g = kv_geometry();
  double kv_per_token = double(g.num_layers) * double(g.num_streams) * double(g.num_heads) * double(g.head_dim) * 4;
  if (kv_per_token > 1e9) return invalid_argument("{}: the shape implies {:.3g} bytes of KV per token, implausibly many", source, kv_per_token);
  return Status();
}

std::vector<WeightClass> enumerate_weights(const ModelShape& s) {
  std::vector<WeightClass> w;
  const uint64_t L = s.num_layers;
  auto matrix = [&](std::string name, uint64_t rows, uint64_t row_len, uint64_t count, bool expert = false) {
    if (rows > 0 && row_len > 0 && count > 0) w.push_back({std::move(name), rows, row_len, count, true, expert});
  };
  auto vec = [&](std::string name, uint64_t len, uint64_t count) {
    if (len > 0 && count > 0) w.push_back({std::move(name), 1, len, count, false, false});
  };
  matrix("token_embd.weight", s.vocab, s.hidden, 1);
  vec("blk.*.attn_norm.weight", s.hidden, L);
  vec("blk.*.ffn_norm.weight", s.hidden, L);
  if (s.is_mla()) {
    const uint64_t qk = s.qk_nope_head_dim + s.qk_rope_head_dim;
    if (s.q_lora_rank > 0) {
      matrix("blk.*.attn_q_a.weight", s.q_lora_rank, s.hidden, L);
      vec("blk.*.attn_q_a_norm.weight", s.q_lora_rank, L);
      matrix("blk.*.attn_q_b.weight", s.num_heads * qk, s.q_lora_rank, L);
    } else {
      matrix("blk.*.attn_q.weight", s.num_heads * qk, s.hidden, L);
    }
    matrix("blk.*.attn_kv_a_mqa.weight", s.kv_lora_rank + s.qk_rope_head_dim, s.hidden, L);
    vec("blk.*.attn_kv_a_norm.weight", s.kv_lora_rank, L);
    matrix("blk.*.attn_kv_b.weight", s.num_heads * (s.qk_nope_head_dim + s.v_head_dim), s.kv_lora_rank, L);
    matrix("blk.*.attn_output.weight", s.hidden, s.num_heads * s.v_head_dim, L);
  } else {
    const uint64_t q_dim = s.num_heads * s.head_dim, kv_dim = s.num_kv_heads * s.head_dim;
    matrix("blk.*.attn_q.weight", q_dim, s.hidden, L);
    matrix("blk.*.attn_k.weight", kv_dim, s.hidden, L);
    matrix("blk.*.attn_v.weight", kv_dim, s.hidden, L);
    matrix("blk.*.attn_output.weight", s.hidden, q_dim, L);
    if (s.attention_bias) {
      vec("blk.*.attn_q.bias", q_dim, L);
      vec("blk.*.attn_k.bias", kv_dim, L);
      vec("blk.*.attn_v.bias", kv_dim, L);
    }
    if (s.qk_norm) {
      vec("blk.*.attn_q_norm.weight", s.head_dim, L);
      vec("blk.*.attn_k_norm.weight", s.head_dim, L);
    }
  }
  const uint64_t dense_layers = s.is_moe() ? s.first_k_dense : L;
  const uint64_t moe_layers = L - dense_layers;
  matrix("blk.*.ffn_gate.weight", s.ffn, s.hidden, dense_layers);
  matrix("blk.*.ffn_up.weight", s.ffn, s.hidden, dense_layers);
  matrix("blk.*.ffn_down.weight", s.hidden, s.ffn, dense_layers);
  if (s.is_moe()) {
    // The router stays f32 (llama.cpp's quantizer leaves ffn_gate_inp alone).
    w.push_back({"blk.*.ffn_gate_inp.weight", s.num_experts, s.hidden, moe_layers, false, false});
    matrix("blk.*.ffn_gate_exps.weight", s.moe_ffn, s.hidden, moe_layers * s.num_experts, true);
    matrix("blk.*.ffn_up_exps.weight", s.moe_ffn, s.hidden, moe_layers * s.num_experts, true);
    matrix("blk.*.ffn_down_exps.weight", s.hidden, s.moe_ffn, moe_layers * s.num_experts, true);
    const uint64_t shared = s.num_shared_experts * s.shared_expert_ffn;  // shared experts run as one wide FFN
    matrix("blk.*.ffn_gate_shexp.weight", shared, s.hidden, moe_layers);
    matrix("blk.*.ffn_up_shexp.weight", shared, s.hidden, moe_layers);
    matrix("blk.*.ffn_down_shexp.weight", s.hidden, shared, moe_layers);
    if (s.shared_expert_gate) vec("blk.*.ffn_gate_inp_shexp.weight", s.hidden, moe_layers);
  }
  vec("output_norm.weight", s.hidden, 1);
  if (!s.tied_embeddings) matrix("output.weight", s.vocab, s.hidden, 1);
  return w;
}

// ---------------------------------------------------------------- GGUF

bool arch_reads_expert_ffn_key(const std::string& arch) {
  const ArchSpec* spec = find_arch(arch);
  return spec == nullptr || spec->expert_ffn_key;  // architectures horizon does not run: as written
}

uint64_t default_expert_ffn(const std::string& arch, uint64_t ffn, uint64_t experts_used) {
  const ArchSpec* spec = find_arch(arch);
  if (spec != nullptr && spec->expert_ffn_key && experts_used > 0) return std::max<uint64_t>(1, ffn / experts_used);
  return ffn;
}

bool arch_has_shared_expert(const std::string& arch) {
  const ArchSpec* spec = find_arch(arch);
  return spec != nullptr && spec->shared_expert;
}

namespace {

// A per-layer array (e.g. head_count_kv in some files) counts by its largest entry.
Result<uint64_t> gguf_uint_or_max(const GgufFile& f, const std::string& key, uint64_t def) {
  const GgufValue* v = f.find(key);
  if (v == nullptr) return def;
  if (v->type == GgufType::kArray) {
    auto arr = f.get_int_array(key);
    if (!arr.ok()) return arr.status();
    int64_t m = 0;
    for (int64_t x : *arr) {
      if (x < 0) return data_loss("{}: metadata '{}' has a negative entry", f.path(), key);
      m = std::max(m, x);
    }
    return static_cast<uint64_t>(m);
  }
  return f.require_uint(key);
}

}  // namespace

Result<ModelShape> model_shape_from_gguf(const GgufFile& f) {
  ModelShape s;
  s.source = f.path();
  HZ_ASSIGN_OR_RETURN(s.architecture, f.require_string("general.architecture"));
  const std::string a = s.architecture + ".";
  HZ_ASSIGN_OR_RETURN(s.num_layers, f.require_uint(a + "block_count"));
  HZ_ASSIGN_OR_RETURN(s.hidden, f.require_uint(a + "embedding_length"));
  HZ_ASSIGN_OR_RETURN(s.num_heads, gguf_uint_or_max(f, a + "attention.head_count", 0));
  if (s.num_heads == 0) return not_found("{}: required metadata key '{}attention.head_count' is missing or 0", f.path(), a);
  HZ_ASSIGN_OR_RETURN(s.num_kv_heads, gguf_uint_or_max(f, a + "attention.head_count_kv", s.num_heads));
  HZ_ASSIGN_OR_RETURN(s.ffn, gguf_uint_or_max(f, a + "feed_forward_length", 0));
  HZ_ASSIGN_OR_RETURN(s.head_dim, f.get_uint_or(a + "attention.key_length", s.hidden / s.num_heads));
  HZ_ASSIGN_OR_RETURN(s.max_positions, f.get_uint_or(a + "context_length", 0));
  HZ_ASSIGN_OR_RETURN(s.num_experts, f.get_uint_or(a + "expert_count", 0));
  HZ_ASSIGN_OR_RETURN(s.num_experts_used, f.get_uint_or(a + "expert_used_count", 0));
  s.moe_ffn = default_expert_ffn(s.architecture, s.ffn, s.num_experts_used);
  if (arch_reads_expert_ffn_key(s.architecture)) {
    HZ_ASSIGN_OR_RETURN(s.moe_ffn, f.get_uint_or(a + "expert_feed_forward_length", s.moe_ffn));
  }
  const bool shared = arch_has_shared_expert(s.architecture) && s.num_experts > 0;
  HZ_ASSIGN_OR_RETURN(s.shared_expert_ffn,
                      f.get_uint_or(a + "expert_shared_feed_forward_length", shared ? default_shared_expert_ffn(s.ffn) : 0));
  HZ_ASSIGN_OR_RETURN(s.num_shared_experts, f.get_uint_or(a + "expert_shared_count", s.shared_expert_ffn > 0 ? 1 : 0));
  if (s.num_shared_experts > 0 && s.shared_expert_ffn == 0) s.shared_expert_ffn = s.moe_ffn;
  HZ_ASSIGN_OR_RETURN(s.first_k_dense, f.get_uint_or(a + "leading_dense_block_count", 0));
  HZ_ASSIGN_OR_RETURN(s.kv_lora_rank, f.get_uint_or(a + "attention.kv_lora_rank", 0));
  if (s.is_mla()) {
    HZ_ASSIGN_OR_RETURN(s.q_lora_rank, f.get_uint_or(a + "attention.q_lora_rank", 0));
    HZ_ASSIGN_OR_RETURN(s.qk_rope_head_dim, f.require_uint(a + "rope.dimension_count"));
    if (s.head_dim < s.qk_rope_head_dim)
      return data_loss("{}: {}attention.key_length {} is smaller than rope.dimension_count {}", f.path(), a, s.head_dim,
                       s.qk_rope_head_dim);
    s.qk_nope_head_dim = s.head_dim - s.qk_rope_head_dim;
    HZ_ASSIGN_OR_RETURN(s.v_head_dim, f.get_uint_or(a + "attention.value_length", s.qk_nope_head_dim));
  }
  HZ_ASSIGN_OR_RETURN(s.rope_scaling.type, f.get_string_or(a + "rope.scaling.type", ""));
  if (s.rope_scaling.type == "none") s.rope_scaling.type.clear();
  HZ_ASSIGN_OR_RETURN(s.rope_scaling.factor, f.get_float_or(a + "rope.scaling.factor", 1.0));
  HZ_ASSIGN_OR_RETURN(s.rope_scaling.original_max_positions, f.get_uint_or(a + "rope.scaling.original_context_length", 0));

  HZ_ASSIGN_OR_RETURN(uint64_t vocab, f.get_uint_or(a + "vocab_size", 0));
  if (vocab == 0) {
    HZ_ASSIGN_OR_RETURN(const std::vector<std::string>* tokens, f.get_string_array("tokenizer.ggml.tokens"));
    vocab = tokens->size();
  }
  if (const GgufTensorInfo* emb = f.get_tensor("token_embd.weight"); emb != nullptr && emb->dims.size() == 2) {
    if (vocab == 0) vocab = emb->dims[1];
  }
  s.vocab = vocab;
  s.tied_embeddings = f.get_tensor("output.weight") == nullptr;
  s.attention_bias = f.get_tensor("blk.0.attn_q.bias") != nullptr;
  s.qk_norm = f.get_tensor("blk.0.attn_q_norm.weight") != nullptr;

  uint64_t bytes = 0, params = 0, expert_params = 0;
  std::map<std::string, uint64_t> bytes_by_type;
  for (const auto& t : f.tensors()) {
    bytes += t.num_bytes;
    params += t.num_elements();
    if (t.name.find("_exps.") != std::string::npos) expert_params += t.num_elements();
    if (t.dims.size() >= 2) bytes_by_type[dtype_name(t.dtype)] += t.num_bytes;
  }
  s.file_weight_bytes = bytes;
  s.file_params = params;
  s.file_expert_params = expert_params;
  uint64_t best = 0;
  for (const auto& [name, b] : bytes_by_type) {
    if (b > best) {
      best = b;
      s.file_weight_type = name;
    }
  }
  HZ_RETURN_IF_ERROR(s.validate());
  return s;
}

// ---------------------------------------------------------------- Hugging Face config.json

namespace {

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, std::string source) : j_(j), source_(std::move(source)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  Result<uint64_t> uint(const char* key, std::optional<uint64_t> def) const {
    if (!has(key)) {
      if (def) return *def;
      return not_found("{}: required field '{}' is missing", source_, key);
    }
    const auto& v = j_[key];
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
    return invalid_argument("{}: field '{}' must be a non-negative integer, got {}", source_, key, v.dump());
  }
  // The first present key of several aliases.
  Result<uint64_t> uint_any(std::initializer_list<const char*> keys, std::optional<uint64_t> def) const {
    for (const char* k : keys) {
      if (has(k)) return uint(k, def);
    }
    return uint(*keys.begin(), def);
  }
  Result<bool> boolean(const char* key, bool def) const {
    if (!has(key)) return def;
    if (!j_[key].is_boolean()) return invalid_argument("{}: field '{}' must be true or false, got {}", source_, key, j_[key].dump());
    return j_[key].get<bool>();
  }
  Result<double> number(const nlohmann::json& obj, const char* key, double def) const {
    if (!obj.contains(key) || obj[key].is_null()) return def;
    if (!obj[key].is_number()) return invalid_argument("{}: field '{}' must be a number, got {}", source_, key, obj[key].dump());
    return obj[key].get<double>();
  }

 private:
  const nlohmann::json& j_;
  std::string source_;
};

}  // namespace

Result<ModelShape> model_shape_from_hf_config(const nlohmann::json& config, const std::string& source) {
  if (!config.is_object()) return invalid_argument("{}: expected a JSON object", source);
  // Multimodal configs keep the language model's sizes under text_config.
  const nlohmann::json& j =
      (!config.contains("num_hidden_layers") && config.contains("text_config") && config["text_config"].is_object())
          ? config["text_config"]
          : config;
  ConfigReader r(j, source);
  ModelShape s;
  s.source = source;
  if (j.contains("model_type") && j["model_type"].is_string()) s.architecture = j["model_type"].get<std::string>();
  HZ_ASSIGN_OR_RETURN(s.num_layers, r.uint_any({"num_hidden_layers", "n_layer", "num_layers"}, std::nullopt));
  HZ_ASSIGN_OR_RETURN(s.hidden, r.uint_any({"hidden_size", "n_embd", "d_model"}, std::nullopt));
  HZ_ASSIGN_OR_RETURN(s.num_heads, r.uint_any({"num_attention_heads", "n_head"}, std::nullopt));
  if (s.num_heads == 0) return invalid_argument("{}: field 'num_attention_heads' is 0", source);
  HZ_ASSIGN_OR_RETURN(s.num_kv_heads, r.uint_any({"num_key_value_heads", "num_kv_heads"}, s.num_heads));
  HZ_ASSIGN_OR_RETURN(s.head_dim, r.uint("head_dim", s.hidden / s.num_heads));
  HZ_ASSIGN_OR_RETURN(s.vocab, r.uint("vocab_size", std::nullopt));
  HZ_ASSIGN_OR_RETURN(s.max_positions, r.uint_any({"max_position_embeddings", "n_positions", "max_seq_len"}, uint64_t{0}));
  HZ_ASSIGN_OR_RETURN(s.tied_embeddings, r.boolean("tie_word_embeddings", false));
  for (const char* k : {"torch_dtype", "dtype"}) {
    if (j.contains(k) && j[k].is_string()) {
      s.checkpoint_dtype = j[k].get<std::string>();
      break;
    }
  }
  if (j.contains("quantization_config") && j["quantization_config"].is_object()) {
    const nlohmann::json& q = j["quantization_config"];
    s.prequantized = q.contains("quant_method") && q["quant_method"].is_string() ? q["quant_method"].get<std::string>() : "unknown";
    auto loadable = parse_hf_quant_config(j, source);
    s.prequantized_loadable = loadable.ok();
    s.prequantized_detail = loadable.ok() ? loadable->describe() : loadable.status().message();
  }

  HZ_ASSIGN_OR_RETURN(s.num_experts, r.uint_any({"num_local_experts", "num_experts", "n_routed_experts"}, uint64_t{0}));
  HZ_ASSIGN_OR_RETURN(s.ffn, r.uint_any({"intermediate_size", "ffn_dim", "n_inner"}, s.num_experts > 0 ? std::optional<uint64_t>(0) : std::nullopt));
  if (s.num_experts > 0) {
    HZ_ASSIGN_OR_RETURN(s.num_experts_used, r.uint_any({"num_experts_per_tok", "num_experts_per_token", "moe_topk"}, std::nullopt));
    HZ_ASSIGN_OR_RETURN(s.moe_ffn, r.uint("moe_intermediate_size", s.ffn));
    if (r.has("shared_expert_intermediate_size")) {
      // Qwen-MoE: one shared expert of its own width, behind a sigmoid gate.
      HZ_ASSIGN_OR_RETURN(s.shared_expert_ffn, r.uint("shared_expert_intermediate_size", std::nullopt));
      s.num_shared_experts = s.shared_expert_ffn > 0 ? 1 : 0;
      s.shared_expert_gate = s.num_shared_experts > 0;
    } else {
      HZ_ASSIGN_OR_RETURN(s.num_shared_experts, r.uint("n_shared_experts", uint64_t{0}));
      s.shared_expert_ffn = s.num_shared_experts > 0 ? s.moe_ffn : 0;
    }
    HZ_ASSIGN_OR_RETURN(s.first_k_dense, r.uint("first_k_dense_replace", uint64_t{0}));
  }

  HZ_ASSIGN_OR_RETURN(s.kv_lora_rank, r.uint("kv_lora_rank", uint64_t{0}));
  if (s.is_mla()) {
    HZ_ASSIGN_OR_RETURN(s.q_lora_rank, r.uint("q_lora_rank", uint64_t{0}));
    HZ_ASSIGN_OR_RETURN(s.qk_rope_head_dim, r.uint("qk_rope_head_dim", std::nullopt));
    HZ_ASSIGN_OR_RETURN(s.qk_nope_head_dim, r.uint("qk_nope_head_dim", std::nullopt));
    HZ_ASSIGN_OR_RETURN(s.v_head_dim, r.uint("v_head_dim", std::nullopt));
    s.head_dim = s.qk_nope_head_dim + s.qk_rope_head_dim;
  }

  const std::string& mt = s.architecture;
  bool default_bias = mt == "qwen2" || mt == "qwen2_moe";
  HZ_ASSIGN_OR_RETURN(s.attention_bias, r.boolean("attention_bias", default_bias));
  s.qk_norm = mt == "qwen3" || mt == "qwen3_moe";

  if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    const auto& rs = j["rope_scaling"];
    for (const char* k : {"rope_type", "type"}) {
      if (rs.contains(k) && rs[k].is_string()) {
        s.rope_scaling.type = rs[k].get<std::string>();
        break;
      }
    }
    if (s.rope_scaling.type == "default") s.rope_scaling.type.clear();
    HZ_ASSIGN_OR_RETURN(s.rope_scaling.factor, r.number(rs, "factor", 1.0));
    HZ_ASSIGN_OR_RETURN(double orig, r.number(rs, "original_max_position_embeddings", 0.0));
    if (!(orig >= 0 && orig <= 1e12))  // NaN fails too; the cast below needs a representable value
      return invalid_argument("{}: rope_scaling.original_max_position_embeddings {} is out of range", source, orig);
    s.rope_scaling.original_max_positions = static_cast<uint64_t>(orig);
  }
  HZ_RETURN_IF_ERROR(s.validate());
  return s;
}

Result<ModelShape> load_model_shape(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return not_found("{}: no such file or folder", path);
  std::string file = path;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(fs::path(path) / "config.json", ec)) {
      file = (fs::path(path) / "config.json").string();
    } else {
      std::vector<std::string> ggufs;
      for (const auto& e : fs::directory_iterator(path, ec)) {
        if (e.path().extension() == ".gguf") ggufs.push_back(e.path().string());
      }
      if (ggufs.size() != 1)
        return not_found("{}: folder has no config.json and {} .gguf files (expected one)", path, ggufs.size());
      file = ggufs[0];
    }
  }
  // Sniff the magic rather than trust the extension.
  std::ifstream in(file, std::ios::binary);
  if (!in) return io_error("{}: cannot open", file);
  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() == 4 && std::string(magic, 4) == "GGUF") {
    in.close();
    HZ_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(file));
    return model_shape_from_gguf(f);
  }
  in.seekg(0);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (json_nesting(text, kMaxJsonFileDepth).exceeded_at != std::string_view::npos)
    return invalid_argument("{}: JSON nests deeper than {} levels", file, kMaxJsonFileDepth);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("{}: neither a GGUF file nor valid JSON", file);
  return model_shape_from_hf_config(j, file);
}

}  // namespace hz
