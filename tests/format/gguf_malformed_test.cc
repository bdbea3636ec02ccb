// Malformed GGUF files, assembled byte by byte in memory: each must be refused with an error that
// names the field at fault, and none may crash (this suite also runs under ASan+UBSan).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "support/test_support.h"

namespace hz {
namespace {

// Little-endian byte assembler for hand-made GGUF headers.
class Bytes {
 public:
  Bytes& u8(uint8_t v) { return raw(&v, 1); }
  Bytes& u32(uint32_t v) { return raw(&v, 4); }
  Bytes& u64(uint64_t v) { return raw(&v, 8); }
  Bytes& f32(float v) { return raw(&v, 4); }
  Bytes& str(const std::string& s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  Bytes& raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    data_.insert(data_.end(), b, b + n);
    return *this;
  }
  Bytes& header(uint64_t num_tensors, uint64_t num_kv, uint32_t version = 3) {
    return raw("GGUF", 4).u32(version).u64(num_tensors).u64(num_kv);
  }
  Bytes& kv_u32(const std::string& key, uint32_t v) { return str(key).u32(static_cast<uint32_t>(GgufType::kU32)).u32(v); }
  // A tensor info: name, dims, type id, offset.
  Bytes& tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  // Zero padding up to a multiple of `align`, then `n` data bytes.
  Bytes& data_section(size_t n, size_t align = 32) {
    while (data_.size() % align != 0) data_.push_back(0);
    data_.resize(data_.size() + n, 0);
    return *this;
  }
  size_t size() const { return data_.size(); }
  std::vector<uint8_t>& vec() { return data_; }

 private:
  std::vector<uint8_t> data_;
};

Status parse_status(const std::vector<uint8_t>& bytes) {
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "bad.gguf");
  return f.status();
}

// Asserts the parse fails and the message names the file and contains `needle`.
#define EXPECT_REFUSED(bytes, needle)                                                     \
  do {                                                                                    \
    Status s_ = parse_status(bytes);                                                      \
    ASSERT_FALSE(s_.ok()) << "accepted a malformed file; expected error with: " << needle; \
    EXPECT_NE(s_.message().find(needle), std::string::npos) << s_.message();              \
    EXPECT_NE(s_.message().find("bad.gguf"), std::string::npos) << s_.message();          \
  } while (0)

// A small valid file from the writer: a few metadata types and two tensors.
std::vector<uint8_t> valid_file() {
  GgufWriter w;
  w.set_str("general.architecture", "llama");
  w.set_u32("llama.block_count", 1);
  w.set_bool("x.flag", true);
  w.set("tokenizer.ggml.tokens", GgufValue::make_str_array({"<unk>", "a", "b"}));
  w.set("tokenizer.ggml.scores", GgufValue::make_f32_array({0.f, -1.f, -2.f}));
  std::vector<float> a(64, 1.f), b(32, 2.f);
  w.add_tensor_data("a", DType::kF32, {16, 4}, a.data());
  w.add_tensor_data("b", DType::kF32, {32}, b.data());
  return w.write_to_memory();
}

TEST(GgufMalformedTest, ValidBaselineParses) {
  auto bytes = valid_file();
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "good.gguf");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->tensors().size(), 2u);
  Bytes hand;
  hand.header(1, 1).kv_u32("k", 7).tensor("t", {8}, 0, 0).data_section(32);
  auto g = GgufFile::parse(hand.vec().data(), hand.size(), "hand.gguf");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(*g->require_uint("k"), 7u);
}

TEST(GgufMalformedTest, RefusesEmptyAndTinyFiles) {
  EXPECT_REFUSED(std::vector<uint8_t>{}, "too short");
  EXPECT_REFUSED(std::vector<uint8_t>({'G', 'G'}), "too short");
}

TEST(GgufMalformedTest, RefusesBadMagic) {
  auto bytes = valid_file();
  bytes[0] = 'X';
  EXPECT_REFUSED(bytes, "bad magic");
  Bytes ggml;  // an old GGML/GGJT file
  ggml.raw("tjgg", 4).u32(3).u64(0).u64(0);
  EXPECT_REFUSED(ggml.vec(), "bad magic");
}

TEST(GgufMalformedTest, RefusesVersion1) {
  Bytes b;
  b.header(0, 0, 1);
  EXPECT_REFUSED(b.vec(), "version 1");
}

