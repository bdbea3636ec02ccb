#include "model/hf_tensor_source.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <thread>
#include <filesystem>
#include <set>

#include "base/finite.h"
#include "base/mapped_file.h"
#include "format/json_limits.h"
#include "kernels/kernels.h"

namespace hz {

namespace fs = std::filesystem;

namespace {

struct Entry {
  const SafetensorsFile* f;
  const SafetensorsTensor* t;
};

bool strip_suffix(std::string_view s, std::string_view suffix, std::string_view* base) {
  if (s.size() <= suffix.size() || s.substr(s.size() - suffix.size()) != suffix) return false;
  *base = s.substr(0, s.size() - suffix.size());
  return true;
}

// A tensor's little-endian values, copied out (a mapping need not be aligned for T).
template <class T>
std::vector<T> copy_values(const SafetensorsTensor& t) {
  std::vector<T> v(t.num_bytes() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), t.data, v.size() * sizeof(T));
  return v;
}

std::string shape_of(const SafetensorsTensor& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.shape.size(); ++i) s += (i > 0 ? ", " : "") + std::to_string(t.shape[i]);
  return s + "]";
}

// Turns pre-quantized matrices (and their scale / zero tensors) into engine tensors it owns.
struct Converter {
  const std::string& dir;
  const HfQuantConfig& quant;
  DType type;
  const std::vector<Entry>& entries;
  const std::map<std::string, size_t, std::less<>>& by_name;
  std::vector<std::unique_ptr<uint8_t[]>> owned;
  HfTensorSource::Dequantized summary;

  const SafetensorsTensor* find(std::string_view name) const {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : entries[it->second].t;
  }

  // Scale, zero-point and index tensors that belong to a quantized matrix beside them.
  bool is_companion(const std::string& name) const {
    std::string_view base;
    for (const char* suffix : {".qzeros", ".scales", ".g_idx"}) {
      if (strip_suffix(name, suffix, &base) && find(std::string(base) + ".qweight") != nullptr) return true;
    }
    for (const char* suffix : {"_scale", "_scale_inv"}) {
      if (strip_suffix(name, suffix, &base) && base.size() > 7 && base.substr(base.size() - 7) == ".weight" &&
          find(base) != nullptr)
        return true;
    }
    return strip_suffix(name, ".input_scale", &base) && find(std::string(base) + ".weight") != nullptr;
  }

  // An F32 / F16 / BF16 tensor's values as floats.
  Result<std::vector<float>> floats(const SafetensorsTensor& t) const {
    if (!t.dtype || (*t.dtype != DType::kF32 && *t.dtype != DType::kF16 && *t.dtype != DType::kBF16))
      return data_loss("{}: tensor '{}' has dtype {}, expected F32, F16 or BF16", dir, t.name, t.dtype_name);
    const int64_t n = static_cast<int64_t>(t.num_bytes() / t.elem_bytes);  // the reader checked bytes = shape x size
    std::vector<uint8_t> raw = copy_values<uint8_t>(t);
    std::vector<float> out(static_cast<size_t>(n));
    kernels::dequantize_row(*t.dtype, raw.data(), out.data(), n);
    return out;
  }

  // A companion tensor that must be there with `rank` dimensions and, unless null, `dtype` (scales
  // are checked by floats()).
  Result<const SafetensorsTensor*> require(const std::string& name, const char* dtype, size_t rank, const char* what) const {
    const SafetensorsTensor* t = find(name);
    if (t == nullptr) return data_loss("{}: tensor '{}' ({}) is missing", dir, name, what);
    if (dtype != nullptr && t->dtype_name != dtype)
      return data_loss("{}: tensor '{}' has dtype {}, expected {}", dir, name, t->dtype_name, dtype);
    if (t->shape.size() != rank) return data_loss("{}: tensor '{}' has shape {}, expected {} dimensions", dir, name, shape_of(*t), rank);
    return t;
  }

