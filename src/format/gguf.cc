#include "format/gguf.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/checked_math.h"

namespace hz {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint64_t kMaxTensors = 1u << 20;
constexpr uint64_t kMaxKv = 1u << 20;
constexpr uint64_t kMaxNameBytes = 1u << 16;
constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 4;

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    case GgufType::kU64: case GgufType::kI64: case GgufType::kF64: return 8;
    default: return 0;
  }
}

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kF64); }

// Bounds-checked little-endian cursor over the file bytes.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  template <typename T>
  bool read(T* out) {
    if (remaining() < sizeof(T)) return false;
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool read_bytes(size_t n, const uint8_t** out) {
    if (remaining() < n) return false;
    *out = data_ + pos_;
    pos_ += n;
    return true;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

Status read_string(Reader& r, std::string* out, const std::string& what, uint64_t max_len) {
  uint64_t len;
  if (!r.read(&len)) return data_loss("{}: truncated (string length)", what);
  if (len > r.remaining()) return data_loss("{}: string length {} exceeds the {} bytes left in the file", what, len, r.remaining());
  if (len > max_len) return data_loss("{}: string length {} exceeds the limit {}", what, len, max_len);
  const uint8_t* p = nullptr;
  r.read_bytes(len, &p);
  out->assign(reinterpret_cast<const char*>(p), len);
  return Status();
}

// Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF). Returns the offset of
// the first byte that does not start a valid character, or npos. The format layer keeps its own
// check: the tokenizer's UTF-8 helpers sit above it.
size_t invalid_utf8_at(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4, cp = c & 0x07;
    } else {
      return i;
    }
    if (s.size() - i < len) return i;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
      return i;
    i += len;
  }
  return std::string_view::npos;
}

Status read_value(Reader& r, GgufType type, GgufValue* v, const std::string& key, int depth);

Status read_array(Reader& r, GgufArray* a, const std::string& key, int depth) {
  if (depth > kMaxArrayDepth) return data_loss("metadata '{}': arrays nested deeper than {}", key, kMaxArrayDepth);
  uint32_t et;
  if (!r.read(&et)) return data_loss("metadata '{}': truncated (array element type)", key);
  if (!valid_type(et)) return data_loss("metadata '{}': unknown array element type {}", key, et);
  a->elem_type = static_cast<GgufType>(et);
  if (!r.read(&a->count)) return data_loss("metadata '{}': truncated (array length)", key);
  size_t es = scalar_size(a->elem_type);
  if (es > 0) {
    auto bytes = checked_mul(a->count, es);
    if (!bytes || *bytes > r.remaining())
      return data_loss("metadata '{}': array of {} {} elements exceeds the {} bytes left in the file", key, a->count,
                       gguf_type_name(a->elem_type), r.remaining());
    const uint8_t* p = nullptr;
    r.read_bytes(*bytes, &p);
    a->raw.assign(p, p + *bytes);
    if (a->elem_type == GgufType::kBool) {
      for (uint64_t i = 0; i < a->count; ++i) {
        if (a->raw[i] > 1) return data_loss("metadata '{}'[{}]: bool value {} is neither 0 nor 1", key, i, a->raw[i]);
      }
    }
    return Status();
  }
  // Strings take at least 8 bytes each, arrays at least 12: bound the count before reserving.
  uint64_t min_elem = a->elem_type == GgufType::kString ? 8 : 12;
  if (a->count > r.remaining() / min_elem)
    return data_loss("metadata '{}': array length {} cannot fit in the {} bytes left in the file", key, a->count, r.remaining());
  if (a->elem_type == GgufType::kString) {
    a->strings.resize(a->count);
    for (uint64_t i = 0; i < a->count; ++i) {
      HZ_RETURN_IF_ERROR(read_string(r, &a->strings[i], fmt::format("metadata '{}'[{}]", key, i), UINT64_MAX));
    }
  } else {
    a->nested.resize(a->count);
    for (uint64_t i = 0; i < a->count; ++i) {
      HZ_RETURN_IF_ERROR(read_value(r, GgufType::kArray, &a->nested[i], key, depth + 1));
    }
  }
  return Status();
}

