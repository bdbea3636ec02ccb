// HORIZON_ISA=scalar forces the reference kernels. The variable is read once, on the first kernel
// call, so this executable sets it during static initialization, before any test runs.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/kernels.h"

namespace hz::kernels {
namespace {

const bool kEnvSet = [] { return setenv("HORIZON_ISA", "scalar", 1) == 0; }();

TEST(DispatchEnvTest, HorizonIsaScalarForcesReference) {
  ASSERT_TRUE(kEnvSet);
  EXPECT_EQ(active_isa(), Isa::kScalar);
  EXPECT_STREQ(isa_name(active_isa()), "scalar");
  EXPECT_NE(cpu_features(), nullptr);
  if (isa_supported(Isa::kAvx2)) {
    force_isa(Isa::kAvx2);  // an explicit force still wins over the environment
    EXPECT_EQ(active_isa(), Isa::kAvx2);
    force_isa(Isa::kScalar);
  }
}

}  // namespace
}  // namespace hz::kernels