  // Fills `rows` x `cols` through `fill(r0, r1, out)` on every core, checks the values are finite
  // and encodes them as `type` (F32 when the rows do not fit its blocks).
  Result<TensorInfo> encode(const std::string& hf_name, const std::string& gguf, int64_t rows, int64_t cols,
                            const std::function<void(int64_t, int64_t, float*)>& fill) {
    if (rows <= 0 || cols <= 0) return data_loss("{}: tensor '{}' holds an empty matrix ({} x {})", dir, hf_name, rows, cols);
    if (summary.from.empty()) summary.from = quant.describe();
    const DType target = cols % traits(type).block_elems == 0 ? type : DType::kF32;
    const uint64_t rb = row_bytes(target, static_cast<uint64_t>(cols));
    const uint64_t total = rb * static_cast<uint64_t>(rows);
    std::unique_ptr<uint8_t[]> data(new (std::nothrow) uint8_t[total]);
    if (data == nullptr) return make_error(StatusCode::kResourceExhausted, "{}: no memory for the {} bytes tensor '{}' dequantizes to", dir, total, hf_name);
    constexpr int64_t kChunk = 32;
    const int64_t chunks = (rows + kChunk - 1) / kChunk;
    const int64_t num_threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, chunks);
    std::atomic<int64_t> bad_row{-1};
    auto work = [&](int64_t first_chunk, int64_t end_chunk) {
      std::vector<float> buf(static_cast<size_t>(kChunk * cols));
      for (int64_t c = first_chunk; c < end_chunk; ++c) {
        const int64_t r0 = c * kChunk, r1 = std::min(rows, r0 + kChunk);
        fill(r0, r1, buf.data());
        for (int64_t r = r0; r < r1; ++r) {
          const float* x = buf.data() + (r - r0) * cols;
          if (!all_finite(x, cols)) {
            int64_t expected = -1;
            bad_row.compare_exchange_strong(expected, r);
          }
          kernels::encode_row(target, x, data.get() + static_cast<uint64_t>(r) * rb, cols);
        }
      }
    };
    std::vector<std::thread> workers;
    for (int64_t t = 1; t < num_threads; ++t) workers.emplace_back(work, chunks * t / num_threads, chunks * (t + 1) / num_threads);
    work(0, chunks / num_threads);
    for (auto& th : workers) th.join();
    if (bad_row.load() >= 0)
      return data_loss("{}: tensor '{}' dequantizes to NaN or infinity (row {})", dir, hf_name, bad_row.load());
    TensorInfo info;
    info.name = gguf;
    info.dtype = target;
    info.dims = {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)};
    info.num_bytes = rb * static_cast<uint64_t>(rows);
    info.data = data.get();
    owned.push_back(std::move(data));
    ++summary.num_tensors;
    summary.bytes += info.num_bytes;
    if (std::find(summary.types.begin(), summary.types.end(), target) == summary.types.end()) summary.types.push_back(target);
    return info;
  }

  // An 8-bit matrix (E4M3, or int8 from compressed-tensors) with its weight_scale(_inv).
  Result<TensorInfo> scaled8(const SafetensorsTensor& w, const std::string& gguf) {
    if (w.dtype_name == "F8_E5M2")
      return unimplemented("{}: tensor '{}' is F8_E5M2; horizon loads E4M3 FP8 weights", dir, w.name);
    if (quant.method != HfQuantMethod::kFp8)
      return data_loss("{}: tensor '{}' is {} but config.json's quantization_config {}", dir, w.name, w.dtype_name,
                       quant.method == HfQuantMethod::kNone ? "is missing" : "names " + quant.name);
    if (w.shape.size() != 2) return data_loss("{}: tensor '{}' has shape {}, expected a matrix", dir, w.name, shape_of(w));
    const int64_t rows = static_cast<int64_t>(w.shape[0]), cols = static_cast<int64_t>(w.shape[1]);
    const SafetensorsTensor* st = find(w.name + "_scale_inv");
    if (st == nullptr) st = find(w.name + "_scale");
    if (st == nullptr) return data_loss("{}: tensor '{}' has no {}_scale_inv or {}_scale beside it", dir, w.name, w.name, w.name);
    HZ_ASSIGN_OR_RETURN(std::vector<float> scale, floats(*st));
    // The scale tensor's shape says how it is laid out.
    int64_t br, bc;
    const uint64_t n = scale.size();
    if (n == 1) {
      br = rows;
      bc = cols;
    } else if ((st->shape.size() == 1 || (st->shape.size() == 2 && st->shape[1] == 1)) && n == static_cast<uint64_t>(rows)) {
      br = 1;
      bc = cols;
    } else if (st->shape.size() == 2) {
      br = quant.block_rows > 0 ? quant.block_rows : 128;
      bc = quant.block_cols > 0 ? quant.block_cols : 128;
      if (st->shape[0] != static_cast<uint64_t>((rows + br - 1) / br) || st->shape[1] != static_cast<uint64_t>((cols + bc - 1) / bc))
        return data_loss("{}: tensor '{}' has shape {}, which does not give {}x{} blocks of {} [{}, {}]", dir, st->name,
                         shape_of(*st), br, bc, w.name, rows, cols);
    } else {
      return data_loss("{}: tensor '{}' has shape {}: expected one scale, one per row of {} ({}) or a matrix of block scales",
                       dir, st->name, shape_of(*st), w.name, rows);
    }
    const bool e4m3 = w.dtype_name == "F8_E4M3";
    const uint8_t* src = w.data;
    const float* sc = scale.data();
    return encode(w.name, gguf, rows, cols, [=](int64_t r0, int64_t r1, float* out) {
      dequant_scaled8_rows(src, e4m3, cols, sc, br, bc, r0, r1, out);
    });
  }

  // A GPTQ or AWQ matrix: `base`.qweight, .qzeros, .scales (and GPTQ's optional .g_idx).
  Result<TensorInfo> packed_int(const std::string& base, const std::string& gguf) {
    const std::string qname = base + ".qweight";
    if (quant.method != HfQuantMethod::kGptq && quant.method != HfQuantMethod::kAwq)
      return data_loss("{}: tensor '{}' is a packed GPTQ/AWQ matrix but config.json's quantization_config {}", dir, qname,
                       quant.method == HfQuantMethod::kNone ? "is missing" : "names " + quant.name);
    HZ_ASSIGN_OR_RETURN(const SafetensorsTensor* qw, require(qname, "I32", 2, "packed weights"));
    HZ_ASSIGN_OR_RETURN(const SafetensorsTensor* qz, require(base + ".qzeros", "I32", 2, "packed zero points"));
    HZ_ASSIGN_OR_RETURN(const SafetensorsTensor* sc, require(base + ".scales", nullptr, 2, "scales"));
    const int64_t pack = 32 / quant.bits;
    const bool gptq = quant.method == HfQuantMethod::kGptq;
    // nn.Linear's [out][in]: GPTQ packs the input dimension of qweight, AWQ the output one.
    const int64_t in = gptq ? static_cast<int64_t>(qw->shape[0]) * pack : static_cast<int64_t>(qw->shape[0]);
    const int64_t out = gptq ? static_cast<int64_t>(qw->shape[1]) : static_cast<int64_t>(qw->shape[1]) * pack;
    if (in <= 0 || out <= 0) return data_loss("{}: tensor '{}' has shape {}: an empty matrix", dir, qname, shape_of(*qw));
    const int64_t groups = static_cast<int64_t>(sc->shape[0]);
    if (sc->shape[1] != static_cast<uint64_t>(out) || groups < 1)
      return data_loss("{}: tensor '{}' has shape {}, expected [groups, {}]", dir, sc->name, shape_of(*sc), out);
    if (qz->shape[0] != static_cast<uint64_t>(groups) || qz->shape[1] * static_cast<uint64_t>(pack) != static_cast<uint64_t>(out))
      return data_loss("{}: tensor '{}' has shape {}, expected [{}, {}]", dir, qz->name, shape_of(*qz), groups, out / pack);
    std::vector<int32_t> g_idx;
    const SafetensorsTensor* gi = gptq ? find(base + ".g_idx") : nullptr;
    const int64_t group_size = quant.group_size > 0 ? quant.group_size : in;
    if (gi != nullptr) {
      HZ_ASSIGN_OR_RETURN(gi, require(base + ".g_idx", "I32", 1, "group of each input"));
      if (gi->shape[0] != static_cast<uint64_t>(in))
        return data_loss("{}: tensor '{}' has shape {}, expected [{}]", dir, gi->name, shape_of(*gi), in);
      g_idx = copy_values<int32_t>(*gi);
      for (int64_t i = 0; i < in; ++i) {
        if (g_idx[i] < 0 || g_idx[i] >= groups)
          return data_loss("{}: tensor '{}' puts input {} in group {}, outside [0, {})", dir, gi->name, i, g_idx[i], groups);
      }
    } else if (groups != (in + group_size - 1) / group_size) {
      return data_loss("{}: tensor '{}' has {} groups, expected {} ({} inputs in groups of {})", dir, sc->name, groups,
                       (in + group_size - 1) / group_size, in, group_size);
    }
    // encode() runs the fill before it returns: the fill reads these locals by reference.
    const std::vector<int32_t> qv = copy_values<int32_t>(*qw), zv = copy_values<int32_t>(*qz);
    HZ_ASSIGN_OR_RETURN(const std::vector<float> sv, floats(*sc));
    const int32_t* gi_data = g_idx.empty() ? nullptr : g_idx.data();
    return encode(qname, gguf, out, in, [&](int64_t r0, int64_t r1, float* dst) {
      if (gptq) {
        dequant_gptq_rows(qv.data(), zv.data(), sv.data(), gi_data, in, out, quant.bits, group_size, quant.zero_offset, r0,
                          r1, dst);
      } else {
        dequant_awq_rows(qv.data(), zv.data(), sv.data(), in, out, group_size, r0, r1, dst);
      }
    });
  }
};

}  // namespace

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