Status read_value(Reader& r, GgufType type, GgufValue* v, const std::string& key, int depth) {
  v->type = type;
  bool ok = true;
  switch (type) {
    case GgufType::kU8: { uint8_t x = 0; ok = r.read(&x); v->u = x; break; }
    case GgufType::kI8: { int8_t x = 0; ok = r.read(&x); v->i = x; break; }
    case GgufType::kU16: { uint16_t x = 0; ok = r.read(&x); v->u = x; break; }
    case GgufType::kI16: { int16_t x = 0; ok = r.read(&x); v->i = x; break; }
    case GgufType::kU32: { uint32_t x = 0; ok = r.read(&x); v->u = x; break; }
    case GgufType::kI32: { int32_t x = 0; ok = r.read(&x); v->i = x; break; }
    case GgufType::kU64: { uint64_t x = 0; ok = r.read(&x); v->u = x; break; }
    case GgufType::kI64: { int64_t x = 0; ok = r.read(&x); v->i = x; break; }
    case GgufType::kF32: { float x = 0; ok = r.read(&x); v->f = x; break; }
    case GgufType::kF64: { double x = 0; ok = r.read(&x); v->f = x; break; }
    case GgufType::kBool: {
      uint8_t x = 0;
      ok = r.read(&x);
      if (ok && x > 1) return data_loss("metadata '{}': bool value {} is neither 0 nor 1", key, x);
      v->b = x != 0;
      break;
    }
    case GgufType::kString:
      return read_string(r, &v->str, fmt::format("metadata '{}'", key), UINT64_MAX);
    case GgufType::kArray:
      v->arr = std::make_shared<GgufArray>();
      return read_array(r, v->arr.get(), key, depth);
  }
  if (!ok) return data_loss("metadata '{}': truncated ({} value)", key, gguf_type_name(type));
  return Status();
}

template <typename T>
T load_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::kU8: return "u8";
    case GgufType::kI8: return "i8";
    case GgufType::kU16: return "u16";
    case GgufType::kI16: return "i16";
    case GgufType::kU32: return "u32";
    case GgufType::kI32: return "i32";
    case GgufType::kF32: return "f32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kU64: return "u64";
    case GgufType::kI64: return "i64";
    case GgufType::kF64: return "f64";
  }
  return "?";
}

GgufValue GgufValue::make_str_array(std::vector<std::string> v) {
  GgufValue x;
  x.type = GgufType::kArray;
  x.arr = std::make_shared<GgufArray>();
  x.arr->elem_type = GgufType::kString;
  x.arr->count = v.size();
  x.arr->strings = std::move(v);
  return x;
}

GgufValue GgufValue::make_f32_array(const std::vector<float>& v) {
  GgufValue x;
  x.type = GgufType::kArray;
  x.arr = std::make_shared<GgufArray>();
  x.arr->elem_type = GgufType::kF32;
  x.arr->count = v.size();
  x.arr->raw.resize(v.size() * 4);
  if (!v.empty()) std::memcpy(x.arr->raw.data(), v.data(), v.size() * 4);
  return x;
}

GgufValue GgufValue::make_i32_array(const std::vector<int32_t>& v) {
  GgufValue x;
  x.type = GgufType::kArray;
  x.arr = std::make_shared<GgufArray>();
  x.arr->elem_type = GgufType::kI32;
  x.arr->count = v.size();
  x.arr->raw.resize(v.size() * 4);
  if (!v.empty()) std::memcpy(x.arr->raw.data(), v.data(), v.size() * 4);
  return x;
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kU16: case GgufType::kI16:
    case GgufType::kU32: case GgufType::kI32: case GgufType::kU64: case GgufType::kI64:
      return true;
    default:
      return false;
  }
}

namespace {
std::string scalar_display(const GgufValue& v) {
  switch (v.type) {
    case GgufType::kU8: case GgufType::kU16: case GgufType::kU32: case GgufType::kU64:
      return std::to_string(v.u);
    case GgufType::kI8: case GgufType::kI16: case GgufType::kI32: case GgufType::kI64:
      return std::to_string(v.i);
    case GgufType::kF32: case GgufType::kF64:
      return fmt::format("{:g}", v.f);
    case GgufType::kBool:
      return v.b ? "true" : "false";
    default:
      return "";
  }
}

std::string quoted(const std::string& s, size_t max_chars) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < max_chars; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n') out += "\\n";
    else if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  if (s.size() > max_chars) out += "...";
  out += "\"";
  return out;
}
}  // namespace

