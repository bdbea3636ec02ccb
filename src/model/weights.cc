#include "model/weights.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/huge_pages.h"
#include "base/log.h"
#include "base/progress.h"
#include "kernels/kernels.h"

namespace hz {
namespace {

std::string shape_str(const std::vector<uint64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

Status check_shape(const TensorSource& f, const GgufTensorInfo& t, const std::vector<uint64_t>& want) {
  if (t.dims != want)
    return data_loss("{}: tensor '{}' has shape {}, expected {} from the model's hyper-parameters", f.path(), t.name,
                     t.shape_string(), shape_str(want));
  return Status();
}

Status check_matmul_type(const TensorSource& f, const GgufTensorInfo& t) {
  const DTypeTraits& tr = traits(t.dtype);
  if (!tr.supported)
    return unimplemented("{}: tensor '{}' has type {}, which this build cannot compute with (supported: f32, f16, bf16, q8_0, q4_0, q4_K, q5_K, q6_K)",
                         f.path(), t.name, tr.name);
  return Status();
}

Result<Matrix> bind_matrix(const TensorSource& f, const std::string& name, int64_t rows, int64_t cols, bool required) {
  const GgufTensorInfo* t = f.get_tensor(name);
  if (t == nullptr) {
    if (required) return not_found("{}: required tensor '{}' is missing", f.path(), name);
    return Matrix{};
  }
  HZ_RETURN_IF_ERROR(check_shape(f, *t, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows)}));
  HZ_RETURN_IF_ERROR(check_matmul_type(f, *t));
  Matrix m;
  m.name = name;
  m.dtype = t->dtype;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = row_bytes(t->dtype, cols);
  m.data = t->data;
  return m;
}

Result<ExpertMatrix> bind_experts(const TensorSource& f, const std::string& name, int64_t rows, int64_t cols, int32_t n) {
  HZ_ASSIGN_OR_RETURN(const GgufTensorInfo* t, f.require_tensor(name));
  HZ_RETURN_IF_ERROR(check_shape(f, *t, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows), static_cast<uint64_t>(n)}));
  HZ_RETURN_IF_ERROR(check_matmul_type(f, *t));
  ExpertMatrix e;
  e.m.name = name;
  e.m.dtype = t->dtype;
  e.m.rows = rows;
  e.m.cols = cols;
  e.m.row_bytes = row_bytes(t->dtype, cols);
  e.m.data = t->data;
  e.num_experts = n;
  e.expert_bytes = e.m.row_bytes * rows;
  return e;
}

// Small vectors (norms, biases) are converted to f32 copies.
Result<std::vector<float>> bind_vector(const TensorSource& f, const std::string& name, int64_t n, bool required) {
  const GgufTensorInfo* t = f.get_tensor(name);
  if (t == nullptr) {
    if (required) return not_found("{}: required tensor '{}' is missing", f.path(), name);
    return std::vector<float>{};
  }
  if (t->num_elements() != static_cast<uint64_t>(n) || t->dims[0] != static_cast<uint64_t>(n))
    return data_loss("{}: tensor '{}' has shape {}, expected [{}]", f.path(), name, t->shape_string(), n);
  if (t->dtype != DType::kF32 && t->dtype != DType::kF16 && t->dtype != DType::kBF16)
    return unimplemented("{}: tensor '{}' has type {}, expected f32, f16 or bf16", f.path(), name, dtype_name(t->dtype));
  std::vector<float> v(n);
  kernels::dequantize_row(t->dtype, t->data, v.data(), n);
  return v;
}

// Drops the whole pages inside [p, p + n) of a read-only file mapping from this process.
void release_file_pages(const uint8_t* p, uint64_t n) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t begin = (reinterpret_cast<uint64_t>(p) + page - 1) / page * page;
  const uint64_t end = (reinterpret_cast<uint64_t>(p) + n) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// Anonymous memory for packed weights. Transparent huge pages where the system allows them (THP
// "madvise" mode), unless HORIZON_HUGEPAGES=0: decode streams every weight once per token, and
// with 4 KiB pages that is a TLB miss per 4 KiB. Measured on a 2-core Intel Xeon (llama-1b Q4_0,
// 2 threads, tg64 alternating): 37.6 -> 42.0 tok/s, loading no slower. The start is 2 MiB-aligned
// so that whole huge pages cover it. On an AMD EPYC earlier, the synchronous compaction of THP
// faults (defrag "madvise") made loading 4x slower (622 MiB: 5.9 s against 1.5 s); the switch
// turns that off, and where the kernel offers none (base/huge_pages.h) nothing is copied. Without
// huge pages the mapping is populated up front (one bulk fault).
constexpr uint64_t kHugePageBytes = 2u << 20;

