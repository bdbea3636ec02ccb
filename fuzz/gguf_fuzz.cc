// libFuzzer target for the GGUF reader: any byte string must parse to a file or an error, never
// crash, leak or read out of bounds; accepted files are walked through every accessor.
#include <cstddef>
#include <cstdint>
#include <string>

#include "format/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = hz::GgufFile::parse(data, size, "fuzz");
  if (!f.ok()) {
    // Every refusal carries a message.
    if (f.status().message().empty()) __builtin_trap();
    return 0;
  }
  size_t sink = 0;
  for (const auto& [key, value] : f->metadata()) {
    sink += value.to_display_string(4).size();
    (void)f->get_uint_or(key, 0);
    (void)f->get_int_or(key, 0);
    (void)f->get_float_or(key, 0);
    (void)f->get_bool_or(key, false);
    (void)f->get_string_or(key, "");
    (void)f->get_string_array(key);
    if (auto a = f->get_f32_array(key); a.ok()) sink += a->size();
    if (auto a = f->get_int_array(key); a.ok()) sink += a->size();
  }
  for (const auto& t : f->tensors()) {
    sink += t.num_elements() + t.shape_string().size();
    if (f->get_tensor(t.name) != &t) __builtin_trap();
    // Touch the first and last byte so ASan checks the bounds the reader validated.
    if (t.num_bytes > 0) sink += t.data[0] + t.data[t.num_bytes - 1];
  }
  volatile size_t keep = sink;
  (void)keep;
  return 0;
}
