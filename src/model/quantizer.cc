#include "model/quantizer.h"

#include <cstring>
#include <vector>

#include "format/gguf.h"
#include "kernels/kernels.h"

namespace hz {
namespace {

// GGUF general.file_type ids (llama.cpp's LLAMA_FTYPE_*) for the types we write.
uint32_t file_type_id(DType t) {
  switch (t) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ8_0: return 7;
    case DType::kBF16: return 32;
    default: return 0;
  }
}

bool can_write(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kQ8_0 || t == DType::kQ4_0;
}

void encode_row(DType t, const float* x, uint8_t* dst, int64_t n) {
  switch (t) {
    case DType::kF32: std::memcpy(dst, x, n * sizeof(float)); break;
    case DType::kF16: kernels::f32_to_f16_row(x, reinterpret_cast<uint16_t*>(dst), n); break;
    case DType::kBF16: kernels::f32_to_bf16_row(x, reinterpret_cast<uint16_t*>(dst), n); break;
    case DType::kQ8_0: kernels::quantize_row_q8_0(x, reinterpret_cast<BlockQ8_0*>(dst), n); break;
    case DType::kQ4_0: kernels::quantize_row_q4_0(x, reinterpret_cast<BlockQ4_0*>(dst), n); break;
    default: break;
  }
}

}  // namespace

Status quantize_model(const std::string& in_path, const std::string& out_path, const QuantizeOptions& opts,
                      const std::function<void(size_t, size_t)>& progress) {
  for (DType t : {opts.type, opts.embeddings_type.value_or(opts.type), opts.output_type.value_or(opts.type), opts.fallback_type}) {
    if (!can_write(t)) return unimplemented("quantize: output type {} is not supported (use q8_0, q4_0, f16, bf16, f32)", dtype_name(t));
  }
  HZ_ASSIGN_OR_RETURN(GgufFile in, GgufFile::open(in_path));
  GgufWriter w(in.alignment());
  for (const auto& [key, value] : in.metadata()) {
    if (key != "general.alignment") w.set(key, value);
  }
  w.set_u32("general.file_type", file_type_id(opts.type));
  w.set_u32("general.quantization_version", 2);
  for (const GgufTensorInfo& t : in.tensors()) {
    if (!traits(t.dtype).supported) return unimplemented("{}: tensor '{}' has type {}, which cannot be read", in_path, t.name, dtype_name(t.dtype));
    DType target = t.dtype;
    const bool matrix = t.dims.size() >= 2 && t.name.size() > 7 && t.name.compare(t.name.size() - 7, 7, ".weight") == 0 &&
                        t.name.find("_norm") == std::string::npos;
    if (matrix) {
      target = t.name == "token_embd.weight" ? opts.embeddings_type.value_or(opts.type)
               : t.name == "output.weight"   ? opts.output_type.value_or(opts.type)
                                             : opts.type;
      if (t.dims[0] % traits(target).block_elems != 0) target = opts.fallback_type;
    }
    if (target == t.dtype) {
      w.add_tensor_data(t.name, t.dtype, t.dims, t.data);
      continue;
    }
    const GgufTensorInfo* src = &t;
    w.add_tensor(t.name, target, t.dims, [src, target](uint8_t* dst, uint64_t) {
      const int64_t n = static_cast<int64_t>(src->dims[0]);
      const int64_t rows = static_cast<int64_t>(src->num_elements() / src->dims[0]);
      const uint64_t in_rb = row_bytes(src->dtype, n), out_rb = row_bytes(target, n);
      std::vector<float> row(n);
      for (int64_t r = 0; r < rows; ++r) {
        kernels::dequantize_row(src->dtype, src->data + r * in_rb, row.data(), n);
        encode_row(target, row.data(), dst + r * out_rb, n);
      }
    });
  }
  return w.write(out_path, progress);
}

}  // namespace hz
