// `horizon inspect -m MODEL`: a GGUF file's metadata and tensor table, or what the engine reads
// from a Hugging Face folder (the metadata it derives, its tensors under engine names, the
// pre-quantized matrices it dequantizes and the tensors it skips).
#include <fmt/format.h>

#include "format/gguf.h"
#include "model/hf_folder.h"
#include "tools/cli.h"

namespace hz::cli {
namespace {

struct InspectOptions {
  std::string model;
  bool all_values = false;
};

void print_metadata(const GgufFile& f, bool all_values) {
  fmt::print("\nmetadata ({} keys):\n", f.metadata().size());
  for (const auto& [key, value] : f.metadata()) {
    fmt::print("  {:<44} {}\n", key, value.to_display_string(all_values ? SIZE_MAX : 8));
  }
}

int inspect_folder(const InspectOptions& o) {
  auto hf = HfFolder::open(o.model);
  if (!hf.ok()) return fail(hf.status().message());
  fmt::print("folder: {} (Hugging Face, {} shard{})\n", o.model, hf->tensors->shard_paths().size(),
             hf->tensors->shard_paths().size() == 1 ? "" : "s");
  const HfTensorSource::Dequantized& d = hf->tensors->dequantized();
  if (d.num_tensors > 0) {
    fmt::print("pre-quantized: {} matrices ({}), dequantized at load and stored as {} ({:.2f} MiB)\n", d.num_tensors, d.from,
               d.type_names(), d.bytes / 1048576.0);
  }
  print_metadata(hf->metadata, o.all_values);
  auto list = hf->tensors->tensor_list();
  uint64_t total_bytes = 0, total_elems = 0;
  fmt::print("\ntensors as the engine reads them ({}):\n  {:<4} {:<28} {:<7} {:<18} {:>12}  {}\n", list.size(), "#", "name",
             "type", "shape", "bytes", "from");
  size_t idx = 0;
  for (const TensorInfo* t : list) {
    fmt::print("  {:<4} {:<28} {:<7} {:<18} {:>12}  {}\n", idx++, t->name, dtype_name(t->dtype), t->shape_string(),
               t->num_bytes, hf->tensors->hf_name(*t));
    total_bytes += t->num_bytes;
    total_elems += t->num_elements();
  }
  if (!hf->tensors->unmapped().empty()) {
    fmt::print("\nskipped ({} tensors the engine has no use for):\n", hf->tensors->unmapped().size());
    for (const std::string& n : hf->tensors->unmapped()) fmt::print("  {}\n", n);
  }
  fmt::print("\ntotal: {} parameters, {} bytes as loaded ({:.2f} MiB)\n", total_elems, total_bytes, total_bytes / 1048576.0);
  return 0;
}

int run_inspect(const InspectOptions& o) {
  if (is_hf_folder(o.model)) return inspect_folder(o);
  auto f = GgufFile::open(o.model);
  if (!f.ok()) return fail(f.status().message());
  fmt::print("file: {}\nGGUF version: {}\nalignment: {}\ndata offset: {}\nfile size: {} bytes\n", o.model, f->version(),
             f->alignment(), f->data_offset(), f->file_size());
  print_metadata(*f, o.all_values);
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
  app.add_option("-m,--model,model_path", o->model, "GGUF file or Hugging Face folder (MODEL or -m MODEL)");
  app.add_flag("--all", o->all_values, "Print whole arrays instead of the first items");
  return [o] {
    if (o->model.empty()) return fail("no model: give MODEL or -m MODEL (a GGUF file or Hugging Face folder)");
    return run_inspect(*o);
  };
});

}  // namespace
}  // namespace hz::cli
