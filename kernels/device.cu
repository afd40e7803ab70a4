#include "kernels/cuda_check.h"
#include "kernels/device.h"

namespace moeperf::kernels {
namespace {

__global__ void fill_kernel(int32_t* out, int64_t n, int32_t value) {
  // 64-bit index: grid-stride over n elements.
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = value;
}

}  // namespace

DeviceInfo query_devices() {
  DeviceInfo info;
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    info.reason = std::string("no usable CUDA device: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    cudaGetLastError();  // clear the sticky error
    return info;
  }
  if (count == 0) {
    info.reason = "no CUDA device present";
    return info;
  }
  info.count = count;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    MOEPERF_CUDA_CHECK(cudaGetDeviceProperties(&p, d));
    info.devices.push_back({p.name, p.major, p.minor, p.multiProcessorCount, static_cast<int64_t>(p.totalGlobalMem)});
  }
  return info;
}

std::vector<int32_t> fill_roundtrip(int64_t n, int32_t value) {
  std::vector<int32_t> host(static_cast<size_t>(n), 0);
  int32_t* dev = nullptr;
  MOEPERF_CUDA_CHECK(cudaMalloc(&dev, sizeof(int32_t) * static_cast<size_t>(n)));
  try {
    fill_kernel<<<256, 256>>>(dev, n, value);
    MOEPERF_CUDA_CHECK(cudaGetLastError());
    MOEPERF_CUDA_CHECK(cudaMemcpy(host.data(), dev, sizeof(int32_t) * static_cast<size_t>(n), cudaMemcpyDeviceToHost));
  } catch (...) {
    cudaFree(dev);
    throw;
  }
  MOEPERF_CUDA_CHECK(cudaFree(dev));
  return host;
}

}  // namespace moeperf::kernels
