// Error checks for CUDA runtime calls: every call is checked, failures throw with file:line and
// the runtime's own error string (style of DeepEP's CUDA_RUNTIME_CHECK). Include from .cu files.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <new>
#include <stdexcept>
#include <string>

namespace moeperf::kernels {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A device allocation that failed: a std::bad_alloc, as the host's, so that whoever sizes the
// tensors (moeperf run's --scale advice) catches both, with the runtime's words in what().
// (Not also a CudaError: two std::exception bases would make a catch of std::exception ambiguous.)
class CudaOutOfMemory : public std::bad_alloc {
 public:
  explicit CudaOutOfMemory(const std::string& what) : what_(std::make_shared<const std::string>(what)) {}
  const char* what() const noexcept override { return what_->c_str(); }

 private:
  std::shared_ptr<const std::string> what_;  // shared: copying the exception cannot throw
};

inline void cuda_check(cudaError_t e, const char* expr, const char* file, int line) {
  if (e == cudaSuccess) return;
  std::string what = std::string(file) + ":" + std::to_string(line) + ": " + expr + ": " + cudaGetErrorName(e) + ": " +
                     cudaGetErrorString(e);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: the runtime stays usable for the abort that follows
    throw CudaOutOfMemory(what);
  }
  throw CudaError(what);
}

}  // namespace moeperf::kernels

#define MOEPERF_CUDA_CHECK(expr) ::moeperf::kernels::cuda_check((expr), #expr, __FILE__, __LINE__)