void* map_packed(size_t size) {
  if (!huge_pages_for_weights()) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  constexpr uintptr_t kHuge = kHugePageBytes;
  void* raw = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (lo + kHuge - 1) / kHuge * kHuge;
  if (start > lo) munmap(raw, start - lo);
  const uintptr_t end = lo + size + kHuge, used_end = start + size;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t tail = (used_end + page - 1) / page * page;
  if (end > tail) munmap(reinterpret_cast<void*>(tail), end - tail);
  madvise(reinterpret_cast<void*>(start), size, MADV_HUGEPAGE);  // advice only: failure is harmless
  return reinterpret_cast<void*>(start);
}

}  // namespace

struct ModelWeights::PackedBuffer {
  void* data = nullptr;
  size_t size = 0;
  ~PackedBuffer() {
    if (data != nullptr) munmap(data, size);
  }
};

uint64_t ModelWeights::pack(bool release_source) {
  const char* env = std::getenv("HORIZON_PACK");
  if (env != nullptr && std::strcmp(env, "0") == 0) return 0;
  uint64_t total = 0;
  // The byte moves, run on several threads once every buffer is mapped.
  struct Job {
    Matrix m;
    int64_t count;
    uint64_t stride, one;  // one: packed bytes of one matrix
    uint64_t span;         // the source bytes, from the first row to the end of the last
    uint8_t* dst;
    uint64_t dst_bytes;
    bool release;
    bool copy;  // the rows as they are (a type without a packed layout), only to sit in huge pages
  };
  std::vector<Job> jobs;
  // Packs `count` matrices of m's shape stored back to back (stacked experts): matrix i's rows at
  // m.data + i * stride, its packed groups at m.packed + i * packed_bytes(m).
  auto pack_stack = [&](Matrix& m, int64_t count, uint64_t stride, bool release) {
    if (!m.present() || m.packed != nullptr) return;
    const bool pack = kernels::packable(m.dtype) && m.cols % kQK8_0 == 0;
    // Other types are copied, unchanged, only where that puts them in huge pages and the file's
    // pages are dropped after (else the copy would double their memory).
    const uint64_t span = stride * (count - 1) + m.row_bytes * m.rows;
    if (!pack && !(release && huge_pages_for_weights() && span >= kHugePageBytes)) return;
    const uint64_t one = pack ? kernels::packed_bytes(m.dtype, m.rows, m.cols) : 0;
    auto buf = std::make_shared<PackedBuffer>();
    buf->size = pack ? one * count : span;
    void* p = map_packed(buf->size);
    if (p == nullptr) return;  // not fatal: the matrix stays in the file's layout
    buf->data = p;
    jobs.push_back({m, count, stride, one, span, static_cast<uint8_t*>(p), buf->size, release, !pack});
    if (pack) {
      m.packed = static_cast<const uint8_t*>(p);
    } else {
      m.data = static_cast<const uint8_t*>(p);
    }
    total += buf->size;
    packed_.push_back(std::move(buf));
  };
  auto pack_one = [&](Matrix& m, bool release) { pack_stack(m, 1, 0, release); };
  // A tied output head shares the embedding's rows, which token lookups keep reading.
  const bool tied = output.data == token_embd.data;
  pack_one(output, release_source && !tied);
  for (LayerWeights& L : layers) {
    for (Matrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.router, &L.shared_gate,
                      &L.shared_up, &L.shared_down}) {
      pack_one(*m, release_source);
    }
    for (ExpertMatrix* e : {&L.gate_exps, &L.up_exps, &L.down_exps}) {
      if (e->num_experts == 0) continue;
      pack_stack(e->m, e->num_experts, e->expert_bytes, release_source);
      if (e->m.packed != nullptr) e->packed_expert_bytes = kernels::packed_bytes(e->m.dtype, e->m.rows, e->m.cols);
    }
  }
  [[maybe_unused]] const auto start = std::chrono::steady_clock::now();
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> packed_bytes{0};
  if (!jobs.empty()) report_progress("packing weights", 0, total);
  auto worker = [&] {
    for (size_t j = next++; j < jobs.size(); j = next++) {
      const Job& b = jobs[j];
      if (b.copy) {
        std::memcpy(b.dst, b.m.data, b.span);
      } else {
        for (int64_t i = 0; i < b.count; ++i) {
          kernels::pack_weights(b.m.dtype, b.m.cols, b.m.data + i * b.stride, b.m.row_bytes, b.m.rows, b.dst + i * b.one);
        }
      }
      if (b.release) release_file_pages(b.m.data, b.span);
      report_progress("packing weights", packed_bytes += b.dst_bytes, total);
    }
  };
  const size_t num_threads = std::min<size_t>(jobs.size(), std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < num_threads; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  HZ_LOG_DEBUG("packed {} matrices, {} MiB, in {:.2f} s on {} threads", jobs.size(), total >> 20,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), num_threads);
  return total;
}