std::string GgufValue::to_display_string(size_t max_items) const {
  if (type == GgufType::kString) return quoted(str, 120);
  if (type != GgufType::kArray) return scalar_display(*this);
  const GgufArray& a = *arr;
  std::string out = fmt::format("[{} x {}] [", a.count, gguf_type_name(a.elem_type));
  for (uint64_t i = 0; i < a.count && i < max_items; ++i) {
    if (i > 0) out += ", ";
    if (a.elem_type == GgufType::kString) {
      out += quoted(a.strings[i], 24);
    } else if (a.elem_type == GgufType::kArray) {
      out += a.nested[i].to_display_string(2);
    } else {
      GgufValue e;
      e.type = a.elem_type;
      const uint8_t* p = a.raw.data() + i * scalar_size(a.elem_type);
      switch (a.elem_type) {
        case GgufType::kU8: e.u = load_le<uint8_t>(p); break;
        case GgufType::kI8: e.i = load_le<int8_t>(p); break;
        case GgufType::kU16: e.u = load_le<uint16_t>(p); break;
        case GgufType::kI16: e.i = load_le<int16_t>(p); break;
        case GgufType::kU32: e.u = load_le<uint32_t>(p); break;
        case GgufType::kI32: e.i = load_le<int32_t>(p); break;
        case GgufType::kU64: e.u = load_le<uint64_t>(p); break;
        case GgufType::kI64: e.i = load_le<int64_t>(p); break;
        case GgufType::kF32: e.f = load_le<float>(p); break;
        case GgufType::kF64: e.f = load_le<double>(p); break;
        case GgufType::kBool: e.b = p[0] != 0; break;
        default: break;
      }
      out += scalar_display(e);
    }
  }
  if (a.count > max_items) out += ", ...";
  out += "]";
  return out;
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  auto map = MappedFile::open(path);
  if (!map.ok()) return map.status();
  auto owned = std::make_unique<MappedFile>(std::move(map).value());
  auto parsed = parse(owned->data(), owned->size(), path);
  if (!parsed.ok()) return parsed.status();
  GgufFile f = std::move(parsed).value();
  f.map_ = std::move(owned);
  return f;
}

