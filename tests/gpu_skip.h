// GPU tests (label "gpu"): skip with the CUDA runtime's reason when no device is present.
#pragma once

#include <gtest/gtest.h>

#include "kernels/device.h"

#define SKIP_WITHOUT_GPU()                                                        \
  do {                                                                            \
    const ::moeperf::kernels::DeviceInfo d_ = ::moeperf::kernels::query_devices(); \
    if (d_.count == 0) GTEST_SKIP() << d_.reason;                                 \
  } while (0)
