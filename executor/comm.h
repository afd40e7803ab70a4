// Communicators of the executor: ragged all-to-all (64-bit counts), all-gather, sum all-reduce,
// reduce-scatter, barrier and abort, over MPI between processes or in-process for one rank
// (loopback). Under MPI they run the algorithms the cost model prices for NCCL, built on MPI's
// point-to-point calls rather than left to its tuner: the all-to-all sends every peer's block at
// once ("direct"), the gathers and reductions are rings ("ring"), so a measured collective and
// its prediction describe the same steps (algorithm() names them).
//
//   auto comm = make_communicator(&argc, &argv);   // MPI when launched by mpirun/srun, else loopback
//   comm->alltoallv(send, send_bytes, recv, recv_bytes);
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace moeperf::exec {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This rank's index among the ranks of its node (MPI_COMM_TYPE_SHARED): the GPU it drives, as the
  // NCCL communicator picks it (local rank modulo the node's GPUs).
  virtual int local_rank() const { return 0; }
  virtual std::string name() const = 0;
  // Peer p gets send_bytes[p] bytes from `send` (peers' blocks consecutive, in rank order) and we
  // get recv_bytes[p] from it into `recv` likewise. Counts are 64-bit: large exchanges are chunked.
  virtual void alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                         const std::vector<int64_t>& recv_bytes) = 0;
  virtual void allgather(const void* send, int64_t bytes, void* recv) = 0;
  virtual void allreduce_sum(double* data, int64_t n) = 0;
  // Sums `send` (size() blocks of `count` floats) over ranks; this rank gets block rank() in `recv`.
  virtual void reduce_scatter_sum(const float* send, float* recv, int64_t count) = 0;
  // The algorithm this communicator runs a collective with, under the cost model's names
  // (model/pricing/collective.h: "ring", "direct"); "" when it is the library's own choice.
  virtual std::string algorithm(const std::string& collective) const {
    (void)collective;
    return "";
  }
  virtual void barrier() = 0;
  // A barrier that sleeps while it waits (MPI_Ibarrier polled every millisecond) instead of
  // spinning: ranks idle while another measures must leave it the cores.
  virtual void idle_barrier() { barrier(); }
  [[noreturn]] virtual void abort(const std::string& message, int code) = 0;
};

// A ragged all-to-all over device buffers, beside the host communicator: `moeperf run --backend
// cuda` sends its dispatch, combine (and their backward) and the count exchange through it when
// one is given (the NCCL communicator, executor/comm_nccl.h, under MPI with more than one rank);
// without one they are staged through host memory over the Communicator.
class DeviceExchange {
 public:
  virtual ~DeviceExchange() = default;
  virtual std::string name() const = 0;  // e.g. "nccl"
  // Device buffers, peers' blocks consecutive in rank order; done on return. `op` names the
  // exchange in errors. Returns the exchange's time on its stream (CUDA events around the library's
  // group of sends and receives: the group's issue on the host and the transfer, not the setup,
  // NCCL's simulation pass or the wait for the stream after it), 0 when not measured.
  virtual double alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                           const std::vector<int64_t>& recv_bytes, const char* op) = 0;
  // send [ranks x width] host int64 (block p for peer p) -> [ranks x width] (block p from peer p),
  // through the device; `device_s`, when given, gets the exchange's own device time as above.
  virtual std::vector<int64_t> exchange_counts(const std::vector<int64_t>& send, int64_t width, double* device_s = nullptr) = 0;
};

// MPI when the process was started by mpirun/srun (and moeperf was built with MPI), else loopback.
std::unique_ptr<Communicator> make_communicator(int* argc, char*** argv);
std::unique_ptr<Communicator> make_loopback();
bool built_with_mpi();

// Largest bytes one MPI call moves per peer; exchanges above it go in rounds (MPI counts are int).
inline constexpr int64_t kMpiChunkBytes = int64_t{1} << 30;

}  // namespace moeperf::exec
