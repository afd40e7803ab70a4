#include "executor/comm.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <utility>

#ifdef MOEPERF_HAVE_MPI
#include <mpi.h>
#endif

namespace moeperf::exec {
namespace {

class Loopback final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "loopback"; }
  void alltoallv(const void* send, const std::vector<int64_t>& sb, void* recv, const std::vector<int64_t>& rb) override {
    if (sb.at(0) != rb.at(0)) throw std::logic_error("loopback all-to-all: send and receive sizes differ");
    if (sb[0] > 0) std::memcpy(recv, send, static_cast<size_t>(sb[0]));
  }
  void allgather(const void* send, int64_t bytes, void* recv) override {
    if (bytes > 0) std::memcpy(recv, send, static_cast<size_t>(bytes));
  }
  void allreduce_sum(double*, int64_t) override {}
  void reduce_scatter_sum(const float* send, float* recv, int64_t count) override {
    if (count > 0) std::memcpy(recv, send, sizeof(float) * static_cast<size_t>(count));
  }
  void barrier() override {}
  [[noreturn]] void abort(const std::string& message, int code) override {
    std::fprintf(stderr, "moeperf run: %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(code);
  }
};

#ifdef MOEPERF_HAVE_MPI
void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw std::runtime_error(std::string(what) + ": " + std::string(msg, static_cast<size_t>(len)));
  }
}

