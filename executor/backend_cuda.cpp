// The CUDA backend: device memory, the kernels of kernels/moe_kernels.h and kernels/moe_bwd_kernels.h,
// cuBLAS SGEMM (FP32, default math mode: no TF32) for every GEMM, all on one non-blocking stream
// of the rank's GPU (its local rank modulo the node's GPUs); ops timed with CUDA events behind an L2
// flush (time_work). Built when CUDA is found; make_backend("cuda") returns it.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

#include "executor/backend.h"
#include "kernels/cuda_check.h"
#include "kernels/device.h"
#include "kernels/event_timer.h"
#include "kernels/moe_bwd_kernels.h"
#include "kernels/moe_kernels.h"

namespace moeperf::exec {
namespace {

void cublas_check(cublasStatus_t s, const char* expr) {
  if (s != CUBLAS_STATUS_SUCCESS) throw kernels::CudaError(std::string(expr) + ": " + cublasGetStatusString(s));
}
#define CUBLAS_CHECK(expr) cublas_check((expr), #expr)
#define CUDA_CHECK(expr) MOEPERF_CUDA_CHECK(expr)

std::string json_escape(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int local_rank) {
    const kernels::DeviceInfo d = kernels::query_devices();
    if (d.count == 0) throw std::runtime_error("--backend cuda: no usable GPU: " + d.reason);
    // The rank's own GPU: its index on the node modulo the node's GPUs, as the NCCL exchange picks
    // it (comm_nccl.cpp), so ranks without NCCL (the suite, a build without it) do not share GPU 0.
    dev_ = std::max(local_rank, 0) % d.count;
    CUDA_CHECK(cudaSetDevice(dev_));
    const kernels::Device& g = d.devices[static_cast<size_t>(dev_)];
    name_ = g.name;
    // The machine block of the measurements: what the runtime says about this device.
    int sm_khz = 0, mem_khz = 0, bus_bits = 0, l2 = 0;
    cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, dev_);  // results ignored: 0 = not reported
    cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev_);
    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev_);
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev_);
    (void)cudaGetLastError();  // an attribute not reported must not surface at the next launch check
    l2_bytes_ = static_cast<size_t>(std::max(l2, 0));
    auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
    device_json_ = "{\"name\": \"" + json_escape(g.name) + "\", \"index\": " + std::to_string(dev_) + ", \"cc\": \"" +
                   std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor) + "\", \"sms\": " + std::to_string(g.sms) +
                   ", \"memory_bytes\": " + std::to_string(g.memory_bytes) + ", \"driver_version\": \"" +
                   version(d.driver_version) + "\", \"runtime_version\": \"" + version(d.runtime_version) +
                   "\", \"max_sm_clock_khz\": " + std::to_string(sm_khz) + ", \"max_memory_clock_khz\": " + std::to_string(mem_khz) +
                   ", \"memory_bus_bits\": " + std::to_string(bus_bits) + ", \"l2_bytes\": " + std::to_string(l2) + "}";
    // Stream-ordered allocations return to the device's default pool; with its release threshold
    // at 0 the pool hands memory back to the driver at the next synchronize, which is the one
    // closing a timed op: keep it (the executor frees and reallocates the same sizes every step).
    cudaMemPool_t pool = nullptr;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, dev_));
    uint64_t keep = UINT64_MAX;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    // A throw past here leaves no destructor to run: what was made so far is released first.
    try {
      // Made into locals and kept only once made: release() never sees what a failed call wrote.
      cudaStream_t stream = nullptr;
      CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      s_ = stream;
      cublasHandle_t blas = nullptr;
      CUBLAS_CHECK(cublasCreate(&blas));
      blas_ = blas;
      CUBLAS_CHECK(cublasSetStream(blas_, s_));
      timer_.emplace();  // its events on this rank's device, as the stream (made current above)
    } catch (const std::bad_alloc& e) {
      // Not the run's tensors (moeperf run's --scale advice would mislead): the device was full
      // before the run began.
      release();
      throw std::runtime_error("--backend cuda: GPU " + std::to_string(dev_) + " (" + name_ +
                               ") has no memory left for the backend's stream, cuBLAS handle and events; is another "
                               "process holding it? (" + e.what() + ")");
    } catch (...) {
      release();
      throw;
    }
  }
  ~CudaBackend() override { release(); }
  std::string name() const override { return "cuda (" + name_ + ")"; }
  std::string gemm_peak_method() const override {
    return "4096^3 FP32 cuBLAS SGEMM (no TF32) on " + name_ + " (device " + std::to_string(dev_) + "), best of 5";
  }
  std::string device_json() const override { return device_json_; }
  void synchronize() override { CUDA_CHECK(cudaStreamSynchronize(s_)); }

  // The op's device time between two events on its stream, behind a memset of at least 256 MiB
  // and twice the L2 (../shared/docs/executor.md: flush the L2 between timed runs). The op starts
  // on a cold cache, and its launches queue while the memset runs, so the events bracket the
  // device's work, not the host's launch latency nor the synchronize's. An op that waits for the
  // device inside (a count copied to the host) keeps that round trip, which is its own. The memset
  // leaves up to an L2 of dirty lines the op writes back (standard practice: nvbench and Triton's
  // timer flush the same way). The buffer is allocated at the first timed op (the ceilings, before
  // the run's tensors) and held; without it (its allocation failed on a full device) the events
  // still keep the closing synchronize out, and timing_method() says so.
  double time_work(const std::function<void()>& f) override {
    synchronize();
    flush_l2();
    return timer_->seconds(s_, f);
  }
  std::string timing_method() const override {
    if (flush_tried_ && !flush_) return "CUDA events on the op's stream (no L2 flush: its buffer did not fit on the device)";
    return "CUDA events on the op's stream, each op behind a " + std::to_string(flush_want() >> 20) +
           " MiB memset (L2 flush; the op's launches queue behind it)";
  }

  bool host_memory() const override { return false; }
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    CUDA_CHECK(cudaMallocAsync(&p, std::max<size_t>(bytes, 16), s_));
    return p;
  }
  void release(void* p) override {
    if (p) CUDA_CHECK(cudaFreeAsync(p, s_));
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s_));
    CUDA_CHECK(cudaStreamSynchronize(s_));  // the host buffer may change right after
  }
  void download(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s_));
    CUDA_CHECK(cudaStreamSynchronize(s_));
  }
  void gather_rows(const float* in, const int64_t* idx, int64_t rows, int64_t hidden, float* out) override {
    kernels::permute(in, rows, hidden, 1, idx, out, s_);  // with top_k = 1 the permute is a row gather
  }
  void fill(float* p, int64_t n, float value) override { kernels::fill_f32(p, n, value, s_); }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s_));
  }

  // Row-major C [m x n] = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
  void gemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool acc) override {
    if (m == 0 || n == 0) return;
    if (k == 0) {
      if (!acc) CUDA_CHECK(cudaMemsetAsync(c, 0, static_cast<size_t>(m * n) * sizeof(float), s_));
      return;
    }
    const float alpha = 1.0f, beta = acc ? 1.0f : 0.0f;
    CUBLAS_CHECK(cublasSgemm_64(blas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, tb ? k : n, a,
                                ta ? m : k, &beta, c, n));
  }
  void swiglu_fwd(const float* g, int64_t rows, int64_t inter, float* out) override { kernels::swiglu_fwd(g, rows, inter, out, s_); }
  void swiglu_bwd(const float* g, const float* d, int64_t rows, int64_t inter, float* dg) override {
    kernels::swiglu_bwd(g, d, rows, inter, dg, s_);
  }
  void router_topk(const float* logits, const float* bias, const ref::RouterParams& p, int32_t* idx, float* w) override {
    kernels::RouterParams kp;
    kp.tokens = p.tokens, kp.experts = p.experts, kp.top_k = p.top_k, kp.groups = p.groups, kp.topk_groups = p.topk_groups;
    kp.score = p.score == ref::Score::sigmoid ? kernels::Score::sigmoid : kernels::Score::softmax;
    kp.normalize = p.normalize;
    kernels::router_topk(logits, bias, kp, idx, w, s_);
  }
  void router_bwd(const float* logits, const int32_t* idx, const float* dw, const ref::RouterParams& p, float* dl) override {
    kernels::router_bwd(logits, idx, dw, p.tokens, p.experts, p.top_k, p.score == ref::Score::sigmoid, dl, s_);
  }
  void expert_counts(const int32_t* idx, int64_t tokens, int k, int64_t experts, int64_t* counts, int64_t* offsets) override {
    // workspace() may grow ws_bytes_: call it before ws_bytes_ is read (the order in which a call's
    // arguments are evaluated is unspecified).
    void* ws = workspace(tokens * k, experts);
    kernels::expert_counts_offsets(idx, tokens, k, experts, counts, offsets, ws, ws_bytes_, s_);
  }
  void permute_map(const int32_t* idx, int64_t tokens, int k, int64_t experts, const int64_t* offsets, int64_t* ros,
                   int64_t* sor) override {
    void* ws = workspace(tokens * k, experts);
    kernels::permute_map(idx, tokens, k, experts, offsets, ros, sor, ws, ws_bytes_, s_);
  }
  void permute(const float* x, int64_t tokens, int64_t hidden, int k, const int64_t* sor, float* out) override {
    kernels::permute(x, tokens, hidden, k, sor, out, s_);
  }
  void unpermute(const float* rows, int64_t tokens, int64_t hidden, int k, const int64_t* ros, const float* w, float* out) override {
    kernels::unpermute(rows, tokens, hidden, k, ros, w, out, s_);
  }
  void unpermute_bwd(const float* rows, const float* dout, int64_t tokens, int64_t hidden, int k, const int64_t* ros, const float* w,
                     float* drows, float* dw) override {
    kernels::unpermute_bwd(rows, dout, tokens, hidden, k, ros, w, drows, dw, s_);
  }
  void permute_bwd(const float* drows, int64_t tokens, int64_t hidden, int k, const int64_t* ros, float* dx) override {
    kernels::permute_bwd(drows, tokens, hidden, k, ros, dx, s_);
  }

  // FP32 SGEMM 4096^3, best of 5 (what this backend's GEMMs run).
  double measure_gemm_peak() override {
    const int64_t n = 4096;
    float* a = static_cast<float*>(alloc(static_cast<size_t>(3 * n * n) * sizeof(float)));
    fill(a, 3 * n * n, 0.5f);
    double best = 0;
    for (int i = 0; i < 6; ++i) {
      const double s = time_work([&] { gemm(a, a + n * n, a + 2 * n * n, n, n, n, false, false, false); });
      if (i > 0) best = std::max(best, 2.0 * static_cast<double>(n * n * n) / s);
    }
    release(a);
    synchronize();
    return best;
  }
  // Device-to-device copy of 256 MiB: read + write bytes per second, best of 5.
  double measure_copy_bandwidth() override {
    const size_t bytes = size_t{256} << 20;
    void* a = alloc(2 * bytes);
    double best = 0;
    for (int i = 0; i < 6; ++i) {
      const double s = time_work([&] { CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(a) + bytes, a, bytes, cudaMemcpyDeviceToDevice, s_)); });
      if (i > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / s);
    }
    release(a);
    synchronize();
    return best;
  }

 private:
  // Everything the backend made, each only if made (a constructor that threw part-way calls it too).
  void release() noexcept {
    timer_.reset();
    if (s_) cudaStreamSynchronize(s_);
    if (flush_) cudaFree(flush_);
    if (ws_) cudaFree(ws_);
    if (blas_) cublasDestroy(blas_);
    if (s_) cudaStreamDestroy(s_);
    flush_ = ws_ = nullptr;
    blas_ = nullptr;
    s_ = nullptr;
  }
  size_t flush_want() const { return std::max<size_t>(size_t{256} << 20, 2 * l2_bytes_); }
  // The flush buffer is allocated on the first timed op (a backend that times nothing holds none).
  void flush_l2() {
    if (!flush_tried_) {
      flush_tried_ = true;
      if (cudaMalloc(&flush_, flush_want()) != cudaSuccess) {
        (void)cudaGetLastError();  // out of memory is not sticky: the ops go on without the flush
        flush_ = nullptr;
      }
    }
    if (flush_) CUDA_CHECK(cudaMemsetAsync(flush_, ++flush_value_ & 0xff, flush_want(), s_));
  }

  void* workspace(int64_t slots, int64_t experts) {
    const size_t need = kernels::routing_workspace_bytes(slots, experts);
    if (need > ws_bytes_) {
      synchronize();
      cudaFree(ws_);
      ws_ = nullptr;
      CUDA_CHECK(cudaMalloc(&ws_, need));
      ws_bytes_ = need;
    }
    return ws_;
  }

  std::string name_, device_json_;
  int dev_ = 0;
  cudaStream_t s_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::optional<kernels::EventTimer> timer_;  // made once the device is chosen
  size_t l2_bytes_ = 0;
  void* flush_ = nullptr;
  bool flush_tried_ = false;
  int flush_value_ = 0;
  void* ws_ = nullptr;
  size_t ws_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int local_rank) { return std::make_unique<CudaBackend>(local_rank); }

}  // namespace moeperf::exec
