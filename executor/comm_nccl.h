// The NCCL communicator of the executor (built when CUDA, MPI and NCCL are all found): the EP
// group's ragged all-to-all over device buffers and the MoE dispatch on top of it.
//
//   MPI_Init(...);
//   NcclComm comm(60.0);                      // rank 0: ncclGetUniqueId, MPI_Bcast, ncclCommInitRankConfig
//   auto got = comm.exchange_counts(send_counts, width, stream);
//   comm.alltoallv(d_send, send_bytes, d_recv, recv_bytes, stream, "moe.dispatch");
//   DispatchResult r = comm.dispatch(d_x, T, H, idx, k, E, /*dedup=*/true, d_out, capacity, stream);
//
// - Ragged all-to-all: ncclGroupStart, one ncclSend / ncclRecv per peer with bytes > 0, ncclGroupEnd.
//   Zero-byte pairs are skipped on both sides: a rank's receive sizes come from the count exchange,
//   so they equal what each peer sends it (every pair agrees; mismatched sequences hang NCCL).
// - Count exchange: `width` int64 per peer through NCCL on device buffers, every pair always
//   (never zero bytes), then copied to the host.
// - Every NCCL and CUDA result is checked. The communicator is non-blocking (config.blocking = 0) so
//   no call can hang: every wait polls ncclCommGetAsyncError and the stream against a deadline
//   (the constructor's timeout); past it the communicator is aborted (ncclCommAbort) and NcclError
//   says which op on which rank did not finish. An aborted communicator refuses further work.
// - Before each exchange the same group is run through ncclGroupSimulateEnd: NCCL's own time
//   estimate is returned beside the measured time (A2aTiming; negative when NCCL gives none).
// - One rank (EP group of 1): exchanges are local device copies, unless set_force_nccl(true)
//   sends to self through NCCL; A2aTiming::local_copy and DispatchResult::note say which.
// - Dispatch: plain (one row per (token, slot)) or de-duplicated (one row per token and destination
//   rank, expanded by the receiver from a meta row; executor/a2a_plan.h). Payload rows are FP32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "executor/comm.h"

namespace moeperf::exec {

class NcclError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct A2aTiming {
  double measured_s = 0;         // CUDA events around the exchange on the stream
  double nccl_estimate_s = -1;   // ncclGroupSimulateEnd's estimate (< 0: none given)
  bool local_copy = false;       // one rank: a device copy, no NCCL
  int64_t bytes_sent = 0;
};

struct DispatchResult {
  int64_t sent_rows = 0, recv_rows = 0, expanded_rows = 0;
  std::vector<int64_t> expert_offsets;  // [local experts + 1] into the expanded rows
  A2aTiming counts, payload, meta;      // moe.count_exchange, moe.dispatch, the dedup meta rows
  std::string note;                     // e.g. the EP group of 1 being a local copy
};

class NcclComm {
 public:
  // Over MPI_COMM_WORLD (MPI_Init is called if nobody has; finalizing stays with the caller). The
  // device is the rank's index on its node modulo the visible devices, made current.
  explicit NcclComm(double timeout_s = 60.0);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const;
  int size() const;
  int device() const;
  int nccl_version() const;
  // One rank: go through NCCL (send/receive to self) instead of a local copy.
  void set_force_nccl(bool on);

  // send [size x width] (block p for peer p) -> received [size x width] (block p from peer p).
  std::vector<int64_t> exchange_counts(const std::vector<int64_t>& send, int64_t width, cudaStream_t stream,
                                       A2aTiming* timing = nullptr);

  // Device buffers; peers' blocks consecutive in rank order. Waits for completion (with the deadline).
  A2aTiming alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                      const std::vector<int64_t>& recv_bytes, cudaStream_t stream, const char* op);

  // x [tokens x hidden] FP32 on the device; idx [tokens x top_k] global expert ids on the host;
  // experts split evenly over the ranks. out: expert-major rows of this rank's local experts
  // (capacity rows x hidden; throws if more arrive). Waits for completion.
  DispatchResult dispatch(const float* x, int64_t tokens, int64_t hidden, const std::vector<int32_t>& idx, int top_k,
                          int64_t experts, bool dedup, float* out, int64_t capacity_rows, cudaStream_t stream);

  // Ends the communicator now (ncclCommAbort): what the timeout does; for tests and fatal paths.
  void abort();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The NCCL communicator as the device exchange of `moeperf run --backend cuda` (its own stream on
// the communicator's device, made current: the CUDA backend, created after it, uses that device).
std::unique_ptr<DeviceExchange> make_nccl_exchange(double timeout_s);

}  // namespace moeperf::exec
