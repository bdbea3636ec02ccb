// The layer order of src/LAYERS holds: every #include "..." under src/ names its own module or a
// module on a lower layer. Also checks the checker on a small made-up tree.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Layers {
  std::map<std::string, int> layer_of;        // module -> layer index (0 = lowest)
  std::set<std::pair<std::string, std::string>> allowed;  // (file, included path) exceptions
};

Layers parse_layers(const std::string& text) {
  Layers out;
  std::istringstream in(text);
  std::string line;
  int layer = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string word;
    words >> word;
    if (word == "allow") {
      std::string file, included;
      words >> file >> included;
      out.allowed.emplace(file, included);
      continue;
    }
    do {
      out.layer_of[word] = layer;
    } while (words >> word);
    ++layer;
  }
  return out;
}

// files: path under src/ -> contents. Returns one line per violation.
std::vector<std::string> violations(const Layers& layers, const std::map<std::string, std::string>& files) {
  static const std::regex kInclude(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<std::string> out;
  std::set<std::string> unknown;
  for (const auto& [path, text] : files) {
    const std::string module = path.substr(0, path.find('/'));
    auto own = layers.layer_of.find(module);
    if (own == layers.layer_of.end()) {
      if (path.find('/') != std::string::npos && unknown.insert(module).second)
        out.push_back("src/" + module + "/ is not in src/LAYERS");
      continue;
    }
    std::istringstream in(text);
    std::string line;
    int line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      std::smatch m;
      if (!std::regex_search(line, m, kInclude)) continue;
      const std::string included = m[1];
      const size_t slash = included.find('/');
      if (slash == std::string::npos) continue;  // a file next to this one
      auto other = layers.layer_of.find(included.substr(0, slash));
      if (other == layers.layer_of.end()) continue;  // not a module of src/ (e.g. a third-party path)
      if (other->first == module || other->second < own->second) continue;
      if (layers.allowed.count({path, included}) != 0) continue;
      out.push_back("src/" + path + ":" + std::to_string(line_no) + " includes \"" + included + "\": " +
                    other->first + " is " + (other->second == own->second ? "a peer of " : "above ") + module +
                    " in src/LAYERS");
    }
  }
  return out;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(LayeringTest, SourceTreeFollowsLayers) {
  const fs::path src = fs::path(HORIZON_SOURCE_DIR) / "src";
  const std::string layers_text = read_file(src / "LAYERS");
  ASSERT_FALSE(layers_text.empty()) << "cannot read " << (src / "LAYERS");
  const Layers layers = parse_layers(layers_text);
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(src)) {
    if (!e.is_regular_file()) continue;
    const std::string ext = e.path().extension().string();
    if (ext != ".h" && ext != ".cc" && ext != ".inc" && ext != ".cu" && ext != ".cuh") continue;
    files[fs::relative(e.path(), src).generic_string()] = read_file(e.path());
  }
  ASSERT_GT(files.size(), 50u) << "too few sources found under " << src;
  std::string report;
  for (const std::string& v : violations(layers, files)) report += v + "\n";
  EXPECT_TRUE(report.empty()) << report;
}

TEST(LayeringTest, CheckerFindsUpwardPeerAndUnknownIncludes) {
  const Layers layers = parse_layers("# comment\nbase\nkv sched\nserver\nallow kv/x.cc server/ok.h\n");
  const std::map<std::string, std::string> files = {
      {"base/a.h", "#include \"base/b.h\"\n#include <vector>\n"},
      {"kv/x.cc", "#include \"base/a.h\"\n#include \"server/ok.h\"\n  #  include \"server/bad.h\"\n"},
      {"sched/y.h", "#pragma once\n#include \"kv/x.h\"\n"},
      {"server/z.cc", "#include \"sched/y.h\"\n#include \"kv/x.h\"\n#include \"nlohmann/json.hpp\"\n"},
      {"newmod/w.cc", "#include \"base/a.h\"\n"},
  };
  const std::vector<std::string> v = violations(layers, files);
  ASSERT_EQ(v.size(), 3u) << ::testing::PrintToString(v);
  EXPECT_EQ(v[0], "src/kv/x.cc:3 includes \"server/bad.h\": server is above kv in src/LAYERS");
  EXPECT_EQ(v[1], "src/newmod/ is not in src/LAYERS");
  EXPECT_EQ(v[2], "src/sched/y.h:2 includes \"kv/x.h\": kv is a peer of sched in src/LAYERS");
}

}  // namespace
