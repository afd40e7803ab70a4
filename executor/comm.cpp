#include "executor/comm.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

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
  }
  ~Mpi() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  // Rounds of MPI_Alltoallv, each moving at most kMpiChunkBytes per peer, packed so that counts and
  // displacements stay below 2^31.
  void alltoallv(const void* send, const std::vector<int64_t>& sb, void* recv, const std::vector<int64_t>& rb) override {
    const auto n = static_cast<size_t>(size_);
    std::vector<int64_t> s_off(n + 1, 0), r_off(n + 1, 0);
    for (size_t p = 0; p < n; ++p) s_off[p + 1] = s_off[p] + sb[p], r_off[p + 1] = r_off[p] + rb[p];
    int64_t max_peer = 0;
    for (size_t p = 0; p < n; ++p) max_peer = std::max(max_peer, std::max(sb[p], rb[p]));
    int64_t rounds = (max_peer + kMpiChunkBytes - 1) / kMpiChunkBytes;
    double r = static_cast<double>(rounds);
    MPI_Allreduce(MPI_IN_PLACE, &r, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);  // every rank runs the same rounds
    rounds = static_cast<int64_t>(r);
    const auto* s = static_cast<const char*>(send);
    auto* d = static_cast<char*>(recv);
    if (rounds <= 1) {
      std::vector<int> sc(n), sd(n), rc(n), rd(n);
      for (size_t p = 0; p < n; ++p)
        sc[p] = static_cast<int>(sb[p]), sd[p] = static_cast<int>(s_off[p]), rc[p] = static_cast<int>(rb[p]),
        rd[p] = static_cast<int>(r_off[p]);
      if (s_off[n] < (int64_t{1} << 31) && r_off[n] < (int64_t{1} << 31)) {
        check(MPI_Alltoallv(s, sc.data(), sd.data(), MPI_BYTE, d, rc.data(), rd.data(), MPI_BYTE, MPI_COMM_WORLD),
              "MPI_Alltoallv");
        return;
      }
      rounds = 1;
    }
    std::vector<char> ps, pr;
    for (int64_t round = 0; round < rounds; ++round) {
      std::vector<int> sc(n), sd(n), rc(n), rd(n);
      int64_t st = 0, rt = 0;
      for (size_t p = 0; p < n; ++p) {
        const int64_t lo = round * kMpiChunkBytes;
        const int64_t sn = std::clamp<int64_t>(sb[p] - lo, 0, kMpiChunkBytes), rn = std::clamp<int64_t>(rb[p] - lo, 0, kMpiChunkBytes);
        sc[p] = static_cast<int>(sn), sd[p] = static_cast<int>(st), rc[p] = static_cast<int>(rn), rd[p] = static_cast<int>(rt);
        st += sn, rt += rn;
      }
      ps.resize(static_cast<size_t>(st));
      pr.resize(static_cast<size_t>(rt));
      for (size_t p = 0; p < n; ++p)
        if (sc[p] > 0) std::memcpy(ps.data() + sd[p], s + s_off[p] + round * kMpiChunkBytes, static_cast<size_t>(sc[p]));
      check(MPI_Alltoallv(ps.data(), sc.data(), sd.data(), MPI_BYTE, pr.data(), rc.data(), rd.data(), MPI_BYTE,
                          MPI_COMM_WORLD),
            "MPI_Alltoallv");
      for (size_t p = 0; p < n; ++p)
        if (rc[p] > 0) std::memcpy(d + r_off[p] + round * kMpiChunkBytes, pr.data() + rd[p], static_cast<size_t>(rc[p]));
    }
  }
  void allgather(const void* send, int64_t bytes, void* recv) override {
    if (bytes >= (int64_t{1} << 31)) throw std::runtime_error("allgather above 2 GiB per rank is not supported");
    check(MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Allgather");
  }
  void allreduce_sum(double* data, int64_t n) override {
    check(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  }
  // In rounds of at most 2^28 floats per block so MPI's int counts hold.
  void reduce_scatter_sum(const float* send, float* recv, int64_t count) override {
    const int64_t chunk = int64_t{1} << 28;
    std::vector<float> buf;
    for (int64_t lo = 0; lo < count; lo += chunk) {
      const int64_t n = std::min(chunk, count - lo);
      buf.resize(static_cast<size_t>(n * size_));
      for (int p = 0; p < size_; ++p)
        std::memcpy(buf.data() + p * n, send + p * count + lo, sizeof(float) * static_cast<size_t>(n));
      check(MPI_Reduce_scatter_block(buf.data(), recv + lo, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
            "MPI_Reduce_scatter_block");
    }
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
  int rank_ = 0, size_ = 1;
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