Result<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, const std::string& name) {
  GgufFile f;
  f.path_ = name;
  f.size_ = size;
  auto fail = [&](const Status& s) { return s.with_context(name); };
  Reader r(data, size);

  uint32_t magic;
  if (!r.read(&magic)) return fail(data_loss("file is {} bytes, too short for a GGUF header", size));
  if (magic != kGgufMagic) return fail(data_loss("bad magic 0x{:08x}: not a GGUF file (expected \"GGUF\")", magic));
  if (!r.read(&f.version_)) return fail(data_loss("truncated header (version)"));
  if (f.version_ == 1) return fail(unimplemented("GGUF version 1 is not supported (expected 2 or 3)"));
  if (f.version_ != 2 && f.version_ != 3) {
    if ((f.version_ & 0xffff) == 0 && f.version_ != 0)
      return fail(unimplemented("version field 0x{:08x} looks byte-swapped: big-endian GGUF is not supported", f.version_));
    return fail(unimplemented("unsupported GGUF version {} (expected 2 or 3)", f.version_));
  }
  uint64_t num_tensors, num_kv;
  if (!r.read(&num_tensors)) return fail(data_loss("truncated header (tensor_count)"));
  if (!r.read(&num_kv)) return fail(data_loss("truncated header (metadata_kv_count)"));
  if (num_tensors > kMaxTensors) return fail(data_loss("tensor_count {} exceeds the limit {}", num_tensors, kMaxTensors));
  if (num_kv > kMaxKv) return fail(data_loss("metadata_kv_count {} exceeds the limit {}", num_kv, kMaxKv));

  for (uint64_t k = 0; k < num_kv; ++k) {
    std::string key;
    const size_t key_offset = r.pos();
    HZ_RETURN_IF_ERROR(fail(read_string(r, &key, fmt::format("metadata key #{}", k), kMaxNameBytes)));
    if (key.empty()) return fail(data_loss("metadata key #{} is empty", k));
    // NOTE: keys only. The GGUF spec makes every string UTF-8, but real vocabularies carry token
    // strings that are not (byte pieces), so values are left as they are.
    if (size_t bad = invalid_utf8_at(key); bad != std::string_view::npos)
      return fail(data_loss("metadata key #{} at offset {} is not valid UTF-8 (bad byte 0x{:02x} at offset {})", k,
                            key_offset, static_cast<uint8_t>(key[bad]), key_offset + 8 + bad));
    if (f.kv_index_.count(key) != 0) return fail(data_loss("metadata key '{}' appears twice", key));
    uint32_t t;
    if (!r.read(&t)) return fail(data_loss("metadata '{}': truncated (value type)", key));
    if (!valid_type(t)) return fail(data_loss("metadata '{}': unknown value type {}", key, t));
    GgufValue v;
    HZ_RETURN_IF_ERROR(fail(read_value(r, static_cast<GgufType>(t), &v, key, 0)));
    f.kv_index_.emplace(key, f.kv_.size());
    f.kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = f.find("general.alignment")) {
    if (!a->is_integer()) return fail(data_loss("general.alignment has type {}, expected an integer", gguf_type_name(a->type)));
    uint64_t al = a->type == GgufType::kU8 || a->type == GgufType::kU16 || a->type == GgufType::kU32 || a->type == GgufType::kU64
                      ? a->u
                      : static_cast<uint64_t>(a->i);
    if (al == 0 || (al & (al - 1)) != 0 || al > (1u << 20))
      return fail(data_loss("general.alignment {} is not a power of two between 1 and 1 MiB", al));
    f.alignment_ = al;
  }

  // A tensor info takes at least 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset) bytes.
  if (num_tensors > r.remaining() / 24)
    return fail(data_loss("tensor_count {} cannot fit in the {} bytes left in the file", num_tensors, r.remaining()));
  f.tensors_.resize(num_tensors);
  for (uint64_t ti = 0; ti < num_tensors; ++ti) {
    GgufTensorInfo& t = f.tensors_[ti];
    HZ_RETURN_IF_ERROR(fail(read_string(r, &t.name, fmt::format("tensor #{} name", ti), kMaxNameBytes)));
    if (f.tensor_index_.count(t.name) != 0) return fail(data_loss("tensor '{}' appears twice", t.name));
    uint32_t n_dims;
    if (!r.read(&n_dims)) return fail(data_loss("tensor '{}': truncated (n_dims)", t.name));
    if (n_dims == 0 || n_dims > kMaxDims) return fail(data_loss("tensor '{}': n_dims {} is not between 1 and {}", t.name, n_dims, kMaxDims));
    t.dims.resize(n_dims);
    uint64_t elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      if (!r.read(&t.dims[d])) return fail(data_loss("tensor '{}': truncated (dims)", t.name));
      if (t.dims[d] == 0) return fail(data_loss("tensor '{}': dimension {} is 0", t.name, d));
      auto e = checked_mul(elems, t.dims[d]);
      if (!e || *e > (uint64_t{1} << 48)) return fail(data_loss("tensor '{}': element count overflows (shape too large)", t.name));
      elems = *e;
    }
    uint32_t type_id;
    if (!r.read(&type_id)) return fail(data_loss("tensor '{}': truncated (type)", t.name));
    auto tr = dtype_traits(type_id);
    if (!tr) return fail(data_loss("tensor '{}': unknown tensor type {}", t.name, type_id));
    t.dtype = tr->dtype;
    if (t.dims[0] % tr->block_elems != 0)
      return fail(data_loss("tensor '{}': row length {} is not a multiple of the {} block size {}", t.name, t.dims[0], tr->name,
                            tr->block_elems));
    auto nb = checked_mul(elems / tr->block_elems, tr->block_bytes);
    if (!nb) return fail(data_loss("tensor '{}': byte size overflows", t.name));
    t.num_bytes = *nb;
    if (!r.read(&t.offset)) return fail(data_loss("tensor '{}': truncated (offset)", t.name));
    if (t.offset % f.alignment_ != 0)
      return fail(data_loss("tensor '{}': offset {} is not a multiple of the alignment {}", t.name, t.offset, f.alignment_));
    f.tensor_index_.emplace(t.name, ti);
  }

  auto data_start = checked_align_up(r.pos(), f.alignment_);
  if (!data_start) return fail(data_loss("data section offset overflows"));
  f.data_offset_ = *data_start;
  if (num_tensors > 0 && f.data_offset_ > size)
    return fail(data_loss("truncated: data section would start at byte {} but the file has {} bytes", f.data_offset_, size));
  uint64_t data_size = size >= f.data_offset_ ? size - f.data_offset_ : 0;

  // Bounds and overlap: sort tensor indices by offset and check each against the next.
  std::vector<size_t> order(num_tensors);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return f.tensors_[a].offset < f.tensors_[b].offset; });
  for (size_t k = 0; k < order.size(); ++k) {
    GgufTensorInfo& t = f.tensors_[order[k]];
    auto end = checked_add(t.offset, t.num_bytes);
    if (!end || *end > data_size)
      return fail(data_loss("tensor '{}': data [{}, {}) lies outside the {}-byte data section (file truncated?)", t.name,
                            t.offset, end ? *end : UINT64_MAX, data_size));
    if (k + 1 < order.size() && *end > f.tensors_[order[k + 1]].offset)
      return fail(data_loss("tensor '{}' overlaps tensor '{}'", t.name, f.tensors_[order[k + 1]].name));
    t.data = data + f.data_offset_ + t.offset;
  }
  return f;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

