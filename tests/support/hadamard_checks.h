// The KV rotation of query/key/value heads (cuda::Backend::hadamard_heads) on any backend of
// kernels/cuda/backend.h, against the scalar reference (kernels::ref::hadamard_rows) row by row,
// bit for bit: forward and inverse, head dims that are powers of two and that are not, GQA groups,
// an infinity and a NaN passing through as in the reference. Used by tests/cuda (the GPU kernel)
// and tests/kernels (its host form).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cuda/backend.h"
#include "kernels/ref/ref_kernels.h"
#include "kv/kv_rotation.h"

namespace hz::test {

inline void check_hadamard_heads(cuda::Backend& be) {
  constexpr int64_t kTokens = 3;
  constexpr int32_t kKvHeads = 2;
  for (int32_t hd : {8, 20, 64, 96, 128, 256}) {
    for (int32_t group : {1, 4}) {
      for (int32_t inverse : {0, 1}) {
        SCOPED_TRACE(testing::Message() << "head dim " << hd << " group " << group << " inverse " << inverse);
        const int32_t heads = kKvHeads * group;
        const KvRotation rot(1, kKvHeads, hd);
        std::vector<float> signs;
        for (int32_t h = 0; h < kKvHeads; ++h) signs.insert(signs.end(), rot.signs(0, 1, h), rot.signs(0, 1, h) + hd);
        std::mt19937 rng(hd * 10 + group + inverse);
        std::normal_distribution<float> nd(0.0f, 2.0f);
        std::vector<float> x(kTokens * heads * hd);
        for (auto& v : x) v = nd(rng);
        x[3] = std::numeric_limits<float>::infinity();
        x[static_cast<size_t>(hd) + 1] = std::numeric_limits<float>::quiet_NaN();
        std::vector<float> want = x;
        for (int64_t r = 0; r < kTokens * heads; ++r) {
          kernels::ref::hadamard_rows(want.data() + r * hd, 1, hd, signs.data() + (r % heads / group) * hd, inverse);
        }
        auto dx = be.allocate(4 * x.size(), "x");
        auto ds = be.allocate(4 * signs.size(), "signs");
        ASSERT_TRUE(dx.ok() && ds.ok());
        ASSERT_TRUE(be.upload(dx->data(), x.data(), 4 * x.size()).ok());
        ASSERT_TRUE(be.upload(ds->data(), signs.data(), 4 * signs.size()).ok());
        const Status st = be.hadamard_heads(dx->as<float>(), kTokens, heads, hd, ds->as<float>(), group, inverse);
        ASSERT_TRUE(st.ok()) << st.message();
        std::vector<float> got(x.size());
        ASSERT_TRUE(be.download(got.data(), dx->data(), 4 * got.size()).ok());
        for (size_t i = 0; i < got.size(); ++i) {
          uint32_t a, b;
          std::memcpy(&a, &got[i], 4);
          std::memcpy(&b, &want[i], 4);
          if (std::isnan(want[i])) {
            ASSERT_TRUE(std::isnan(got[i])) << "element " << i;
          } else {
            ASSERT_EQ(a, b) << "element " << i << ": " << got[i] << " vs " << want[i];
          }
        }
      }
    }
  }
}

}  // namespace hz::test
