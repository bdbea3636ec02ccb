// GPT-2's byte-level alphabet: every byte maps to one printable code point (printable ASCII and
// Latin-1 map to themselves, the other 68 bytes to U+0100..U+0143), so any byte string becomes
// valid UTF-8 that a BPE vocabulary can cover.
#pragma once

#include <string>
#include <string_view>

namespace hz::byte_level {

// Appends the byte-level encoding of `bytes` to `out`.
void encode(std::string_view bytes, std::string& out);
// Inverse of encode. Code points outside the alphabet are copied through as UTF-8 (they come
// only from vocabularies that are not purely byte-level).
std::string decode(std::string_view text);

}  // namespace hz::byte_level
