#include "format/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

#include "base/checked_math.h"
#include "format/json_limits.h"

namespace hz {
namespace {

struct DTypeEntry {
  const char* name;
  uint32_t bytes;
  std::optional<DType> dtype;
};

// Every byte-sized dtype of the format. Sub-byte ones (F4, F6_*) are refused as unsupported.
const DTypeEntry* find_dtype(std::string_view name) {
  static const DTypeEntry kTypes[] = {
      {"F64", 8, DType::kF64},  {"F32", 4, DType::kF32},  {"F16", 2, DType::kF16},    {"BF16", 2, DType::kBF16},
      {"I64", 8, DType::kI64},  {"I32", 4, DType::kI32},  {"I16", 2, DType::kI16},    {"I8", 1, DType::kI8},
      {"U64", 8, std::nullopt}, {"U32", 4, std::nullopt}, {"U16", 2, std::nullopt},   {"U8", 1, std::nullopt},
      {"BOOL", 1, std::nullopt}, {"F8_E4M3", 1, std::nullopt}, {"F8_E5M2", 1, std::nullopt},
      {"F8_E8M0", 1, std::nullopt}, {"C64", 8, std::nullopt},
  };
  for (const auto& t : kTypes) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

// JSON nesting depth of the header text (strings skipped). A valid header nests 3 deep; deep
// nesting is refused before the parser sees it.
Result<uint64_t> json_u64(const nlohmann::json& v, const std::string& what) {
  if (!v.is_number_unsigned()) return data_loss("{} is {}, expected a non-negative integer", what, v.dump().substr(0, 64));
  return v.get<uint64_t>();
}

Status parse_tensor(const std::string& name, const nlohmann::json& j, SafetensorsTensor* t) {
  const std::string what = fmt::format("tensor '{}'", name);
  if (!j.is_object()) return data_loss("{}: header entry is not an object", what);
  t->name = name;
  auto dt = j.find("dtype");
  if (dt == j.end() || !dt->is_string()) return data_loss("{}: 'dtype' is missing or not a string", what);
  t->dtype_name = dt->get<std::string>();
  const DTypeEntry* e = find_dtype(t->dtype_name);
  if (e == nullptr) return data_loss("{}: unknown dtype '{}'", what, t->dtype_name.substr(0, 32));
  t->dtype = e->dtype;
  t->elem_bytes = e->bytes;

  auto sh = j.find("shape");
  if (sh == j.end() || !sh->is_array()) return data_loss("{}: 'shape' is missing or not an array", what);
  if (sh->size() > SafetensorsFile::kMaxDims)
    return data_loss("{}: 'shape' has {} dimensions, more than {}", what, sh->size(), SafetensorsFile::kMaxDims);
  uint64_t elems = 1;
  for (size_t d = 0; d < sh->size(); ++d) {
    HZ_ASSIGN_OR_RETURN(uint64_t n, json_u64((*sh)[d], fmt::format("{}: shape[{}]", what, d)));
    auto m = checked_mul(elems, n);
    if (!m || *m > (uint64_t{1} << 48)) return data_loss("{}: 'shape' element count overflows", what);
    elems = *m;
    t->shape.push_back(n);
  }

  auto off = j.find("data_offsets");
  if (off == j.end() || !off->is_array() || off->size() != 2)
    return data_loss("{}: 'data_offsets' is missing or not a [begin, end] pair", what);
  HZ_ASSIGN_OR_RETURN(t->begin, json_u64((*off)[0], what + ": data_offsets[0]"));
  HZ_ASSIGN_OR_RETURN(t->end, json_u64((*off)[1], what + ": data_offsets[1]"));
  if (t->end < t->begin) return data_loss("{}: data_offsets [{}, {}] end before they begin", what, t->begin, t->end);
  auto bytes = checked_mul(elems, e->bytes);
  if (!bytes) return data_loss("{}: byte size overflows", what);
  if (*bytes != t->end - t->begin)
    return data_loss("{}: shape {} of {} is {} bytes but data_offsets [{}, {}] span {}", what, nlohmann::json(t->shape).dump(),
                     t->dtype_name, *bytes, t->begin, t->end, t->end - t->begin);
  return Status();
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto map = MappedFile::open(path);
  if (!map.ok()) return map.status();
  auto owned = std::make_unique<MappedFile>(std::move(map).value());
  auto parsed = parse(owned->data(), owned->size(), path);
  if (!parsed.ok()) return parsed.status();
  SafetensorsFile f = std::move(parsed).value();
  f.map_ = std::move(owned);
  return f;
}

Result<SafetensorsFile> SafetensorsFile::parse(const uint8_t* data, size_t size, const std::string& name) {
  SafetensorsFile f;
  f.path_ = name;
  f.size_ = size;
  auto fail = [&](const Status& s) { return s.with_context(name); };

  if (size < 8) return fail(data_loss("file is {} bytes, too short for a safetensors header length", size));
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | data[i];  // little-endian regardless of the host
  if (hlen > kMaxHeaderBytes) return fail(data_loss("header length {} exceeds the limit {}", hlen, kMaxHeaderBytes));
  if (hlen > size - 8) return fail(data_loss("header length {} exceeds the {} bytes after it (file truncated?)", hlen, size - 8));
  if (hlen < 2) return fail(data_loss("header length {} is too short for a JSON object", hlen));
  f.header_bytes_ = hlen;
  std::string_view text(reinterpret_cast<const char*>(data + 8), hlen);
  if (text[0] != '{') return fail(data_loss("header does not start with '{{' (not a safetensors file?)"));
  if (json_nesting(text, 4).exceeded_at != std::string_view::npos) return fail(data_loss("header JSON nests deeper than a safetensors header can"));

  // Duplicate top-level keys would silently shadow each other in the parsed object: refuse them.
  std::set<std::string> seen;
  std::string duplicate;
  auto on_event = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    if (depth == 1 && ev == nlohmann::json::parse_event_t::key && parsed.is_string()) {
      const auto& k = parsed.get_ref<const std::string&>();
      if (!seen.insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  nlohmann::json header = nlohmann::json::parse(text.begin(), text.end(), on_event, /*allow_exceptions=*/false);
  if (header.is_discarded()) return fail(data_loss("header is not valid JSON"));
  if (!duplicate.empty()) return fail(data_loss("header key '{}' appears twice", duplicate.substr(0, 256)));
  if (!header.is_object()) return fail(data_loss("header is not a JSON object"));
  if (header.size() > kMaxTensors + 1) return fail(data_loss("header has {} entries, more than {}", header.size(), kMaxTensors));

  const uint64_t data_start = 8 + hlen;
  const uint64_t data_size = size - data_start;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return fail(data_loss("'__metadata__' is not an object"));
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) return fail(data_loss("'__metadata__' entry '{}' is not a string", mk.substr(0, 256)));
        f.metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    if (key.empty()) return fail(data_loss("a tensor has an empty name"));
    if (key.size() > kMaxNameBytes) return fail(data_loss("a tensor name is {} bytes, more than {}", key.size(), kMaxNameBytes));
    SafetensorsTensor t;
    HZ_RETURN_IF_ERROR(fail(parse_tensor(key, value, &t)));
    if (t.end > data_size)
      return fail(data_loss("tensor '{}': data_offsets [{}, {}] lie outside the {}-byte data section (file truncated?)", key, t.begin,
                            t.end, data_size));
    t.data = data + data_start + t.begin;
    f.index_.emplace(key, f.tensors_.size());
    f.tensors_.push_back(std::move(t));
  }

  // As the reference reader: the tensors tile the data section exactly, without overlap or gap.
  std::vector<size_t> order(f.tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& ta = f.tensors_[a];
    const auto& tb = f.tensors_[b];
    return ta.begin != tb.begin ? ta.begin < tb.begin : ta.end < tb.end;
  });
  uint64_t covered = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const SafetensorsTensor& t = f.tensors_[order[k]];
    if (t.begin < covered)
      return fail(data_loss("tensor '{}': data_offsets [{}, {}] overlap tensor '{}'", t.name, t.begin, t.end, f.tensors_[order[k - 1]].name));
    if (t.begin > covered)
      return fail(data_loss("tensor '{}': data_offsets begin at {}, leaving a gap after byte {}", t.name, t.begin, covered));
    covered = t.end;
  }
  if (covered != data_size)
    return fail(data_loss("the tensors cover {} bytes of the {}-byte data section (trailing bytes)", covered, data_size));
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Result<TensorInfo> SafetensorsFile::engine_view(const SafetensorsTensor& t, const std::string& engine_name) const {
  if (!t.dtype || (*t.dtype != DType::kF32 && *t.dtype != DType::kF16 && *t.dtype != DType::kBF16))
    return unimplemented("{}: tensor '{}' has dtype {}, which horizon cannot load (supported: F32, F16, BF16)", path_, t.name,
                         t.dtype_name);
  if (reinterpret_cast<uintptr_t>(t.data) % t.elem_bytes != 0)
    return unimplemented("{}: tensor '{}' data is not aligned to its {}-byte elements (the header length is not padded "
                         "to a multiple of 8; re-save the file)", path_, t.name, t.elem_bytes);
  if (t.shape.empty()) return data_loss("{}: tensor '{}' is a scalar, expected a vector or matrix", path_, t.name);
  TensorInfo info;
  info.name = engine_name;
  info.dtype = *t.dtype;
  info.dims.assign(t.shape.rbegin(), t.shape.rend());
  info.offset = t.begin;
  info.num_bytes = t.num_bytes();
  info.data = t.data;
  return info;
}

// ---------------------------------------------------------------- writer

void SafetensorsWriter::add(const std::string& name, const std::string& dtype_name, std::vector<uint64_t> shape,
                            std::vector<uint8_t> bytes) {
  entries_.push_back(Entry{name, dtype_name, std::move(shape), std::move(bytes)});
}

std::vector<uint8_t> SafetensorsWriter::to_bytes() const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const Entry& e : entries_) {
    header[e.name] = {{"dtype", e.dtype_name}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.bytes.size()}}};
    offset += e.bytes.size();
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  std::vector<uint8_t> out(8);
  const uint64_t hlen = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(hlen >> (8 * i));
  out.insert(out.end(), text.begin(), text.end());
  for (const Entry& e : entries_) out.insert(out.end(), e.bytes.begin(), e.bytes.end());
  return out;
}

Status SafetensorsWriter::write(const std::string& path) const {
  std::vector<uint8_t> bytes = to_bytes();
  std::FILE* fp = std::fopen(path.c_str(), "wb");
  if (fp == nullptr) return io_error("{}: cannot create: {}", path, std::strerror(errno));
  size_t n = std::fwrite(bytes.data(), 1, bytes.size(), fp);
  bool ok = n == bytes.size();
  ok = std::fclose(fp) == 0 && ok;
  if (!ok) return io_error("{}: write failed", path);
  return Status();
}

}  // namespace hz
