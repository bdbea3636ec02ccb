// `horizon inspect -m MODEL`: a GGUF file's metadata and tensor table.
#include <fmt/format.h>

#include "format/gguf.h"
#include "tools/cli.h"

namespace hz::cli {
namespace {

struct InspectOptions {
  std::string model;
  bool all_values = false;
};

int run_inspect(const InspectOptions& o) {
  auto f = GgufFile::open(o.model);
  if (!f.ok()) return fail(f.status().message());
  fmt::print("file: {}\nGGUF version: {}\nalignment: {}\ndata offset: {}\nfile size: {} bytes\n", o.model, f->version(),
             f->alignment(), f->data_offset(), f->file_size());
  fmt::print("\nmetadata ({} keys):\n", f->metadata().size());
  for (const auto& [key, value] : f->metadata()) {
    fmt::print("  {:<44} {}\n", key, value.to_display_string(o.all_values ? SIZE_MAX : 8));
  }
  uint64_t total_bytes = 0, total_elems = 0;
  fmt::print("\ntensors ({}):\n  {:<4} {:<36} {:<7} {:<22} {:>12} {:>12}\n", f->tensors().size(), "#", "name", "type",
             "shape", "offset", "bytes");
  size_t idx = 0;
  for (const auto& t : f->tensors()) {
    fmt::print("  {:<4} {:<36} {:<7} {:<22} {:>12} {:>12}\n", idx++, t.name, dtype_name(t.dtype), t.shape_string(),
               t.offset, t.num_bytes);
    total_bytes += t.num_bytes;
    total_elems += t.num_elements();
  }
  fmt::print("\ntotal: {} parameters, {} bytes of tensor data ({:.2f} MiB)\n", total_elems, total_bytes,
             total_bytes / 1048576.0);
  return 0;
}

Subcommand kInspect("inspect", "Print a model's metadata and tensor table", [](CLI::App& app) {
  auto o = std::make_shared<InspectOptions>();
  app.add_option("-m,--model,model_path", o->model, "GGUF file")->required();
  app.add_flag("--all", o->all_values, "Print whole arrays instead of the first items");
  return [o] { return run_inspect(*o); };
});

}  // namespace
}  // namespace hz::cli