namespace {
// Integer value of any integer type, or nullopt when negative-for-unsigned or not an integer.
std::optional<uint64_t> as_uint(const GgufValue& v) {
  switch (v.type) {
    case GgufType::kU8: case GgufType::kU16: case GgufType::kU32: case GgufType::kU64: return v.u;
    case GgufType::kI8: case GgufType::kI16: case GgufType::kI32: case GgufType::kI64:
      if (v.i < 0) return std::nullopt;
      return static_cast<uint64_t>(v.i);
    default: return std::nullopt;
  }
}
}  // namespace

Result<uint64_t> GgufFile::require_uint(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return not_found("{}: required metadata key '{}' is missing", path_, key);
  auto u = as_uint(*v);
  if (!u) return data_loss("{}: metadata '{}' has type {} (value {}), expected a non-negative integer", path_, key,
                           gguf_type_name(v->type), v->to_display_string());
  return *u;
}

Result<uint64_t> GgufFile::get_uint_or(std::string_view key, uint64_t def) const {
  if (!has(key)) return def;
  return require_uint(key);
}

Result<int64_t> GgufFile::get_int_or(std::string_view key, int64_t def) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return def;
  if (!v->is_integer()) return data_loss("{}: metadata '{}' has type {}, expected an integer", path_, key, gguf_type_name(v->type));
  if (v->type == GgufType::kU64 && v->u > static_cast<uint64_t>(INT64_MAX))
    return data_loss("{}: metadata '{}' value {} is out of range", path_, key, v->u);
  switch (v->type) {
    case GgufType::kU8: case GgufType::kU16: case GgufType::kU32: case GgufType::kU64: return static_cast<int64_t>(v->u);
    default: return v->i;
  }
}

Result<double> GgufFile::get_float_or(std::string_view key, double def) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return def;
  if (v->is_float()) return v->f;
  if (v->is_integer()) {
    auto i = get_int_or(key, 0);
    if (!i.ok()) return i.status();
    return static_cast<double>(*i);
  }
  return data_loss("{}: metadata '{}' has type {}, expected a number", path_, key, gguf_type_name(v->type));
}

Result<bool> GgufFile::get_bool_or(std::string_view key, bool def) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return def;
  if (v->type != GgufType::kBool) return data_loss("{}: metadata '{}' has type {}, expected bool", path_, key, gguf_type_name(v->type));
  return v->b;
}

Result<std::string> GgufFile::get_string_or(std::string_view key, std::string def) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return def;
  if (v->type != GgufType::kString) return data_loss("{}: metadata '{}' has type {}, expected string", path_, key, gguf_type_name(v->type));
  return v->str;
}

