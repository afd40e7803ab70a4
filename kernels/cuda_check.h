// Error checks for CUDA runtime calls: every call is checked, failures throw with file:line and
// the runtime's own error string (style of DeepEP's CUDA_RUNTIME_CHECK). Include from .cu files.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace moeperf::kernels {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void cuda_check(cudaError_t e, const char* expr, const char* file, int line) {
  if (e != cudaSuccess)
    throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + expr + ": " + cudaGetErrorName(e) + ": " +
                    cudaGetErrorString(e));
}

}  // namespace moeperf::kernels

#define MOEPERF_CUDA_CHECK(expr) ::moeperf::kernels::cuda_check((expr), #expr, __FILE__, __LINE__)
