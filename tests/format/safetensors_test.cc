// safetensors reader: valid files round-trip through the writer; malformed headers are refused with
// an error naming the file and the field, never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "format/safetensors.h"
#include "support/test_support.h"

namespace hz {
namespace {

std::vector<uint8_t> f32_bytes(std::vector<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<uint8_t> valid_file() {
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  w.add("a.weight", "F32", {2, 3}, f32_bytes({1, 2, 3, 4, 5, 6}));
  w.add("b.bias", "F16", {2}, {0x00, 0x3c, 0x00, 0x40});
  return w.to_bytes();
}

// A file from a raw header text and `data_bytes` zero bytes of data.
std::vector<uint8_t> raw_file(const std::string& header, size_t data_bytes, std::optional<uint64_t> len = std::nullopt) {
  std::vector<uint8_t> out(8);
  uint64_t n = len.value_or(header.size());
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data_bytes);
  return out;
}

Status parse_error(const std::vector<uint8_t>& bytes) {
  auto f = SafetensorsFile::parse(bytes.data(), bytes.size(), "bad.safetensors");
  EXPECT_FALSE(f.ok()) << "accepted a malformed file";
  if (f.ok()) return Status();
  EXPECT_NE(f.status().message().find("bad.safetensors"), std::string::npos) << f.status().message();
  return f.status();
}

void expect_error(const std::vector<uint8_t>& bytes, const std::string& fragment) {
  Status s = parse_error(bytes);
  EXPECT_NE(s.message().find(fragment), std::string::npos) << "message: " << s.message();
}

TEST(SafetensorsTest, ParsesWrittenFile) {
  auto bytes = valid_file();
  auto f = SafetensorsFile::parse(bytes.data(), bytes.size(), "ok.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((8 + f->header_bytes()) % 8, 0u);  // data aligned
  ASSERT_EQ(f->tensors().size(), 2u);
  const SafetensorsTensor* a = f->find("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype_name, "F32");
  EXPECT_EQ(a->shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(a->num_bytes(), 24u);
  float x;
  std::memcpy(&x, a->data + 5 * 4, 4);
  EXPECT_EQ(x, 6.0f);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  auto view = f->engine_view(*a, "blk.0.x");
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ(view->dims, (std::vector<uint64_t>{3, 2}));  // GGUF order: contiguous first
  EXPECT_EQ(view->dtype, DType::kF32);
  EXPECT_EQ(view->name, "blk.0.x");
  EXPECT_EQ(f->find("missing"), nullptr);
}

TEST(SafetensorsTest, OpensFromDiskAndRefusesMissingFile) {
  std::string dir = test::make_temp_dir("st_open");
  SafetensorsWriter w;
  w.add("x", "BF16", {4}, std::vector<uint8_t>(8, 0));
  ASSERT_TRUE(w.write(dir + "/m.safetensors").ok());
  auto f = SafetensorsFile::open(dir + "/m.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->tensors()[0].dtype, DType::kBF16);
  auto missing = SafetensorsFile::open(dir + "/none.safetensors");
  EXPECT_FALSE(missing.ok());
}

TEST(SafetensorsMalformedTest, TooShortForLength) { expect_error({1, 2, 3}, "too short"); }

TEST(SafetensorsMalformedTest, HeaderLengthBeyondFile) { expect_error(raw_file("{}", 0, 1000), "exceeds the 2 bytes"); }

TEST(SafetensorsMalformedTest, HeaderLengthOverLimit) {
  expect_error(raw_file("{}", 0, uint64_t{1} << 40), "exceeds the limit");
}

TEST(SafetensorsMalformedTest, HugeLengthDoesNotOverflow) { expect_error(raw_file("{}", 0, UINT64_MAX), "header length"); }

TEST(SafetensorsMalformedTest, NotJson) { expect_error(raw_file("{not json", 0), "not valid JSON"); }

TEST(SafetensorsMalformedTest, NotAnObject) { expect_error(raw_file("[1,2]   ", 0), "does not start with '{'"); }

TEST(SafetensorsMalformedTest, DeepNestingRefused) {
  std::string h = "{\"a\":" + std::string(10000, '[') + std::string(10000, ']') + "}";
  expect_error(raw_file(h, 0), "nests deeper");
}

TEST(SafetensorsMalformedTest, UnknownDtype) {
  expect_error(raw_file(R"({"x":{"dtype":"F7","shape":[1],"data_offsets":[0,1]}})", 1), "tensor 'x': unknown dtype 'F7'");
}

TEST(SafetensorsMalformedTest, MissingDtype) {
  expect_error(raw_file(R"({"x":{"shape":[1],"data_offsets":[0,4]}})", 4), "tensor 'x': 'dtype' is missing");
}

TEST(SafetensorsMalformedTest, NegativeShape) {
  expect_error(raw_file(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), "tensor 'x': shape[0]");
}

TEST(SafetensorsMalformedTest, ShapeOverflow) {
  expect_error(raw_file(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", 4), "overflows");
}

TEST(SafetensorsMalformedTest, ShapeDoesNotMatchBytes) {
  expect_error(raw_file(R"({"x":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 12), "is 16 bytes but data_offsets");
}

TEST(SafetensorsMalformedTest, OffsetsReversed) {
  expect_error(raw_file(R"({"x":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", 4), "end before they begin");
}

TEST(SafetensorsMalformedTest, OffsetsBeyondFile) {
  expect_error(raw_file(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8), "outside the 8-byte data section");
}

TEST(SafetensorsMalformedTest, OffsetsNotAPair) {
  expect_error(raw_file(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4), "not a [begin, end] pair");
}

TEST(SafetensorsMalformedTest, OverlappingTensors) {
  expect_error(raw_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
               "overlap");
}

TEST(SafetensorsMalformedTest, GapBetweenTensors) {
  expect_error(raw_file(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"y":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12),
               "gap");
}

TEST(SafetensorsMalformedTest, TrailingBytes) {
  expect_error(raw_file(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 12), "trailing bytes");
}

TEST(SafetensorsMalformedTest, DuplicateTensorName) {
  expect_error(raw_file(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"x":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", 2),
               "'x' appears twice");
}

TEST(SafetensorsMalformedTest, MetadataNotStrings) {
  expect_error(raw_file(R"({"__metadata__":{"format":3}})", 0), "'__metadata__' entry 'format' is not a string");
  expect_error(raw_file(R"({"__metadata__":[1]})", 0), "'__metadata__' is not an object");
}

TEST(SafetensorsMalformedTest, TooManyDimensions) {
  expect_error(raw_file(R"({"x":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}})", 1), "9 dimensions");
}

TEST(SafetensorsTest, UnsupportedDtypeListedButRefusedAtUse) {
  auto bytes = raw_file(R"({"x":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})", 8);
  auto f = SafetensorsFile::parse(bytes.data(), bytes.size(), "fp8.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_FALSE(f->tensors()[0].dtype.has_value());
  auto view = f->engine_view(f->tensors()[0], "x");
  ASSERT_FALSE(view.ok());
  EXPECT_NE(view.status().message().find("fp8.safetensors: tensor 'x' has dtype F8_E4M3"), std::string::npos)
      << view.status().message();
}

TEST(SafetensorsTest, MisalignedDataRefusedAtUse) {
  // A header padded so that the F32 data starts at an odd offset (vector storage is 16-aligned).
  std::string h = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  while ((8 + h.size()) % 4 != 1) h.push_back(' ');
  auto bytes = raw_file(h, 4);
  auto f = SafetensorsFile::parse(bytes.data(), bytes.size(), "odd.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto view = f->engine_view(f->tensors()[0], "x");
  ASSERT_FALSE(view.ok());
  EXPECT_NE(view.status().message().find("odd.safetensors: tensor 'x' data is not aligned"), std::string::npos)
      << view.status().message();
}

// Every truncation of a valid file is refused cleanly.
TEST(SafetensorsMalformedTest, EveryTruncationRefused) {
  auto good = valid_file();
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + n);
    auto f = SafetensorsFile::parse(cut.data(), cut.size(), "cut.safetensors");
    EXPECT_FALSE(f.ok()) << "accepted a file truncated to " << n << " bytes";
  }
}

}  // namespace
}  // namespace hz
