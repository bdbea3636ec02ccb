// The per-ISA kernel tables made from kernel_list.inc: the scalar table is the ref:: kernels, the
// AVX2 table holds avx2:: variants where the list says so (ref:: otherwise), and the entry points
// follow force_isa. Results of each variant against the reference are in the other kernel tests.
#include "kernels/kernel_table.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string_view>
#include <vector>

#include "kernels/avx2/avx2_kernels.h"

namespace hz::kernels {
namespace {

TEST(KernelTableTest, ScalarTableIsTheReference) {
  const KernelTable& t = kernel_table(Isa::kScalar);
#define HZ_KERNEL(variants, ret, name, params, args) EXPECT_EQ(t.name, &ref::name) << #name;
#include "kernels/kernel_list.inc"
#undef HZ_KERNEL
}

TEST(KernelTableTest, Avx2TableFollowsTheList) {
  const KernelTable& t = kernel_table(Isa::kAvx2);
  int num_avx2 = 0;
#define HZ_KERNEL(variants, ret, name, params, args)                    \
  EXPECT_EQ(t.name, &avx2::name) << #name;                               \
  if (std::string_view(#variants) == "avx2") {                           \
    ++num_avx2;                                                          \
    EXPECT_NE(reinterpret_cast<const void*>(t.name), reinterpret_cast<const void*>(&ref::name)) << #name; \
  } else {                                                               \
    EXPECT_EQ(t.name, &ref::name) << #name;                              \
  }
#include "kernels/kernel_list.inc"
#undef HZ_KERNEL
  EXPECT_GT(num_avx2, 20);
}

TEST(KernelTableTest, EntryPointsFollowForceIsa) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> x(1001), w(1001);
  for (float& v : x) v = dist(rng);
  for (float& v : w) v = dist(rng);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kScalar}) {
    if (!isa_supported(isa)) continue;
    force_isa(isa);
    EXPECT_EQ(active_isa(), isa);
    std::vector<float> got(x.size()), want(x.size());
    rms_norm(x.data(), w.data(), got.data(), static_cast<int64_t>(x.size()), 1e-5f);
    kernel_table(isa).rms_norm(x.data(), w.data(), want.data(), static_cast<int64_t>(x.size()), 1e-5f);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << isa_name(isa);
  }
  force_isa(isa_supported(Isa::kAvx2) ? Isa::kAvx2 : Isa::kScalar);
}

}  // namespace
}  // namespace hz::kernels
