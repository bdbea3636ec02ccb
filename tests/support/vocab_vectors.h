// The tokenizer vectors in shared/testdata/vocab: NAME.gguf.inp texts and NAME.gguf.out ids.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hz::test {

std::string read_file_bytes(const std::string& path);  // whole file, byte-exact ("" if missing)
// The texts of an .inp file, split on "\n__ggml_vocab_test__\n" (every byte kept).
std::vector<std::string> read_vocab_texts(const std::string& path);
// The id lines of an .out file.
std::vector<std::vector<int32_t>> read_vocab_ids(const std::string& path);

}  // namespace hz::test
