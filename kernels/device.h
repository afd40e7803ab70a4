// What GPUs this process can see, without exposing CUDA types: used by GPU tests to skip with a
// reason and by the executor to describe the machine.
//
//   DeviceInfo d = query_devices();
//   if (d.count == 0) GTEST_SKIP() << d.reason;
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moeperf::kernels {

struct Device {
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sms = 0;
  int64_t memory_bytes = 0;
};

struct DeviceInfo {
  int count = 0;
  std::string reason;  // why count is 0 (no driver, no device, ...)
  int driver_version = 0, runtime_version = 0;
  std::vector<Device> devices;
};

DeviceInfo query_devices();

// Fills n int32 values with `value` on device 0 and copies them back (a round trip that proves
// a kernel built for this GPU's architecture runs). Throws CudaError on failure (CudaOutOfMemory for an allocation).
std::vector<int32_t> fill_roundtrip(int64_t n, int32_t value);

}  // namespace moeperf::kernels