class Mpi final : public Communicator {
 public:
  Mpi(int* argc, char*** argv) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) check(MPI_Init(argc, argv), "MPI_Init");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
      MPI_Comm_rank(node, &local_);
      MPI_Comm_free(&node);
    }
  }
  ~Mpi() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_; }
  std::string name() const override { return "mpi"; }

  // Every peer's block at once (nonblocking sends and receives, in pieces of at most
  // kMpiChunkBytes so MPI's int counts hold), as NCCL groups an all-to-all's sends and receives:
  // one step, the cost model's "direct" all-to-all. This rank's own block is a copy.
  void alltoallv(const void* send, const std::vector<int64_t>& sb, void* recv, const std::vector<int64_t>& rb) override {
    const auto n = static_cast<size_t>(size_);
    const auto* s = static_cast<const char*>(send);
    auto* d = static_cast<char*>(recv);
    int64_t so = 0, ro = 0;
    std::vector<MPI_Request> reqs;
    for (size_t p = 0; p < n; ++p) {
      if (static_cast<int>(p) == rank_) {
        if (sb[p] != rb[p]) throw std::logic_error("all-to-all: this rank's block to itself differs in send and receive size");
      } else {
        for (int64_t lo = 0; lo < rb[p]; lo += kMpiChunkBytes) {
          reqs.emplace_back();
          check(MPI_Irecv(d + ro + lo, static_cast<int>(std::min(kMpiChunkBytes, rb[p] - lo)), MPI_BYTE, static_cast<int>(p), kA2aTag,
                          MPI_COMM_WORLD, &reqs.back()),
                "MPI_Irecv");
        }
        for (int64_t lo = 0; lo < sb[p]; lo += kMpiChunkBytes) {
          reqs.emplace_back();
          check(MPI_Isend(s + so + lo, static_cast<int>(std::min(kMpiChunkBytes, sb[p] - lo)), MPI_BYTE, static_cast<int>(p), kA2aTag,
                          MPI_COMM_WORLD, &reqs.back()),
                "MPI_Isend");
        }
      }
      so += sb[p], ro += rb[p];
    }
    int64_t own_s = 0, own_r = 0;
    for (size_t p = 0; p < static_cast<size_t>(rank_); ++p) own_s += sb[p], own_r += rb[p];
    if (sb[static_cast<size_t>(rank_)] > 0) std::memmove(d + own_r, s + own_s, static_cast<size_t>(sb[static_cast<size_t>(rank_)]));
    check(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  }
  // The gathers and reductions run NCCL's ring algorithms over MPI point-to-point, not the MPI
  // library's own choice (Open MPI's tuned component picks a linear reduce-then-scatter or
  // recursive halving by size, whose cost the model does not describe): n - 1 steps, each a
  // block to the right neighbour and one from the left; a reduction adds the received block into
  // this rank's own in the step's wake, as NCCL's kernel does. So the suite measures, and
  // `moeperf run` runs, the algorithm the model prices (model/pricing/collective.h, "ring").
  void allgather(const void* send, int64_t bytes, void* recv) override {
    auto* d = static_cast<char*>(recv);
    if (bytes > 0) std::memmove(d + rank_ * bytes, send, static_cast<size_t>(bytes));
    ring_all_gather(d, [&](int p) { return std::pair{int64_t{p} * bytes, bytes}; });
  }
  // Tiny control sums (fewer elements than ranks) through MPI_Allreduce; the rest a ring
  // reduce-scatter then a ring all-gather over blocks of near-equal size.
  void allreduce_sum(double* data, int64_t n) override {
    if (n < size_) {
      check(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
      return;
    }
    std::vector<int64_t> off(static_cast<size_t>(size_) + 1, 0);
    for (int p = 0; p < size_; ++p) off[static_cast<size_t>(p) + 1] = off[static_cast<size_t>(p)] + n / size_ + (p < n % size_);
    auto block = [&](int p) { return std::pair{off[static_cast<size_t>(p)], off[static_cast<size_t>(p) + 1] - off[static_cast<size_t>(p)]}; };
    ring_reduce_scatter(data, data, block);  // this rank's block of `data` now holds the sum
    ring_all_gather(data, block);
  }
  std::string algorithm(const std::string& collective) const override {
    if (collective == "all_gather" || collective == "reduce_scatter" || collective == "all_reduce") return "ring";
    return collective == "all_to_all" ? "direct" : "";  // every pair's block at once
  }
  void reduce_scatter_sum(const float* send, float* recv, int64_t count) override {
    ring_reduce_scatter(send, recv, [&](int p) { return std::pair{int64_t{p} * count, count}; }, true);
  }
  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  void idle_barrier() override {
    MPI_Request req;
    check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier");
    for (int done = 0;;) {
      check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  [[noreturn]] void abort(const std::string& message, int code) override {
    std::fprintf(stderr, "moeperf run: rank %d: %s\n", rank_, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  int mod(int r) const { return ((r % size_) + size_) % size_; }
  // Bytes to the right neighbour and from the left one, in rounds below 2^31.
  void sendrecv_bytes(const void* out, int64_t out_bytes, void* in, int64_t in_bytes) {
    const int right = mod(rank_ + 1), left = mod(rank_ - 1);
    const auto* o = static_cast<const char*>(out);
    auto* i = static_cast<char*>(in);
    for (int64_t lo = 0; lo < std::max(out_bytes, in_bytes); lo += kMpiChunkBytes) {
      const auto on = static_cast<int>(std::clamp<int64_t>(out_bytes - lo, 0, kMpiChunkBytes));
      const auto inn = static_cast<int>(std::clamp<int64_t>(in_bytes - lo, 0, kMpiChunkBytes));
      check(MPI_Sendrecv(o + lo, on, MPI_BYTE, right, kRingTag, i + lo, inn, MPI_BYTE, left, kRingTag, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE),
            "MPI_Sendrecv");
    }
  }
  // Ring all-gather in place: block(p) = {first element, elements} of rank p's block in `data`,
  // this rank's already there; at step s it passes block rank - s on and receives rank - s - 1.
  template <class T, class Block>
  void ring_all_gather(T* data, Block block) {
    for (int s = 0; s + 1 < size_; ++s) {
      const auto [so, sn] = block(mod(rank_ - s));
      const auto [ro, rn] = block(mod(rank_ - s - 1));
      sendrecv_bytes(data + so, sn * static_cast<int64_t>(sizeof(T)), data + ro, rn * static_cast<int64_t>(sizeof(T)));
    }
  }
  // Ring reduce-scatter: block(p) = {first element, elements} of rank p's block in `send`; this
  // rank's summed block lands at its offset in `recv` (compact = false) or at `recv` (true). At
  // step s a rank passes on its running sum of block rank - s - 1 and receives its left
  // neighbour's of block rank - s - 2, to which it adds its own; after n - 1 steps the block it
  // holds is its own, summed over every rank.
  template <class T, class Block>
  void ring_reduce_scatter(const T* send, T* recv, Block block, bool compact = false) {
    int64_t most = 0;
    for (int p = 0; p < size_; ++p) most = std::max(most, block(p).second);
    std::vector<T>& out = scratch<T>(0, most);
    std::vector<T>& in = scratch<T>(1, most);
    {
      const auto [o, c] = block(mod(rank_ - 1));
      std::copy(send + o, send + o + c, out.begin());
    }
    int64_t held = block(mod(rank_ - 1)).second;
    for (int s = 0; s + 1 < size_; ++s) {
      const auto [o, c] = block(mod(rank_ - s - 2));
      sendrecv_bytes(out.data(), held * static_cast<int64_t>(sizeof(T)), in.data(), c * static_cast<int64_t>(sizeof(T)));
      for (int64_t i = 0; i < c; ++i) in[static_cast<size_t>(i)] += send[o + i];
      std::swap(out, in);
      held = c;
    }
    const auto [o, c] = block(rank_);
    std::copy(out.begin(), out.begin() + c, recv + (compact ? 0 : o));
  }
  // Two buffers per element type, kept between calls (a collective's buffers stay registered).
  template <class T>
  std::vector<T>& scratch(int which, int64_t n) {
    std::vector<T>* pv = nullptr;
    if constexpr (std::is_same_v<T, float>) pv = &f_[which];
    else pv = &d_[which];
    std::vector<T>& v = *pv;
    if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
    return v;
  }
  static constexpr int kRingTag = 7301, kA2aTag = 7302;
  std::vector<float> f_[2];
  std::vector<double> d_[2];
  int rank_ = 0, size_ = 1, local_ = 0;
};
#endif

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

}  // namespace

bool built_with_mpi() {
#ifdef MOEPERF_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> make_loopback() { return std::make_unique<Loopback>(); }

std::unique_ptr<Communicator> make_communicator(int* argc, char*** argv) {
#ifdef MOEPERF_HAVE_MPI
  if (launched_by_mpi()) return std::make_unique<Mpi>(argc, argv);
#else
  (void)argc;
  (void)argv;
  if (launched_by_mpi())
    throw std::runtime_error("launched by mpirun/srun, but this moeperf was built without MPI (MOEPERF_WITH_MPI)");
#endif
  return make_loopback();
}

}  // namespace moeperf::exec