TEST(GgufMalformedTest, RefusesUnknownVersion) {
  Bytes b;
  b.header(0, 0, 7);
  EXPECT_REFUSED(b.vec(), "GGUF version 7");
  Bytes z;
  z.header(0, 0, 0);
  EXPECT_REFUSED(z.vec(), "GGUF version 0");
}

TEST(GgufMalformedTest, RefusesByteSwappedVersion) {
  Bytes b;
  b.header(0, 0, 0x03000000u);  // version 3 written big-endian
  EXPECT_REFUSED(b.vec(), "byte-swapped");
}

TEST(GgufMalformedTest, RefusesTruncationInEachHeaderField) {
  // Cut points chosen inside each field of a hand-assembled file; the expected text names it.
  Bytes b;
  b.header(1, 2);
  size_t kv0 = b.size();
  b.kv_u32("general.alignment", 32);
  size_t kv1 = b.size();
  b.str("arr").u32(static_cast<uint32_t>(GgufType::kArray)).u32(static_cast<uint32_t>(GgufType::kU32)).u64(2).u32(1).u32(2);
  size_t ti = b.size();
  const std::string name = "blk.0.attn_q.weight";  // 19 bytes: long enough to pass the up-front count bound
  b.tensor(name, {8, 2}, 0, 0);
  b.data_section(64);
  auto cut = [&](size_t n) { return std::vector<uint8_t>(b.vec().begin(), b.vec().begin() + n); };
  EXPECT_REFUSED(cut(6), "version");
  EXPECT_REFUSED(cut(12), "tensor_count");
  EXPECT_REFUSED(cut(20), "metadata_kv_count");
  EXPECT_REFUSED(cut(kv0 + 4), "metadata key #0: truncated (string length)");
  EXPECT_REFUSED(cut(kv0 + 10), "metadata key #0: string length");
  EXPECT_REFUSED(cut(kv0 + 8 + 17 + 2), "truncated (value type)");
  EXPECT_REFUSED(cut(kv1 - 2), "truncated (u32 value)");
  EXPECT_REFUSED(cut(kv1 + 8 + 3 + 4 + 2), "truncated (array element type)");
  EXPECT_REFUSED(cut(kv1 + 8 + 3 + 8 + 3), "truncated (array length)");
  EXPECT_REFUSED(cut(ti - 3), "metadata 'arr': array of 2 u32 elements exceeds");
  EXPECT_REFUSED(cut(ti + 3), "tensor_count 1 cannot fit in the 3 bytes left");
  EXPECT_REFUSED(cut(ti + 25), "tensor #0 name: string length 19 exceeds the 17 bytes left");
  EXPECT_REFUSED(cut(ti + 27 + 2), "truncated (n_dims)");
  EXPECT_REFUSED(cut(ti + 27 + 4 + 12), "truncated (dims)");
  EXPECT_REFUSED(cut(ti + 27 + 4 + 16 + 1), "truncated (type)");
  EXPECT_REFUSED(cut(ti + 27 + 4 + 16 + 4 + 5), "truncated (offset)");
  EXPECT_REFUSED(cut(b.size() - 1), "outside the");
  // Every prefix of the file is refused, never accepted and never a crash.
  for (size_t n = 0; n < b.size(); ++n) {
    EXPECT_FALSE(GgufFile::parse(b.vec().data(), n, "prefix").ok()) << "prefix of " << n << " bytes accepted";
  }
}

TEST(GgufMalformedTest, RefusesAbsurdTensorCount) {
  Bytes b;
  b.header(uint64_t{1} << 40, 0);
  EXPECT_REFUSED(b.vec(), "tensor_count");
  Bytes c;  // below the hard limit but more than the file could hold
  c.header(1000, 0).tensor("t", {8}, 0, 0);
  EXPECT_REFUSED(c.vec(), "tensor_count 1000 cannot fit");
}

TEST(GgufMalformedTest, RefusesAbsurdKvCount) {
  Bytes b;
  b.header(0, UINT64_MAX);
  EXPECT_REFUSED(b.vec(), "metadata_kv_count");
}

TEST(GgufMalformedTest, RefusesAbsurdStringLength) {
  Bytes b;
  b.header(0, 1).u64(UINT64_MAX - 3).raw("abc", 3);  // key length near 2^64
  EXPECT_REFUSED(b.vec(), "metadata key #0: string length");
  Bytes v;  // a string value longer than the file
  v.header(0, 1).str("name").u32(static_cast<uint32_t>(GgufType::kString)).u64(uint64_t{1} << 62).raw("xy", 2);
  EXPECT_REFUSED(v.vec(), "metadata 'name': string length");
  Bytes t;  // a tensor name beyond the name limit (present in full, so only the limit refuses it)
  t.header(1, 0).str(std::string(70000, 'n')).u32(1).u64(8).u32(0).u64(0).data_section(32);
  EXPECT_REFUSED(t.vec(), "tensor #0 name: string length 70000 exceeds the limit");
}