Result<std::string> GgufFile::require_string(std::string_view key) const {
  if (!has(key)) return not_found("{}: required metadata key '{}' is missing", path_, key);
  return get_string_or(key, "");
}

Result<const std::vector<std::string>*> GgufFile::get_string_array(std::string_view key) const {
  static const std::vector<std::string> kEmpty;
  const GgufValue* v = find(key);
  if (v == nullptr) return &kEmpty;
  if (v->type != GgufType::kArray || v->arr->elem_type != GgufType::kString)
    return data_loss("{}: metadata '{}' is not an array of strings", path_, key);
  return &v->arr->strings;
}

Result<std::vector<float>> GgufFile::get_f32_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::vector<float>{};
  if (v->type != GgufType::kArray) return data_loss("{}: metadata '{}' is not an array", path_, key);
  const GgufArray& a = *v->arr;
  std::vector<float> out(a.count);
  if (a.elem_type == GgufType::kF32) {
    if (a.count > 0) std::memcpy(out.data(), a.raw.data(), a.count * 4);
  } else if (a.elem_type == GgufType::kF64) {
    for (uint64_t i = 0; i < a.count; ++i) out[i] = static_cast<float>(load_le<double>(a.raw.data() + 8 * i));
  } else {
    return data_loss("{}: metadata '{}' is an array of {}, expected f32", path_, key, gguf_type_name(a.elem_type));
  }
  return out;
}

Result<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::vector<int64_t>{};
  if (v->type != GgufType::kArray) return data_loss("{}: metadata '{}' is not an array", path_, key);
  const GgufArray& a = *v->arr;
  std::vector<int64_t> out(a.count);
  const uint8_t* p = a.raw.data();
  for (uint64_t i = 0; i < a.count; ++i) {
    switch (a.elem_type) {
      case GgufType::kU8: out[i] = load_le<uint8_t>(p + i); break;
      case GgufType::kI8: out[i] = load_le<int8_t>(p + i); break;
      case GgufType::kU16: out[i] = load_le<uint16_t>(p + 2 * i); break;
      case GgufType::kI16: out[i] = load_le<int16_t>(p + 2 * i); break;
      case GgufType::kU32: out[i] = load_le<uint32_t>(p + 4 * i); break;
      case GgufType::kI32: out[i] = load_le<int32_t>(p + 4 * i); break;
      case GgufType::kU64: out[i] = static_cast<int64_t>(load_le<uint64_t>(p + 8 * i)); break;
      case GgufType::kI64: out[i] = load_le<int64_t>(p + 8 * i); break;
      default:
        return data_loss("{}: metadata '{}' is an array of {}, expected integers", path_, key, gguf_type_name(a.elem_type));
    }
  }
  return out;
}

const GgufTensorInfo* GgufFile::get_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<const TensorInfo*> GgufFile::tensor_list() const {
  std::vector<const TensorInfo*> out;
  out.reserve(tensors_.size());
  for (const auto& t : tensors_) out.push_back(&t);
  return out;
}

// ---------------------------------------------------------------- writer

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::remove(const std::string& key) {
  kv_.erase(std::remove_if(kv_.begin(), kv_.end(), [&](const auto& kv) { return kv.first == key; }), kv_.end());
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, std::vector<uint64_t> dims, Producer fill) {
  uint64_t elems = 1;
  for (uint64_t d : dims) elems *= d;
  uint64_t nb = elems / traits(dtype).block_elems * traits(dtype).block_bytes;
  tensors_.push_back(Tensor{name, dtype, std::move(dims), nb, std::move(fill)});
}

void GgufWriter::add_tensor_data(const std::string& name, DType dtype, std::vector<uint64_t> dims, const void* data) {
  add_tensor(name, dtype, std::move(dims), [data](uint8_t* dst, uint64_t n) { std::memcpy(dst, data, n); });
}

