#include "bench/peer_cache.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "base/mapped_file.h"

namespace hz::bench {
namespace fs = std::filesystem;

namespace {

Result<uint64_t> hash_file(const std::string& path, uint64_t seed) {
  HZ_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(path));
  return XXH3_64bits_withSeed(f.data(), f.size(), seed);
}

}  // namespace

Result<std::string> file_digest(const std::string& path) {
  HZ_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(path));
  f.advise_willneed(0, f.size());
  return fmt::format("xxh3-{:016x}-{}", XXH3_64bits(f.data(), f.size()), f.size());
}

Result<std::string> peer_build_digest(const std::string& executable) {
  std::error_code ec;
  const fs::path exe = fs::canonical(executable, ec);
  if (ec) return not_found("peer executable '{}': {}", executable, ec.message());
  HZ_ASSIGN_OR_RETURN(uint64_t h, hash_file(exe.string(), 0));
  std::vector<fs::path> libs;
  for (const auto& e : fs::directory_iterator(exe.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    // Regular files only: lib*.so and lib*.so.0 are symlinks to the versioned file.
    if (name.rfind("lib", 0) == 0 && name.find(".so") != std::string::npos && e.is_regular_file() && !e.is_symlink()) {
      libs.push_back(e.path());
    }
  }
  std::sort(libs.begin(), libs.end());
  for (const auto& l : libs) {
    HZ_ASSIGN_OR_RETURN(uint64_t lh, hash_file(l.string(), h));
    h = XXH3_64bits_withSeed(l.filename().string().data(), l.filename().string().size(), lh);
  }
  return fmt::format("xxh3-{:016x}-{}libs", h, libs.size());
}

std::string PeerCacheKey::hex() const {
  std::string s = "model=" + model_digest + "\npeer=" + peer_digest + "\nargs=";
  for (const auto& a : args) s += a + '\x1f';
  return fmt::format("{:016x}", XXH3_64bits(s.data(), s.size()));
}

std::string default_peer_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/horizon/peer";
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && *home != '\0' ? home : "/tmp") + "/.cache/horizon/peer";
}

std::string PeerCache::path_for(const PeerCacheKey& k) const { return dir_ + "/" + k.hex() + ".json"; }

std::optional<nlohmann::json> PeerCache::load(const PeerCacheKey& k) const {
  std::ifstream in(path_for(k));
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  // A stale or hand-edited file whose parts disagree with the key is a miss, not a wrong answer.
  if (!j.is_object() || j.value("model_digest", "") != k.model_digest || j.value("peer_digest", "") != k.peer_digest ||
      !j.contains("args") || j["args"] != nlohmann::json(k.args)) {
    return std::nullopt;
  }
  return j;
}

Status PeerCache::store(const PeerCacheKey& k, nlohmann::json entry) const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return io_error("--peer-cache-dir '{}': {}", dir_, ec.message());
  entry["model_digest"] = k.model_digest;
  entry["peer_digest"] = k.peer_digest;
  entry["args"] = k.args;
  const std::string path = path_for(k);
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp);
    out << entry.dump(2) << "\n";
    if (!out) return io_error("cannot write '{}'", tmp);
  }
  fs::rename(tmp, path, ec);
  if (ec) return io_error("cannot rename '{}' to '{}': {}", tmp, path, ec.message());
  return Status();
}

}  // namespace hz::bench