TEST(GgufMalformedTest, RefusesAbsurdArrayLength) {
  Bytes b;
  b.header(0, 1).str("arr").u32(static_cast<uint32_t>(GgufType::kArray)).u32(static_cast<uint32_t>(GgufType::kU64));
  b.u64(uint64_t{1} << 61).u64(1);  // 2^61 * 8 overflows 64 bits
  EXPECT_REFUSED(b.vec(), "metadata 'arr': array of 2305843009213693952 u64 elements exceeds");
  Bytes s;
  s.header(0, 1).str("strs").u32(static_cast<uint32_t>(GgufType::kArray)).u32(static_cast<uint32_t>(GgufType::kString));
  s.u64(uint64_t{1} << 40).str("a");
  EXPECT_REFUSED(s.vec(), "metadata 'strs': array length 1099511627776 cannot fit");
  Bytes n;
  n.header(0, 1).str("nest").u32(static_cast<uint32_t>(GgufType::kArray)).u32(static_cast<uint32_t>(GgufType::kArray));
  n.u64(UINT64_MAX);
  EXPECT_REFUSED(n.vec(), "metadata 'nest': array length");
}

TEST(GgufMalformedTest, RefusesDeeplyNestedArrays) {
  Bytes b;
  b.header(0, 1).str("deep").u32(static_cast<uint32_t>(GgufType::kArray));
  for (int i = 0; i < 10; ++i) b.u32(static_cast<uint32_t>(GgufType::kArray)).u64(1);
  b.u32(static_cast<uint32_t>(GgufType::kU8)).u64(1).u8(0);
  EXPECT_REFUSED(b.vec(), "metadata 'deep': arrays nested deeper");
}

TEST(GgufMalformedTest, RefusesUnknownValueType) {
  Bytes b;
  b.header(0, 1).str("weird").u32(13).u32(0);
  EXPECT_REFUSED(b.vec(), "metadata 'weird': unknown value type 13");
  Bytes a;
  a.header(0, 1).str("weird_arr").u32(static_cast<uint32_t>(GgufType::kArray)).u32(0xdeadbeef).u64(0);
  EXPECT_REFUSED(a.vec(), "metadata 'weird_arr': unknown array element type");
}

TEST(GgufMalformedTest, RefusesUnknownTensorType) {
  Bytes b;
  b.header(1, 0).tensor("w", {32}, 99, 0).data_section(128);
  EXPECT_REFUSED(b.vec(), "tensor 'w': unknown tensor type 99");
  Bytes removed;  // Q4_2 (id 4) was removed from GGUF long ago
  removed.header(1, 0).tensor("w", {32}, 4, 0).data_section(128);
  EXPECT_REFUSED(removed.vec(), "tensor 'w': unknown tensor type 4");
}

TEST(GgufMalformedTest, RefusesBadNumberOfDims) {
  Bytes zero;
  zero.header(1, 0).str("w").u32(0).u32(0).u64(0).data_section(32);
  EXPECT_REFUSED(zero.vec(), "tensor 'w': n_dims 0");
  Bytes five;
  five.header(1, 0).tensor("w", {1, 1, 1, 1, 1}, 0, 0).data_section(32);
  EXPECT_REFUSED(five.vec(), "tensor 'w': n_dims 5");
}

TEST(GgufMalformedTest, RefusesZeroDimension) {
  Bytes b;
  b.header(1, 0).tensor("w", {4, 0}, 0, 0).data_section(32);
  EXPECT_REFUSED(b.vec(), "tensor 'w': dimension 1 is 0");
}

