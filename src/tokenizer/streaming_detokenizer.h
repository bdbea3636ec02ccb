// Incremental detokenization for streamed generation: emits only complete UTF-8 characters.
#pragma once

#include <cstdint>
#include <string>

namespace hz {

class Tokenizer;

// Turns a stream of generated ids into text without ever emitting part of a UTF-8 character:
// bytes of an unfinished character are held back until it completes. Bytes that can never form a
// character are replaced by U+FFFD as soon as that is certain. One instance per stream.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tok) : tok_(tok) {}
  std::string push(int32_t id);
  // Whatever is held back, invalid bytes replaced by U+FFFD; the detokenizer is then empty.
  std::string flush();

 private:
  std::string drain(bool final);
  const Tokenizer& tok_;
  std::string pending_;
};

}  // namespace hz
