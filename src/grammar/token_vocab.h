// TokenVocab: the model's tokens as the grammar sees them: the bytes each adds to the output (byte
// fallback tokens are their byte, SentencePiece's U+2581 is a space, byte-level BPE is decoded), in
// a byte trie walked once per mask. Special tokens (control, unknown, unused) have no bytes and are
// never allowed by a grammar; end-of-generation tokens are allowed where the grammar can end.
// Immutable after construction: safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hz {
class Tokenizer;
}

namespace hz::grammar {

class TokenVocab {
 public:
  // pieces[id]: the token's output bytes, "" for tokens a grammar never allows.
  TokenVocab(std::vector<std::string> pieces, std::vector<int32_t> eog_ids);
  static std::shared_ptr<const TokenVocab> from_tokenizer(const Tokenizer& tok);

  int32_t size() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(int32_t id) const { return pieces_[id]; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

  // The trie, nodes in pre-order (node 0 is the root, the empty prefix). The tokens under a node
  // are sorted_tokens()[tok_begin[i], tok_begin[end[i]]); those whose piece ends at the node come
  // first, `num_here[i]` of them. depth[i] = the node's prefix length.
  struct Trie {
    std::vector<uint8_t> byte;       // [nodes] the byte that leads to the node
    std::vector<uint16_t> depth;     // [nodes]
    std::vector<uint32_t> end;       // [nodes] one past the node's subtree
    std::vector<uint32_t> tok_begin; // [nodes + 1]
    std::vector<uint32_t> num_here;  // [nodes]
    std::vector<int32_t> tokens;     // token ids sorted by piece
    size_t max_depth = 0;
  };
  const Trie& trie() const { return trie_; }

 private:
  std::vector<std::string> pieces_;
  std::vector<int32_t> eog_ids_;
  Trie trie_;
};

}  // namespace hz::grammar
