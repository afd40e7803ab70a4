// GPU tests (label "gpu"): skip with the runtime's reason when no device is present.
#include "kernels/device.h"

#include <new>

#include "kernels/cuda_check.h"

#include <gtest/gtest.h>

namespace moeperf::kernels {
namespace {

TEST(Gpu, FillRoundTripRunsOnTheDevice) {
  const DeviceInfo d = query_devices();
  if (d.count == 0) GTEST_SKIP() << d.reason;
  const int64_t n = (int64_t{1} << 20) + 17;  // not a multiple of the block size
  const std::vector<int32_t> v = fill_roundtrip(n, 42);
  ASSERT_EQ(static_cast<int64_t>(v.size()), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[static_cast<size_t>(i)], 42) << i;
}

TEST(Gpu, QueryReportsAReasonWhenThereIsNoDevice) {
  const DeviceInfo d = query_devices();
  if (d.count == 0) {
    EXPECT_FALSE(d.reason.empty());
  } else {
    ASSERT_EQ(static_cast<int>(d.devices.size()), d.count);
    EXPECT_GE(d.devices[0].cc_major, 9);
  }
}

// A failed device allocation is a std::bad_alloc (moeperf run's --scale advice catches it) with
// the runtime's words; any other error a CudaError. Host-side only: runs without a GPU.
TEST(CudaCheck, AnOutOfMemoryIsABadAllocWithTheRuntimesWords) {
  try {
    MOEPERF_CUDA_CHECK(cudaErrorMemoryAllocation);
    FAIL() << "no throw";
  } catch (const std::bad_alloc& e) {
    EXPECT_NE(std::string(e.what()).find("cudaErrorMemoryAllocation"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("device_test.cpp"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MOEPERF_CUDA_CHECK(cudaErrorInvalidValue), CudaError);
  EXPECT_NO_THROW(MOEPERF_CUDA_CHECK(cudaSuccess));
}

}  // namespace
}  // namespace moeperf::kernels
