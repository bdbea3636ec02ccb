#include "model/hf_tensor_source.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "base/mapped_file.h"
#include "format/json_limits.h"

namespace hz {

namespace fs = std::filesystem;

std::optional<std::string> gguf_name_for_hf(std::string_view n) {
  if (n == "model.embed_tokens.weight") return "token_embd.weight";
  if (n == "model.norm.weight") return "output_norm.weight";
  if (n == "lm_head.weight") return "output.weight";
  constexpr std::string_view kLayers = "model.layers.";
  if (n.substr(0, kLayers.size()) != kLayers) return std::nullopt;
  n.remove_prefix(kLayers.size());
  size_t dot = n.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 6) return std::nullopt;
  for (size_t i = 0; i < dot; ++i) {
    if (n[i] < '0' || n[i] > '9') return std::nullopt;
  }
  const std::string layer(n.substr(0, dot));
  if (layer.size() > 1 && layer[0] == '0') return std::nullopt;
  std::string_view rest = n.substr(dot + 1);
  static const std::pair<std::string_view, std::string_view> kMap[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  for (const auto& [hf, gguf] : kMap) {
    if (rest == hf) return "blk." + layer + "." + std::string(gguf);
  }
  return std::nullopt;
}

Result<std::unique_ptr<HfTensorSource>> HfTensorSource::open(const std::string& dir) {
  std::unique_ptr<HfTensorSource> s(new HfTensorSource());
  s->dir_ = dir;
  std::error_code ec;
  const fs::path root(dir);
  const fs::path index_path = root / "model.safetensors.index.json";
  // Which shard each tensor must be in (empty: single-file folder).
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> shard_names;
  if (fs::exists(index_path, ec)) {
    HZ_ASSIGN_OR_RETURN(std::string text, read_file(index_path.string()));
    HZ_ASSIGN_OR_RETURN(nlohmann::json idx, parse_json_bounded(text, index_path.string()));
    if (!idx.is_object()) return data_loss("{}: not a JSON object", index_path.string());
    if (!idx.contains("weight_map") || !idx["weight_map"].is_object() || idx["weight_map"].empty())
      return data_loss("{}: 'weight_map' is missing, empty or not an object", index_path.string());
    std::set<std::string> seen;
    for (const auto& [name, file] : idx["weight_map"].items()) {
      if (!file.is_string()) return data_loss("{}: weight_map['{}'] is not a file name", index_path.string(), name);
      const std::string f = file.get<std::string>();
      // A shard is a plain file beside the index: no paths out of the folder.
      if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos || f == "." || f == "..")
        return data_loss("{}: weight_map['{}'] = '{}' is not a plain file name in the folder", index_path.string(), name, f);
      weight_map[name] = f;
      if (seen.insert(f).second) shard_names.push_back(f);
    }
  } else if (fs::exists(root / "model.safetensors", ec)) {
    shard_names.push_back("model.safetensors");
  } else {
    return not_found("{}: no model.safetensors and no model.safetensors.index.json", dir);
  }

  for (const std::string& name : shard_names) {
    const std::string p = (root / name).string();
    if (!fs::exists(p, ec)) return not_found("{}: shard '{}' named by model.safetensors.index.json is missing", dir, name);
    HZ_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(p));
    s->shard_paths_.push_back(p);
    s->shards_.push_back(std::move(f));
  }

  std::set<std::string> found;
  for (size_t si = 0; si < s->shards_.size(); ++si) {
    const SafetensorsFile& f = s->shards_[si];
    for (const SafetensorsTensor& t : f.tensors()) {
      if (!weight_map.empty()) {
        auto it = weight_map.find(t.name);
        // Tensors a shard holds but the index does not list are not part of the model.
        if (it == weight_map.end() || it->second != shard_names[si]) continue;
      }
      if (!found.insert(t.name).second) return data_loss("{}: tensor '{}' appears in two shards", dir, t.name);
      std::optional<std::string> gguf = gguf_name_for_hf(t.name);
      if (!gguf) {
        s->unmapped_.push_back(t.name);
        continue;
      }
      HZ_ASSIGN_OR_RETURN(TensorInfo info, f.engine_view(t, *gguf));
      if (s->index_.count(*gguf) != 0) return data_loss("{}: tensor '{}' maps to '{}' twice", dir, t.name, *gguf);
      s->index_.emplace(*gguf, s->tensors_.size());
      s->tensors_.push_back(std::move(info));
      s->hf_names_.push_back(t.name);
    }
  }
  for (const auto& [name, file] : weight_map) {
    if (found.count(name) == 0)
      return data_loss("{}: model.safetensors.index.json puts tensor '{}' in '{}', which does not hold it", dir, name, file);
  }
  return s;
}

const TensorInfo* HfTensorSource::get_tensor(std::string_view gguf_name) const {
  auto it = index_.find(gguf_name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<const TensorInfo*> HfTensorSource::tensor_list() const {
  std::vector<const TensorInfo*> out;
  out.reserve(tensors_.size());
  for (const auto& t : tensors_) out.push_back(&t);
  return out;
}

const std::string& HfTensorSource::hf_name(const TensorInfo& t) const {
  static const std::string kNone;
  auto it = index_.find(t.name);
  return it == index_.end() ? kNone : hf_names_[it->second];
}

}  // namespace hz
