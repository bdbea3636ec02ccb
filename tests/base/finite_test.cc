#include "base/finite.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace hz {
namespace {

TEST(FiniteTest, FindsANanOrInfinityAnywhere) {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::signaling_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1e30f, 1e30f);
  for (int64_t n : {1, 2, 7, 8, 15, 16, 17, 63, 64, 65, 513}) {
    std::vector<float> x(n);
    for (auto& v : x) v = d(rng);
    EXPECT_TRUE(all_finite(x.data(), n)) << n;
    for (float s : specials) {
      for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
        std::vector<float> y = x;
        y[at] = s;
        EXPECT_FALSE(all_finite(y.data(), n)) << n << " " << at;
      }
    }
  }
}

TEST(FiniteTest, ExtremeFiniteValuesAreFinite) {
  const std::vector<float> x = {std::numeric_limits<float>::max(),     -std::numeric_limits<float>::max(),
                                std::numeric_limits<float>::min(),     std::numeric_limits<float>::denorm_min(),
                                -std::numeric_limits<float>::denorm_min(), 0.0f, -0.0f, 1.0f};
  EXPECT_TRUE(all_finite(x.data(), static_cast<int64_t>(x.size())));
  EXPECT_TRUE(all_finite(nullptr, 0));
}

}  // namespace
}  // namespace hz
