// On-disk cache of a peer engine's benchmark results (llama-bench runs that take many minutes),
// keyed by what determines them: the model file's content digest, the peer build's digest and the
// peer's arguments (thread count, test sizes, KV types, flash attention). One JSON file per key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace hz::bench {

// "xxh3-<16 hex>-<size>": XXH3-64 of the whole file. A full hash, not a sample: a 600 MiB model
// hashes in well under a second from the page cache (the peer maps it right after anyway), and a
// sampled digest could miss an edit that the results depend on.
Result<std::string> file_digest(const std::string& path);

// Digest of a peer build: the executable plus the shared libraries next to it (lib*.so*, as a
// llama.cpp build with shared libraries installs them), so rebuilding ggml with other flags or at
// another commit changes it even when the executable itself did not change.
Result<std::string> peer_build_digest(const std::string& executable);

struct PeerCacheKey {
  std::string model_digest;
  std::string peer_digest;
  std::vector<std::string> args;  // the peer's arguments without the model path and output format
  std::string hex() const;        // file name stem: XXH3-64 over the three parts
};

// Default cache folder: $XDG_CACHE_HOME/horizon/peer, else $HOME/.cache/horizon/peer.
std::string default_peer_cache_dir();

class PeerCache {
 public:
  explicit PeerCache(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  std::string path_for(const PeerCacheKey& k) const;
  // The stored entry, or nullopt when there is none (or it is unreadable / for another key).
  std::optional<nlohmann::json> load(const PeerCacheKey& k) const;
  // Stores `entry` (the key's parts are added); creates the folder. Written to a temporary file
  // and renamed, so an interrupted run never leaves a truncated entry behind.
  Status store(const PeerCacheKey& k, nlohmann::json entry) const;

 private:
  std::string dir_;
};

}  // namespace hz::bench
