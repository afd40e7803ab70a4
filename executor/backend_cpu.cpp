#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>
#include <stdexcept>

#include "executor/backend.h"

namespace moeperf::exec {
namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapM = Eigen::Map<Mat>;
using CMapM = Eigen::Map<const Mat>;

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  void synchronize() override {}
  bool host_memory() const override { return true; }
  // 64-byte aligned. Large buffers start at staggered offsets within a page: two buffers at the
  // same page offset (as malloc's mmap places every large one) make a streaming copy between them
  // stall on 4K aliasing (a load that matches an older store's low 12 address bits waits for it).
  // Measured here (a gather of 1 KiB rows between two 256 MiB buffers): 23.6 GB/s at the same
  // offset, 30-31 GB/s 256 B or more apart. A GPU's memory has no such trap, so the executor keeps
  // it out of what it measures. The raw pointer sits in the 8 bytes before the one returned.
  void* alloc(size_t bytes) override {
    constexpr size_t kPage = 4096, kLarge = 65536;
    const bool large = bytes >= kLarge;
    auto* raw = static_cast<char*>(::operator new(bytes + (large ? 2 * kPage : 128)));
    const auto at = reinterpret_cast<uintptr_t>(raw);
    uintptr_t p = 0;
    if (large) p = (at + kPage - 1) / kPage * kPage + 64 + (next_slot_++ % 8) * 512;  // 64 ... 3648
    else p = (at + 8 + 63) / 64 * 64;
    reinterpret_cast<char**>(p)[-1] = raw;
    return reinterpret_cast<void*>(p);
  }
  void release(void* p) override {
    if (p) ::operator delete(static_cast<char**>(p)[-1]);
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0 && dst != src) std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0 && dst != src) std::memcpy(dst, src, bytes);
  }
  void gather_rows(const float* in, const int64_t* idx, int64_t rows, int64_t h, float* out) override {
    for (int64_t i = 0; i < rows; ++i) std::memcpy(out + i * h, in + idx[i] * h, sizeof(float) * static_cast<size_t>(h));
  }
  void fill(float* p, int64_t n, float value) override { std::fill(p, p + n, value); }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  std::string gemm_peak_method() const override {
    return std::string("1024^3 FP32 Eigen GEMM, one thread, this build's ISA, best of ") + std::to_string(kPeakRuns) +
           (kSanitized ? " (a sanitizer build)" : "");
  }
  // A 1024^3 FP32 Eigen GEMM, best of 5: about 60 ms each on a server core. A sanitizer build runs
  // each about 20 times slower (every load and store checked) and measures the rate of that build,
  // not of the machine: best of 2 there.
#if defined(__SANITIZE_ADDRESS__)
  static constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  static constexpr bool kSanitized = true;
#else
  static constexpr bool kSanitized = false;
#endif
#else
  static constexpr bool kSanitized = false;
