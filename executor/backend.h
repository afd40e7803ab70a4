// The executor's backend: the compute ops of one MoE layer on one device, over raw pointers to
// buffers in the backend's memory: host memory for the CPU backend (alloc/upload/download are
// malloc/memcpy and run.cpp passes its host vectors directly), device memory for CUDA (run.cpp
// mirrors its host vectors there and copies explicitly where host code reads or writes them).
// One op sequence (executor/run.cpp, op names shared with the model) drives every backend.
//
//   auto be = make_backend("cpu");
//   be->gemm(x, w, y, m, n, k, false, false, false);   // y = x w
//   be->synchronize();                                  // timers measure completed work
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/reference/moe_ref.h"

namespace moeperf::exec {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual void synchronize() = 0;
  // Memory: true when the ops work on host memory (then a host pointer is a backend pointer).
  virtual bool host_memory() const = 0;
  virtual void* alloc(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;    // host -> backend, done on return
  virtual void download(void* dst, const void* src, size_t bytes) = 0;  // backend -> host, done on return
  // out[i, :] = in[idx[i], :] for i < rows (idx in backend memory).
  virtual void gather_rows(const float* in, const int64_t* idx, int64_t rows, int64_t hidden, float* out) = 0;
  virtual void fill(float* p, int64_t n, float value) = 0;
  // A plain copy of `bytes` within the backend's memory (the device's copy engine or memcpy).
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // This backend's ceilings, measured: FP32 GEMM FLOP/s and copy bytes (read + write) per second.
  virtual double measure_gemm_peak() = 0;
  virtual double measure_copy_bandwidth() = 0;
  // What measure_gemm_peak measures, in words (e.g. "4096^3 FP32 cuBLAS SGEMM on NVIDIA H200").
  virtual std::string gemm_peak_method() const = 0;
  // Seconds the work `f` queues takes on this backend, that work alone: what came before it has
  // finished. This default is the host's clock from a synchronize through the one after `f`, the
  // device clock of a backend that computes on the host. A device backend times between events on
  // its stream, so the host's launch and synchronize latencies stay out (backend_cuda.cpp).
  virtual double time_work(const std::function<void()>& f) {
    synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  // How time_work times, in words (written beside the measurements).
  virtual std::string timing_method() const { return "host clock from a synchronize through the one after the op"; }
  // The GEMM kernel's tile (rows x columns its inner kernel computes at once) where the library
  // says it: {0, 0} when unknown. The CPU backend's is Eigen's GEBP register block as compiled.
  virtual std::pair<int, int> gemm_tile() const { return {0, 0}; }
  // The device the ops run on as a JSON object (name, compute capability, SMs, memory, driver and
  // runtime versions, clocks), or "" for the host.
  virtual std::string device_json() const { return ""; }
  // C[m x n] (+)= op(A) op(B); A is [m x k] ([k x m] if trans_a), B is [k x n] ([n x k] if trans_b).
  virtual void gemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
                    bool accumulate) = 0;
  // Ragged groups: group x owns rows [off[x], off[x+1]) of A/C and weight x of w (K x N each). The
  // defaults loop over the groups with gemm() (no launch for an empty group); a backend with a real
  // grouped kernel overrides them.
  virtual void grouped_gemm(const float* a, const float* w, const std::vector<int64_t>& off, int64_t k, int64_t n,
                            float* c) {
    for (size_t x = 0; x + 1 < off.size(); ++x)
      if (const int64_t m = off[x + 1] - off[x]; m > 0)
        gemm(a + off[x] * k, w + static_cast<int64_t>(x) * k * n, c + off[x] * n, m, n, k, false, false, false);
  }
  virtual void grouped_dgrad(const float* dc, const float* w, const std::vector<int64_t>& off, int64_t k, int64_t n,
                             float* da) {
    for (size_t x = 0; x + 1 < off.size(); ++x)
      if (const int64_t m = off[x + 1] - off[x]; m > 0)
        gemm(dc + off[x] * n, w + static_cast<int64_t>(x) * k * n, da + off[x] * k, m, k, n, false, true, false);
  }
  // Groups with no rows get exact zeros.
  virtual void grouped_wgrad(const float* a, const float* dc, const std::vector<int64_t>& off, int64_t k, int64_t n,
                             float* dw) {
    for (size_t x = 0; x + 1 < off.size(); ++x) {
      const int64_t m = off[x + 1] - off[x];
      float* out = dw + static_cast<int64_t>(x) * k * n;
      if (m == 0) fill(out, k * n, 0.0f);
      else gemm(a + off[x] * k, dc + off[x] * n, out, k, n, m, true, false, false);
    }
  }
  virtual void swiglu_fwd(const float* gate_up, int64_t rows, int64_t inter, float* out) = 0;
  virtual void swiglu_bwd(const float* gate_up, const float* dout, int64_t rows, int64_t inter, float* dgate_up) = 0;
  virtual void router_topk(const float* logits, const float* bias, const ref::RouterParams& p, int32_t* idx, float* w) = 0;
  // dlogits [tokens x experts] from the routing-weight gradients dw [tokens x k] of the selected experts
  // (through the score function; the top-k renormalization is treated as constant).
  virtual void router_bwd(const float* logits, const int32_t* idx, const float* dw, const ref::RouterParams& p,
                          float* dlogits) = 0;
  virtual void expert_counts(const int32_t* idx, int64_t tokens, int top_k, int64_t experts, int64_t* counts,
                             int64_t* offsets) = 0;
  virtual void permute_map(const int32_t* idx, int64_t tokens, int top_k, int64_t experts, const int64_t* offsets,
                           int64_t* row_of_slot, int64_t* slot_of_row) = 0;
  virtual void permute(const float* x, int64_t tokens, int64_t hidden, int top_k, const int64_t* slot_of_row, float* out) = 0;
  virtual void unpermute(const float* rows, int64_t tokens, int64_t hidden, int top_k, const int64_t* row_of_slot,
                         const float* w, float* out) = 0;
  virtual void unpermute_bwd(const float* rows, const float* dout, int64_t tokens, int64_t hidden, int top_k,
                             const int64_t* row_of_slot, const float* w, float* drows, float* dw) = 0;
  virtual void permute_bwd(const float* drows, int64_t tokens, int64_t hidden, int top_k, const int64_t* row_of_slot,
                           float* dx) = 0;
};

// "cpu": Eigen GEMMs (single-threaded: MPI ranks fill the cores) and the reference kernels.
// "cuda" (built when CUDA is found): the GPU of `local_rank` (the rank's index on its node) modulo
// the node's GPUs, our CUDA kernels, cuBLAS FP32 GEMMs; throws with the runtime's reason when no
// GPU is usable, or says it was not built.
std::unique_ptr<Backend> make_backend(const std::string& name, int local_rank = 0);
bool built_with_cuda_backend();

}  // namespace moeperf::exec
