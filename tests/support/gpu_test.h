// Helpers for tests/cuda: skip when no GPU answers, device arrays filled from and read back to
// host vectors, poisoned before use so an unwritten output shows.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "device/device.h"

namespace hz::test {

// Skips the test (with the reason) unless a GPU this build has kernels for answers.
#define HZ_REQUIRE_GPU()                                                        \
  do {                                                                          \
    ::hz::Status hz_gpu_ = ::hz::device::require_gpu("GPU test");               \
    if (!hz_gpu_.ok()) GTEST_SKIP() << hz_gpu_.message();                       \
  } while (0)

// A device copy of a host vector (or `n` poisoned elements) that reads back into a vector.
template <typename T>
class DeviceArray {
 public:
  DeviceArray(const device::Stream& s, const std::vector<T>& host) : s_(&s), n_(host.size()) {
    auto b = device::Buffer::allocate(std::max<uint64_t>(bytes(), 1), "test array");
    EXPECT_TRUE(b.ok()) << b.status().message();
    if (b.ok()) buf_ = std::move(*b);
    Status st = device::copy_to_device(buf_.data(), host.data(), bytes(), s);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  // `n` elements, every byte 0xff (NaN for floats, -1 for integers).
  DeviceArray(const device::Stream& s, size_t n) : s_(&s), n_(n) {
    auto b = device::Buffer::allocate(std::max<uint64_t>(bytes(), 1), "test array");
    EXPECT_TRUE(b.ok()) << b.status().message();
    if (b.ok()) buf_ = std::move(*b);
    Status st = device::fill_bytes(buf_.data(), 0xff, bytes(), s);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  T* data() const { return buf_.as<T>(); }
  uint64_t bytes() const { return n_ * sizeof(T); }
  std::vector<T> read() const {
    std::vector<T> out(n_);
    Status st = device::copy_to_host(out.data(), buf_.data(), bytes(), *s_);
    EXPECT_TRUE(st.ok()) << st.message();
    st = s_->synchronize();
    EXPECT_TRUE(st.ok()) << st.message();
    return out;
  }

 private:
  const device::Stream* s_;
  size_t n_;
  device::Buffer buf_;
};

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace hz::test
