// RAII owner of a device allocation for tests and benchmarks of the CUDA kernels: allocates n
// elements (at least one), uploads/downloads with checked copies, frees on scope exit.
//
//   DeviceBuffer<float> d(host);              // allocate and upload
//   std::vector<float> back = d.download();   // synchronize and copy back
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cuda_check.h"

namespace moeperf::kernels {

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) { MOEPERF_CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T))); }
  explicit DeviceBuffer(const std::vector<T>& h) : DeviceBuffer(h.size()) { upload(h); }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return p_; }
  void upload(const std::vector<T>& h) {
    MOEPERF_CUDA_CHECK(cudaMemcpy(p_, h.data(), std::min(h.size(), n_) * sizeof(T), cudaMemcpyHostToDevice));
  }
  // The first `count` elements (all by default), after the device has finished its work.
  std::vector<T> download(size_t count = SIZE_MAX) const {
    std::vector<T> h(std::min(count, n_));
    MOEPERF_CUDA_CHECK(cudaDeviceSynchronize());
    MOEPERF_CUDA_CHECK(cudaMemcpy(h.data(), p_, h.size() * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

// Seeded uniform floats in [lo, hi): the test inputs of the kernels.
inline std::vector<float> random_floats(size_t n, float lo, float hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

}  // namespace moeperf::kernels