namespace {
void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}
template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  put_bytes(out, &v, sizeof(T));
}
void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}
void put_value(std::vector<uint8_t>& out, const GgufValue& v) {
  switch (v.type) {
    case GgufType::kU8: put<uint8_t>(out, static_cast<uint8_t>(v.u)); break;
    case GgufType::kI8: put<int8_t>(out, static_cast<int8_t>(v.i)); break;
    case GgufType::kU16: put<uint16_t>(out, static_cast<uint16_t>(v.u)); break;
    case GgufType::kI16: put<int16_t>(out, static_cast<int16_t>(v.i)); break;
    case GgufType::kU32: put<uint32_t>(out, static_cast<uint32_t>(v.u)); break;
    case GgufType::kI32: put<int32_t>(out, static_cast<int32_t>(v.i)); break;
    case GgufType::kU64: put<uint64_t>(out, v.u); break;
    case GgufType::kI64: put<int64_t>(out, v.i); break;
    case GgufType::kF32: put<float>(out, static_cast<float>(v.f)); break;
    case GgufType::kF64: put<double>(out, v.f); break;
    case GgufType::kBool: put<uint8_t>(out, v.b ? 1 : 0); break;
    case GgufType::kString: put_string(out, v.str); break;
    case GgufType::kArray: {
      const GgufArray& a = *v.arr;
      put<uint32_t>(out, static_cast<uint32_t>(a.elem_type));
      put<uint64_t>(out, a.count);
      if (a.elem_type == GgufType::kString) {
        for (const auto& s : a.strings) put_string(out, s);
      } else if (a.elem_type == GgufType::kArray) {
        for (const auto& e : a.nested) put_value(out, e);
      } else {
        put_bytes(out, a.raw.data(), a.raw.size());
      }
      break;
    }
  }
}
}  // namespace

std::vector<uint8_t> GgufWriter::header_bytes(std::vector<uint64_t>* offsets) const {
  std::vector<uint8_t> out;
  put<uint32_t>(out, kGgufMagic);
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  bool has_alignment = false;
  for (const auto& kv : kv_) has_alignment |= kv.first == "general.alignment";
  put<uint64_t>(out, kv_.size() + ((alignment_ != 32 && !has_alignment) ? 1 : 0));
  for (const auto& kv : kv_) {
    put_string(out, kv.first);
    put<uint32_t>(out, static_cast<uint32_t>(kv.second.type));
    put_value(out, kv.second);
  }
  if (alignment_ != 32 && !has_alignment) {
    put_string(out, "general.alignment");
    put<uint32_t>(out, static_cast<uint32_t>(GgufType::kU32));
    put<uint32_t>(out, static_cast<uint32_t>(alignment_));
  }
  uint64_t off = 0;
  offsets->clear();
  for (const auto& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) put<uint64_t>(out, d);
    put<uint32_t>(out, static_cast<uint32_t>(t.dtype));
    put<uint64_t>(out, off);
    offsets->push_back(off);
    off = (off + t.num_bytes + alignment_ - 1) / alignment_ * alignment_;
  }
  out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  return out;
}

Status GgufWriter::write(const std::string& path, const std::function<void(size_t, size_t)>& progress) const {
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> header = header_bytes(&offsets);
  std::string tmp = path + ".tmp";
  FILE* fp = std::fopen(tmp.c_str(), "wb");
  if (fp == nullptr) return io_error("{}: cannot create: {}", tmp, std::strerror(errno));
  bool ok = std::fwrite(header.data(), 1, header.size(), fp) == header.size();
  std::vector<uint8_t> buf;
  for (size_t i = 0; ok && i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    uint64_t padded = (t.num_bytes + alignment_ - 1) / alignment_ * alignment_;
    buf.assign(padded, 0);
    t.fill(buf.data(), t.num_bytes);
    ok = std::fwrite(buf.data(), 1, padded, fp) == padded;
    if (progress) progress(i + 1, tensors_.size());
  }
  ok = (std::fclose(fp) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    return io_error("{}: write failed (disk full?)", path);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return io_error("{}: cannot rename from {}", path, tmp);
  return Status();
}

std::vector<uint8_t> GgufWriter::write_to_memory() const {
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> out = header_bytes(&offsets);
  for (const auto& t : tensors_) {
    size_t start = out.size();
    uint64_t padded = (t.num_bytes + alignment_ - 1) / alignment_ * alignment_;
    out.resize(start + padded, 0);
    t.fill(out.data() + start, t.num_bytes);
  }
  return out;
}

}  // namespace hz
