// One input's embedding on the engine thread: a forward pass of its tokens alone (KV blocks
// borrowed for the pass and returned), the final hidden states pooled (mean or last token) and
// L2-normalised. Alone means the vector never depends on what else a request or the engine holds.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kv/kv_cache.h"
#include "kv/kv_manager.h"
#include "model/model.h"
#include "runtime/engine_api.h"

namespace hz {

// kResourceExhausted when the KV pool has no room for the input right now (running requests hold
// it); the vector otherwise ([hidden] floats, unit L2 norm unless all zero). `hidden` is scratch.
Result<std::vector<float>> compute_embedding(Model& model, KvManager& kvm, KvCache& kv, ThreadPool& pool,
                                             const std::vector<int32_t>& tokens, Pooling pooling,
                                             std::vector<float>* hidden);

// Pools rows of `hidden` ([num_rows][width]) and L2-normalises (accumulating in double).
std::vector<float> pool_and_normalize(const float* hidden, int64_t num_rows, int64_t width);

}  // namespace hz