Result<ModelWeights> ModelWeights::bind(const TensorSource& f, const ModelConfig& c) {
  ModelWeights w;
  HZ_ASSIGN_OR_RETURN(w.token_embd, bind_matrix(f, "token_embd.weight", c.vocab, c.hidden, true));
  HZ_ASSIGN_OR_RETURN(w.output_norm, bind_vector(f, "output_norm.weight", c.hidden, true));
  HZ_ASSIGN_OR_RETURN(w.output, bind_matrix(f, "output.weight", c.vocab, c.hidden, false));
  if (!w.output.present()) w.output = w.token_embd;
  w.layers.resize(c.num_layers);
  for (int32_t l = 0; l < c.num_layers; ++l) {
    LayerWeights& L = w.layers[l];
    auto n = [l](const char* suffix) { return fmt::format("blk.{}.{}", l, suffix); };
    HZ_ASSIGN_OR_RETURN(L.attn_norm, bind_vector(f, n("attn_norm.weight"), c.hidden, true));
    HZ_ASSIGN_OR_RETURN(L.wq, bind_matrix(f, n("attn_q.weight"), c.q_dim(), c.hidden, true));
    HZ_ASSIGN_OR_RETURN(L.wk, bind_matrix(f, n("attn_k.weight"), c.kv_dim(), c.hidden, true));
    HZ_ASSIGN_OR_RETURN(L.wv, bind_matrix(f, n("attn_v.weight"), c.v_dim(), c.hidden, true));
    HZ_ASSIGN_OR_RETURN(L.wo, bind_matrix(f, n("attn_output.weight"), c.hidden, c.q_dim(), true));
    HZ_ASSIGN_OR_RETURN(L.bq, bind_vector(f, n("attn_q.bias"), c.q_dim(), false));
    HZ_ASSIGN_OR_RETURN(L.bk, bind_vector(f, n("attn_k.bias"), c.kv_dim(), false));
    HZ_ASSIGN_OR_RETURN(L.bv, bind_vector(f, n("attn_v.bias"), c.v_dim(), false));
    HZ_ASSIGN_OR_RETURN(L.q_norm, bind_vector(f, n("attn_q_norm.weight"), c.head_dim, false));
    HZ_ASSIGN_OR_RETURN(L.k_norm, bind_vector(f, n("attn_k_norm.weight"), c.head_dim, false));
    HZ_ASSIGN_OR_RETURN(L.ffn_norm, bind_vector(f, n("ffn_norm.weight"), c.hidden, true));
    if (c.num_experts == 0) {
      HZ_ASSIGN_OR_RETURN(L.w_gate, bind_matrix(f, n("ffn_gate.weight"), c.ffn, c.hidden, true));
      HZ_ASSIGN_OR_RETURN(L.w_up, bind_matrix(f, n("ffn_up.weight"), c.ffn, c.hidden, true));
      HZ_ASSIGN_OR_RETURN(L.w_down, bind_matrix(f, n("ffn_down.weight"), c.hidden, c.ffn, true));
    } else {
      HZ_ASSIGN_OR_RETURN(L.router, bind_matrix(f, n("ffn_gate_inp.weight"), c.num_experts, c.hidden, true));
      HZ_ASSIGN_OR_RETURN(L.gate_exps, bind_experts(f, n("ffn_gate_exps.weight"), c.expert_ffn, c.hidden, c.num_experts));
      HZ_ASSIGN_OR_RETURN(L.up_exps, bind_experts(f, n("ffn_up_exps.weight"), c.expert_ffn, c.hidden, c.num_experts));
      HZ_ASSIGN_OR_RETURN(L.down_exps, bind_experts(f, n("ffn_down_exps.weight"), c.hidden, c.expert_ffn, c.num_experts));
      if (c.shared_expert_ffn > 0) {
        const int64_t sf = c.shared_expert_ffn;
        HZ_ASSIGN_OR_RETURN(L.shared_gate, bind_matrix(f, n("ffn_gate_shexp.weight"), sf, c.hidden, true));
        HZ_ASSIGN_OR_RETURN(L.shared_up, bind_matrix(f, n("ffn_up_shexp.weight"), sf, c.hidden, true));
        HZ_ASSIGN_OR_RETURN(L.shared_down, bind_matrix(f, n("ffn_down_shexp.weight"), c.hidden, sf, true));
        HZ_ASSIGN_OR_RETURN(L.shared_gate_inp, bind_vector(f, n("ffn_gate_inp_shexp.weight"), c.hidden, true));
      }
    }
  }
  return w;
}

}  // namespace hz
