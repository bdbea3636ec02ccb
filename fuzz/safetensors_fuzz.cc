// libFuzzer target for the safetensors reader: any byte string must parse to a file or an error,
// never crash, leak or read out of bounds; accepted files are walked through every accessor.
#include <cstddef>
#include <cstdint>
#include <string>

#include "format/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = hz::SafetensorsFile::parse(data, size, "fuzz");
  if (!f.ok()) {
    if (f.status().message().empty()) __builtin_trap();  // every refusal carries a message
    return 0;
  }
  size_t sink = f->metadata().size();
  for (const auto& t : f->tensors()) {
    if (f->find(t.name) != &t) __builtin_trap();
    // Touch the first and last byte so ASan checks the bounds the reader validated.
    if (t.num_bytes() > 0) sink += t.data[0] + t.data[t.num_bytes() - 1];
    auto view = f->engine_view(t, "x");
    if (view.ok()) {
      if (view->num_bytes != t.num_bytes()) __builtin_trap();
      sink += view->num_elements() + view->shape_string().size();
    }
  }
  volatile size_t keep = sink;
  (void)keep;
  return 0;
}