#endif
  static constexpr int kPeakRuns = kSanitized ? 2 : 5;
  // Eigen's GEBP micro-kernel computes mr x nr blocks of C (Eigen/src/Core/products/
  // GeneralBlockPanelKernel.h, gebp_traits<float, float>), sized by this build's SIMD width.
  std::pair<int, int> gemm_tile() const override {
    using T = Eigen::internal::gebp_traits<float, float>;
    return {static_cast<int>(T::mr), static_cast<int>(T::nr)};
  }
  double measure_gemm_peak() override {
    const int64_t n = 1024;
    Mat a = Mat::Random(n, n), b = Mat::Random(n, n), c(n, n);
    c.noalias() = a * b;  // warm
    double best = 0;
    for (int i = 0; i < kPeakRuns; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      c.noalias() = a * b;
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, 2.0 * n * n * n / s);
    }
    return best;
  }
  // memcpy of 64 MiB, read + write, best of 3.
  double measure_copy_bandwidth() override {
    const size_t n = size_t{64} << 20;
    std::vector<char> a(n, 1), b(n, 0);
    double best = 0;
    for (int i = 0; i < 10; ++i) {  // the best of ten: a shared VM's memory rate swings from copy to copy
      const auto t0 = std::chrono::steady_clock::now();
      std::memcpy(b.data(), a.data(), n);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, 2.0 * static_cast<double>(n) / s);
    }
    return best;
  }

  void gemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool acc) override {
    MapM C(c, m, n);
    const CMapM A(a, ta ? k : m, ta ? m : k), B(b, tb ? n : k, tb ? k : n);
    auto run = [&](const auto& x, const auto& y) {
      if (acc) C.noalias() += x * y;
      else C.noalias() = x * y;
    };
    if (!ta && !tb) run(A, B);
    else if (ta && !tb) run(A.transpose(), B);
    else if (!ta && tb) run(A, B.transpose());
    else run(A.transpose(), B.transpose());
  }
  void swiglu_fwd(const float* g, int64_t rows, int64_t inter, float* out) override { ref::swiglu_fwd(g, rows, inter, out); }
  void swiglu_bwd(const float* g, const float* d, int64_t rows, int64_t inter, float* dg) override {
    ref::swiglu_bwd(g, d, rows, inter, dg);
  }
  void router_topk(const float* logits, const float* bias, const ref::RouterParams& p, int32_t* idx, float* w) override {
    ref::router_topk(logits, bias, p, idx, w);
  }
  void router_bwd(const float* logits, const int32_t* idx, const float* dw, const ref::RouterParams& p, float* dl) override {
    const int64_t e = p.experts;
    for (int64_t t = 0; t < p.tokens; ++t) {
      const float* l = logits + t * e;
      float* d = dl + t * e;
      for (int64_t x = 0; x < e; ++x) d[x] = 0.0f;
      if (p.score == ref::Score::sigmoid) {
        for (int j = 0; j < p.top_k; ++j) {
          const int32_t x = idx[t * p.top_k + j];
          const double s = 1.0 / (1.0 + std::exp(-static_cast<double>(l[x])));
          d[x] = static_cast<float>(dw[t * p.top_k + j] * s * (1 - s));
        }
      } else {
        // softmax: dl_x = p_x (g_x - sum_j p_j g_j), g the weight gradient on the selected experts.
        double mx = l[0];
        for (int64_t x = 1; x < e; ++x) mx = std::max(mx, static_cast<double>(l[x]));
        double z = 0;
        for (int64_t x = 0; x < e; ++x) z += std::exp(l[x] - mx);
        double dot = 0;
        for (int j = 0; j < p.top_k; ++j) {
          const int32_t x = idx[t * p.top_k + j];
          dot += std::exp(l[x] - mx) / z * dw[t * p.top_k + j];
        }
        for (int64_t x = 0; x < e; ++x) d[x] = static_cast<float>(-std::exp(l[x] - mx) / z * dot);
        for (int j = 0; j < p.top_k; ++j) {
          const int32_t x = idx[t * p.top_k + j];
          d[x] += static_cast<float>(std::exp(l[x] - mx) / z * dw[t * p.top_k + j]);
        }
      }
    }
  }
  void expert_counts(const int32_t* idx, int64_t tokens, int k, int64_t experts, int64_t* counts, int64_t* offsets) override {
    ref::expert_counts(idx, tokens, k, experts, counts, offsets);
  }
  void permute_map(const int32_t* idx, int64_t tokens, int k, int64_t experts, const int64_t* offsets, int64_t* ros,
                   int64_t* sor) override {
    ref::permute_map(idx, tokens, k, experts, offsets, ros, sor);
  }
  void permute(const float* x, int64_t tokens, int64_t hidden, int k, const int64_t* sor, float* out) override {
    ref::permute(x, tokens, hidden, k, sor, out);
  }
  void unpermute(const float* rows, int64_t tokens, int64_t hidden, int k, const int64_t* ros, const float* w, float* out) override {
    ref::unpermute(rows, tokens, hidden, k, ros, w, out);
  }
  void unpermute_bwd(const float* rows, const float* dout, int64_t tokens, int64_t hidden, int k, const int64_t* ros,
                     const float* w, float* drows, float* dw) override {
    ref::unpermute_bwd(rows, dout, tokens, hidden, k, ros, w, drows, dw);
  }
  void permute_bwd(const float* drows, int64_t tokens, int64_t hidden, int k, const int64_t* ros, float* dx) override {
    ref::permute_bwd(drows, tokens, hidden, k, ros, dx);
  }

 private:
  size_t next_slot_ = 0;  // the next large buffer's offset within its page, in 512-byte steps
};

}  // namespace

#ifdef MOEPERF_HAVE_CUDA_BACKEND
std::unique_ptr<Backend> make_cuda_backend(int local_rank);  // backend_cuda.cpp
#endif

bool built_with_cuda_backend() {
#ifdef MOEPERF_HAVE_CUDA_BACKEND
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& name, int local_rank) {
  if (name == "cpu") return std::make_unique<CpuBackend>();
#ifdef MOEPERF_HAVE_CUDA_BACKEND
  if (name == "cuda") return make_cuda_backend(local_rank);
#else
  (void)local_rank;
#endif
  if (name == "cuda") throw std::runtime_error("backend \"cuda\" is not built: this moeperf was built without CUDA (MOEPERF_WITH_CUDA); use --backend cpu");
  throw std::runtime_error("unknown backend \"" + name + "\": use cpu or cuda");
}

}  // namespace moeperf::exec