Result<std::unique_ptr<HfTensorSource>> HfTensorSource::open(const std::string& dir, const HfQuantConfig& quant,
                                                             DType dequant_type) {
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

  // Every tensor the folder holds (the index's shard for each), by HF name, in file order.
  std::set<std::string> found;
  std::vector<Entry> entries;
  std::map<std::string, size_t, std::less<>> by_name;
  for (size_t si = 0; si < s->shards_.size(); ++si) {
    const SafetensorsFile& f = s->shards_[si];
    for (const SafetensorsTensor& t : f.tensors()) {
      if (!weight_map.empty()) {
        auto it = weight_map.find(t.name);
        // Tensors a shard holds but the index does not list are not part of the model.
        if (it == weight_map.end() || it->second != shard_names[si]) continue;
      }
      if (!found.insert(t.name).second) return data_loss("{}: tensor '{}' appears in two shards", dir, t.name);
      by_name.emplace(t.name, entries.size());
      entries.push_back(Entry{&f, &t});
    }
  }
  Converter conv{dir, quant, dequant_type, entries, by_name};
  for (const Entry& e : entries) {
    const SafetensorsTensor& t = *e.t;
    std::optional<TensorInfo> info;
    std::optional<std::string> gguf;
    if (std::string_view base; strip_suffix(t.name, ".qweight", &base)) {
      // A GPTQ / AWQ matrix: qweight with its qzeros, scales (and g_idx) beside it.
      gguf = gguf_name_for_hf(std::string(base) + ".weight");
      if (gguf) {
        HZ_ASSIGN_OR_RETURN(TensorInfo packed, conv.packed_int(std::string(base), *gguf));
        info = std::move(packed);
      }
    } else if (conv.is_companion(t.name)) {
      continue;  // read with its matrix
    } else {
      gguf = gguf_name_for_hf(t.name);
      if (gguf && (t.dtype_name == "F8_E4M3" || t.dtype_name == "I8" || t.dtype_name == "F8_E5M2")) {
        HZ_ASSIGN_OR_RETURN(TensorInfo scaled, conv.scaled8(t, *gguf));
        info = std::move(scaled);
      }
    }
    if (!gguf) {
      s->unmapped_.push_back(t.name);
      continue;
    }
    if (!info) {
      HZ_ASSIGN_OR_RETURN(TensorInfo view, e.f->engine_view(t, *gguf));
      info = std::move(view);
    }
    if (s->index_.count(*gguf) != 0) return data_loss("{}: tensor '{}' maps to '{}' twice", dir, t.name, *gguf);
    s->index_.emplace(*gguf, s->tensors_.size());
    s->tensors_.push_back(std::move(*info));
    s->hf_names_.push_back(t.name);
  }
  s->owned_ = std::move(conv.owned);
  s->dequantized_ = std::move(conv.summary);
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

std::string HfTensorSource::Dequantized::type_names() const {
  std::string out;
  for (DType t : types) {
    if (!out.empty()) out += '/';
    out += dtype_name(t);
  }
  return out;
}

const std::string& HfTensorSource::hf_name(const TensorInfo& t) const {
  static const std::string kNone;
  auto it = index_.find(t.name);
  return it == index_.end() ? kNone : hf_names_[it->second];
}

}  // namespace hz
