// The host form of the KV rotation kernel (what the host emulation of the CUDA backend runs)
// against the scalar reference, bit for bit (tests/support/hadamard_checks.h).
#include <gtest/gtest.h>

#include "support/hadamard_checks.h"

namespace hz {
namespace {

TEST(HostHadamardHeadsTest, MatchesTheReferenceBitForBit) {
  auto be = cuda::make_host_backend();
  test::check_hadamard_heads(*be);
}

}  // namespace
}  // namespace hz