TEST(GgufMalformedTest, RefusesElementCountOverflow) {
  Bytes b;
  b.header(1, 0).tensor("w", {uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0).data_section(32);
  EXPECT_REFUSED(b.vec(), "tensor 'w': element count overflows");
  Bytes big;  // no overflow of the count, but the byte size is absurd: must end as out of range
  big.header(1, 0).tensor("w", {uint64_t{1} << 24, uint64_t{1} << 20}, 0, 0).data_section(32);
  EXPECT_REFUSED(big.vec(), "tensor 'w': data [0, ");
}

TEST(GgufMalformedTest, RefusesRowNotMultipleOfBlock) {
  Bytes b;
  b.header(1, 0).tensor("w", {33, 2}, static_cast<uint32_t>(DType::kQ8_0), 0).data_section(128);
  EXPECT_REFUSED(b.vec(), "tensor 'w': row length 33 is not a multiple of the q8_0 block size 32");
}

TEST(GgufMalformedTest, RefusesMisalignedOffset) {
  Bytes b;
  b.header(2, 0).tensor("a", {8}, 0, 0).tensor("b", {8}, 0, 33).data_section(128);
  EXPECT_REFUSED(b.vec(), "tensor 'b': offset 33 is not a multiple of the alignment 32");
}

TEST(GgufMalformedTest, RefusesOutOfRangeData) {
  Bytes b;
  b.header(1, 0).tensor("w", {64}, 0, 0).data_section(128);  // 256 bytes needed
  EXPECT_REFUSED(b.vec(), "tensor 'w': data [0, 256) lies outside the 128-byte data section");
  Bytes far;
  far.header(1, 0).tensor("w", {8}, 0, UINT64_MAX - 31).data_section(32);  // offset + size overflows
  EXPECT_REFUSED(far.vec(), "tensor 'w': data [");
}

TEST(GgufMalformedTest, RefusesOverlappingTensors) {
  Bytes b;
  b.header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).data_section(128);  // a is [0,64)
  EXPECT_REFUSED(b.vec(), "tensor 'a' overlaps tensor 'b'");
  Bytes same;
  same.header(2, 0).tensor("a", {8}, 0, 0).tensor("b", {8}, 0, 0).data_section(64);
  EXPECT_REFUSED(same.vec(), "overlaps");
}

TEST(GgufMalformedTest, RefusesDuplicateKey) {
  Bytes b;
  b.header(0, 2).kv_u32("llama.block_count", 2).kv_u32("llama.block_count", 3);
  EXPECT_REFUSED(b.vec(), "metadata key 'llama.block_count' appears twice");
}

TEST(GgufMalformedTest, RefusesEmptyKey) {
  Bytes b;
  b.header(0, 1).kv_u32("", 2);
  EXPECT_REFUSED(b.vec(), "metadata key #0 is empty");
}

TEST(GgufMalformedTest, RefusesKeyThatIsNotUtf8) {
  // The header is 24 bytes, so key #0's length field sits at offset 24 and its text at 32.
  for (const std::string& bad : {std::string("ab\xff"), std::string("x\xc0\xaf"), std::string("\xed\xa0\x80"),
                                 std::string("k\xe2\x82"), std::string("\xf4\x90\x80\x80")}) {
    Bytes b;
    b.header(0, 1).kv_u32(bad, 2);
    EXPECT_REFUSED(b.vec(), "metadata key #0 at offset 24 is not valid UTF-8");
  }
  Bytes second;
  second.header(0, 2).kv_u32("ok", 1).kv_u32("b\x80", 2);  // key #1 starts at 24 + 8 + 2 + 4 + 4
  EXPECT_REFUSED(second.vec(), "metadata key #1 at offset 42 is not valid UTF-8 (bad byte 0x80 at offset 51)");
  // Valid multi-byte keys and non-UTF-8 string values are accepted.
  Bytes good;
  good.header(0, 2).kv_u32("caf\xc3\xa9.\xf0\x9f\x98\x80", 1).str("v").u32(static_cast<uint32_t>(GgufType::kString)).str("\xff\xfe");
  auto f = GgufFile::parse(good.vec().data(), good.size(), "good.gguf");
  EXPECT_TRUE(f.ok()) << f.status().message();
}

TEST(GgufMalformedTest, RefusesDuplicateTensorName) {
  Bytes b;
  b.header(2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).data_section(64);
  EXPECT_REFUSED(b.vec(), "tensor 'w' appears twice");
}

TEST(GgufMalformedTest, RefusesBadAlignment) {
  for (uint32_t al : {0u, 3u, 48u, 1u << 21}) {
    Bytes b;
    b.header(0, 1).kv_u32("general.alignment", al);
    EXPECT_REFUSED(b.vec(), "general.alignment " + std::to_string(al) + " is not a power of two");
  }
  Bytes s;
  s.header(0, 1).str("general.alignment").u32(static_cast<uint32_t>(GgufType::kString)).str("32");
  EXPECT_REFUSED(s.vec(), "general.alignment has type string");
  Bytes neg;
  neg.header(0, 1).str("general.alignment").u32(static_cast<uint32_t>(GgufType::kI32)).u32(static_cast<uint32_t>(-32));
  EXPECT_REFUSED(neg.vec(), "general.alignment");
}

