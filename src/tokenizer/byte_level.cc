#include "tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "tokenizer/utf8.h"

namespace hz::byte_level {
namespace {

struct Tables {
  std::array<uint32_t, 256> byte_to_cp{};
  std::array<int16_t, 324> cp_to_byte{};  // -1: not in the alphabet
  std::array<std::string, 256> byte_to_utf8;

  Tables() {
    cp_to_byte.fill(-1);
    auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : next++;
      byte_to_cp[b] = cp;
      cp_to_byte[cp] = static_cast<int16_t>(b);
      utf8::append(byte_to_utf8[b], cp);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

void encode(std::string_view bytes, std::string& out) {
  const Tables& t = tables();
  for (char c : bytes) out.append(t.byte_to_utf8[static_cast<uint8_t>(c)]);
}

std::string decode(std::string_view text) {
  const Tables& t = tables();
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp;
    size_t len = utf8::decode(text.data() + i, text.size() - i, &cp);
    if (len == 0) {  // not UTF-8 at all: pass the byte through
      out.push_back(text[i]);
      ++i;
      continue;
    }
    if (cp < t.cp_to_byte.size() && t.cp_to_byte[cp] >= 0) {
      out.push_back(static_cast<char>(t.cp_to_byte[cp]));
    } else {
      out.append(text.data() + i, len);
    }
    i += len;
  }
  return out;
}

}  // namespace hz::byte_level
