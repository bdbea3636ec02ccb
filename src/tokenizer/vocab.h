// Vocabulary loaded from GGUF tokenizer.ggml.* metadata: token texts, scores and types, special
// ids, BOS/EOS flags and (byte-level BPE) merge ranks. Immutable after loading; shared read-only
// by the encoders, so safe to use from several threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"

namespace hz {

// GGUF token types (tokenizer.ggml.token_type), as llama.cpp's converters write them.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class VocabKind {
  kSpm,  // tokenizer.ggml.model = llama: SentencePiece-style merges by score, byte fallback
  kBpe,  // tokenizer.ggml.model = gpt2: byte-level BPE by merge rank
};

// Transparent hashing so that maps keyed by std::string can be probed with string_views.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class Vocab {
 public:
  static Result<Vocab> from_gguf(const GgufFile& f);

  VocabKind kind() const { return kind_; }
  const std::string& model_name() const { return model_name_; }  // tokenizer.ggml.model
  const std::string& pre() const { return pre_; }                // tokenizer.ggml.pre ("" if absent)
  int32_t size() const { return static_cast<int32_t>(texts_.size()); }
  bool valid_id(int32_t id) const { return id >= 0 && id < size(); }

  const std::string& text(int32_t id) const { return texts_[id]; }
  float score(int32_t id) const { return scores_[id]; }
  TokenType type(int32_t id) const { return types_[id]; }
  // Token id of an exact text, or -1. When texts repeat, the last id wins (as in llama.cpp).
  int32_t find(std::string_view text) const;
  // BPE: rank of merging `left` and `right` (lower merges first), or -1.
  int32_t merge_rank(std::string_view left, std::string_view right) const;

  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t unk_id() const { return unk_id_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
  bool is_eog(int32_t id) const;
  // Bytes of the longest token text (at least 4). No token covers more input bytes than its text
  // has (normalization only lengthens text), so a text of B bytes needs >= B / this many tokens.
  size_t max_token_bytes() const { return max_token_bytes_; }

 private:
  Vocab() = default;
  Status load_special_ids(const GgufFile& f);

  VocabKind kind_ = VocabKind::kSpm;
  std::string model_name_;
  std::string pre_;
  std::vector<std::string> texts_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> text_to_id_;
  // Key: left + ' ' + right, exactly the GGUF merge string. Byte-level BPE symbols never contain a
  // raw space (it is encoded as U+0120), so the key is unambiguous.
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> merge_ranks_;

  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  int32_t unk_id_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_space_prefix_ = false;
  std::vector<int32_t> eog_ids_;  // sorted
  size_t max_token_bytes_ = 4;
};

}  // namespace hz
