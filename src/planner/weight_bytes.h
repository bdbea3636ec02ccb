// Parameter counts and weight bytes of a ModelShape: the tensor list a model of that shape has
// (model/model_shape.h), sized per weight type including the block-scale overhead of quantized types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_shape.h"  // ModelShape, WeightClass, enumerate_weights
#include "tensor/dtype.h"

namespace hz {

struct ParamCounts {
  uint64_t total = 0;
  uint64_t active = 0;  // per token: routed experts counted as used/num_experts of them
};
// From the GGUF tensor table when the shape came from one, else from enumerate_weights().
ParamCounts count_params(const ModelShape& s);

// Bits per weight of a type, block scales included: f32 32, f16/bf16 16, q8_0 8.5, q4_0 4.5,
// q4_K 4.5, q5_K 5.5, q6_K 6.5625.
double bits_per_weight(DType t);
// The type a row of `row_len` elements is stored in when `t` is asked for: `t` when the row is a
// whole number of blocks, else q8_0 (k-quants, rows of 32s) or f16.
DType effective_weight_type(DType t, uint64_t row_len);
// Weight types the planner sizes, from the widest to the most compact.
const std::vector<DType>& plannable_weight_types();
// Bytes of all weights with every quantizable matrix at `t` and the rest f32.
uint64_t weights_bytes(const ModelShape& s, DType t);
// The same with the token embedding and the output head at `head` (a pre-quantized checkpoint
// loaded as `t`: its embedding and head usually ship unquantized).
uint64_t weights_bytes(const ModelShape& s, DType t, DType head);

}  // namespace hz
