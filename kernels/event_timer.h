// Device time between two CUDA events around the work a callable queues on a stream: the timer of
// the executor's CUDA backend (Backend::time_work) and of the kernel benchmarks. The events bracket
// the device's work, not the host's launch calls or the closing synchronize; queue a flush (a large
// memset) before it and the first launch's latency is hidden too.
//
//   moeperf::kernels::EventTimer t;
//   double s = t.seconds(stream, [&] { launch(stream); });
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda_check.h"

namespace moeperf::kernels {

class EventTimer {
 public:
  EventTimer() {
    MOEPERF_CUDA_CHECK(cudaEventCreate(&a_));
    if (const cudaError_t e = cudaEventCreate(&b_); e != cudaSuccess) {
      cudaEventDestroy(a_);  // no destructor runs for a constructor that throws
      MOEPERF_CUDA_CHECK(e);
    }
  }
  ~EventTimer() {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // Seconds from the work `f` queues on `s` starting to its end; waits for it.
  template <class F>
  double seconds(cudaStream_t s, F&& f) {
    MOEPERF_CUDA_CHECK(cudaEventRecord(a_, s));
    f();
    MOEPERF_CUDA_CHECK(cudaEventRecord(b_, s));
    MOEPERF_CUDA_CHECK(cudaEventSynchronize(b_));
    float ms = 0;
    MOEPERF_CUDA_CHECK(cudaEventElapsedTime(&ms, a_, b_));
    return static_cast<double>(ms) * 1e-3;
  }

 private:
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

}  // namespace moeperf::kernels
