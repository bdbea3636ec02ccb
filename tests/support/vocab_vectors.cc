#include "support/vocab_vectors.h"

#include <fstream>
#include <sstream>

namespace hz::test {

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> read_vocab_texts(const std::string& path) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::string data = read_file_bytes(path);
  std::vector<std::string> texts;
  size_t pos = 0;
  for (size_t hit; (hit = data.find(sep, pos)) != std::string::npos; pos = hit + sep.size()) {
    texts.push_back(data.substr(pos, hit - pos));
  }
  return texts;
}

std::vector<std::vector<int32_t>> read_vocab_ids(const std::string& path) {
  std::vector<std::vector<int32_t>> all;
  std::istringstream in(read_file_bytes(path));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    int32_t id;
    while (ls >> id) ids.push_back(id);
    all.push_back(std::move(ids));
  }
  return all;
}

}  // namespace hz::test