TEST(GgufMalformedTest, CustomAlignmentGovernsOffsets) {
  Bytes ok;
  ok.header(2, 1).kv_u32("general.alignment", 64).tensor("a", {8}, 0, 0).tensor("b", {8}, 0, 64).data_section(128, 64);
  auto f = GgufFile::parse(ok.vec().data(), ok.size(), "ok.gguf");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  Bytes bad;
  bad.header(2, 1).kv_u32("general.alignment", 64).tensor("a", {8}, 0, 0).tensor("b", {8}, 0, 32).data_section(128, 64);
  EXPECT_REFUSED(bad.vec(), "tensor 'b': offset 32 is not a multiple of the alignment 64");
}

TEST(GgufMalformedTest, RefusesBoolNotZeroOrOne) {
  Bytes b;
  b.header(0, 1).str("flag").u32(static_cast<uint32_t>(GgufType::kBool)).u8(2);
  EXPECT_REFUSED(b.vec(), "metadata 'flag': bool value 2");
  Bytes a;  // inside an array too
  a.header(0, 1).str("flags").u32(static_cast<uint32_t>(GgufType::kArray)).u32(static_cast<uint32_t>(GgufType::kBool));
  a.u64(3).u8(1).u8(0).u8(0xff);
  EXPECT_REFUSED(a.vec(), "metadata 'flags'[2]: bool value 255");
}

TEST(GgufMalformedTest, CorruptedWriterOutputNeverCrashes) {
  // Flip each byte of the header region of a valid file to a few values: parse must return
  // (ok or an error) and never crash; the sanitizer build catches out-of-bounds reads.
  auto good = valid_file();
  auto f = GgufFile::parse(good.data(), good.size(), "good");
  ASSERT_TRUE(f.ok());
  size_t header = f->data_offset();
  int refused = 0;
  for (size_t i = 0; i < header; ++i) {
    for (uint8_t v : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x80}, static_cast<uint8_t>(good[i] + 1)}) {
      auto bytes = good;
      if (bytes[i] == v) continue;
      bytes[i] = v;
      auto g = GgufFile::parse(bytes.data(), bytes.size(), "mut");
      if (!g.ok()) {
        ++refused;
        EXPECT_FALSE(g.status().message().empty());
      }
    }
  }
  EXPECT_GT(refused, static_cast<int>(header));  // most header corruptions are detected
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(GgufMalformedTest, TruncatedRealModelAlwaysRefused) {
  auto bytes = read_all(test::model_path("stories260K.gguf"));
  ASSERT_GT(bytes.size(), 100000u);
  auto full = GgufFile::parse(bytes.data(), bytes.size(), "stories260K");
  ASSERT_TRUE(full.ok()) << full.status().message();
  size_t header = full->data_offset();
  // Every cut inside the header (the tokenizer arrays included), then a stride through the data.
  std::vector<size_t> cuts;
  for (size_t n = 0; n < header; n += 7) cuts.push_back(n);
  for (size_t n = header; n < bytes.size(); n += 4093) cuts.push_back(n);
  cuts.push_back(bytes.size() - 1);
  for (size_t n : cuts) {
    auto f = GgufFile::parse(bytes.data(), n, "cut");
    ASSERT_FALSE(f.ok()) << "truncated at " << n << " of " << bytes.size() << " bytes but accepted";
    const std::string& m = f.status().message();
    EXPECT_TRUE(m.find("truncated") != std::string::npos || m.find("exceeds") != std::string::npos ||
                m.find("outside") != std::string::npos || m.find("cannot fit") != std::string::npos ||
                m.find("too short") != std::string::npos)
        << "cut at " << n << ": " << m;
  }
}

TEST(GgufMalformedTest, TruncatedFileOnDiskRefused) {
  auto bytes = read_all(test::model_path("stories260K.gguf"));
  std::string dir = test::make_temp_dir("gguf-trunc");
  for (size_t n : {size_t{0}, size_t{3}, size_t{24}, size_t{5000}, bytes.size() / 2, bytes.size() - 1}) {
    std::string path = dir + "/cut.gguf";
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(n));
    }
    auto f = GgufFile::open(path);
    ASSERT_FALSE(f.ok()) << "cut at " << n;
    EXPECT_NE(f.status().message().find(path), std::string::npos) << f.status().message();
  }
  std::remove((dir + "/cut.gguf").c_str());
  std::remove(dir.c_str());
}

}  // namespace
}  // namespace hz
