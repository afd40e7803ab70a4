#include "executor/comm_nccl.h"

#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <thread>

#include "executor/a2a_plan.h"
#include "kernels/cuda_check.h"
#include "kernels/moe_kernels.h"

namespace moeperf::exec {
namespace {

using Clock = std::chrono::steady_clock;

void mpi_check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw NcclError(std::string(what) + ": " + std::string(msg, static_cast<size_t>(len)));
  }
}

// A device allocation for one call's temporaries.
struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { MOEPERF_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 16))); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

}  // namespace

struct NcclComm::Impl {
  ncclComm_t comm = nullptr;
  int rank = 0, size = 1, device = 0, version = 0;
  double timeout_s;
  bool force_nccl = false, aborted = false;
  cudaEvent_t t0 = nullptr, t1 = nullptr;

  explicit Impl(double timeout) : timeout_s(timeout) {}

  std::string who() const { return "rank " + std::to_string(rank) + " of " + std::to_string(size); }

  void check(ncclResult_t r, const char* expr, const char* op) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    const char* last = comm ? ncclGetLastError(comm) : "";
    const std::string msg = std::string("NCCL ") + op + ": " + who() + ": " + expr + ": " + ncclGetErrorString(r) +
                            (last && *last ? std::string(" (") + last + ")" : std::string());
    abort_comm();
    throw NcclError(msg);
  }

  void abort_comm() {
    if (comm) ncclCommAbort(comm);
    comm = nullptr;
    aborted = true;
  }

  [[noreturn]] void timed_out(const char* op) {
    abort_comm();
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f", timeout_s);
    throw NcclError(std::string("NCCL ") + op + ": " + who() + ": not finished after " + buf +
                    " s (a peer failed, hangs, or posted different sends/receives); the communicator was aborted");
  }

  void require_live(const char* op) const {
    if (aborted || !comm) throw NcclError(std::string("NCCL ") + op + ": " + who() + ": the communicator was aborted earlier");
  }

  // Non-blocking communicator: wait until NCCL has finished issuing (async error no longer in progress).
  void wait_issued(const char* op, Clock::time_point deadline) {
    for (;;) {
      ncclResult_t st = ncclSuccess;
      check(ncclCommGetAsyncError(comm, &st), "ncclCommGetAsyncError", op);
      if (st == ncclSuccess) return;
      if (st != ncclInProgress) check(st, "asynchronous error", op);
      if (Clock::now() > deadline) timed_out(op);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // The stream's work finished, NCCL's asynchronous errors checked, within the deadline.
  void wait_stream(cudaStream_t s, const char* op, Clock::time_point deadline) {
    for (;;) {
      const cudaError_t q = cudaStreamQuery(s);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) MOEPERF_CUDA_CHECK(q);
      if (comm) {
        ncclResult_t st = ncclSuccess;
        check(ncclCommGetAsyncError(comm, &st), "ncclCommGetAsyncError", op);
        if (st != ncclSuccess && st != ncclInProgress) check(st, "asynchronous error", op);
      }
      if (Clock::now() > deadline) timed_out(op);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  Clock::time_point deadline() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  }

  // The group of sends/receives for one exchange; zero-byte pairs skipped.
  void post(const char* send, const std::vector<int64_t>& sb, const std::vector<int64_t>& soff, char* recv,
            const std::vector<int64_t>& rb, const std::vector<int64_t>& roff, cudaStream_t s, const char* op) {
    for (int p = 0; p < size; ++p) {
      const auto i = static_cast<size_t>(p);
      if (sb[i] > 0) check(ncclSend(send + soff[i], static_cast<size_t>(sb[i]), ncclUint8, p, comm, s), "ncclSend", op);
      if (rb[i] > 0) check(ncclRecv(recv + roff[i], static_cast<size_t>(rb[i]), ncclUint8, p, comm, s), "ncclRecv", op);
    }
  }

  A2aTiming exchange(const void* send, const std::vector<int64_t>& sb, void* recv, const std::vector<int64_t>& rb, cudaStream_t s,
                     const char* op) {
    if (static_cast<int>(sb.size()) != size || static_cast<int>(rb.size()) != size)
      throw std::invalid_argument(std::string("NCCL ") + op + ": byte counts must have one entry per rank");
    std::vector<int64_t> soff(sb.size() + 1, 0), roff(rb.size() + 1, 0);
    for (size_t p = 0; p < sb.size(); ++p) {
      if (sb[p] < 0 || rb[p] < 0) throw std::invalid_argument(std::string("NCCL ") + op + ": negative byte count");
      soff[p + 1] = soff[p] + sb[p], roff[p + 1] = roff[p] + rb[p];
    }
    A2aTiming t;
    t.bytes_sent = soff.back();
    const auto* sp = static_cast<const char*>(send);
    auto* rp = static_cast<char*>(recv);
    if (size == 1 && !force_nccl) {
      if (sb[0] != rb[0]) throw std::logic_error(std::string(op) + ": one rank, but send and receive sizes differ");
      t.local_copy = true;
      MOEPERF_CUDA_CHECK(cudaEventRecord(t0, s));
      if (sb[0] > 0) MOEPERF_CUDA_CHECK(cudaMemcpyAsync(rp, sp, static_cast<size_t>(sb[0]), cudaMemcpyDeviceToDevice, s));
      MOEPERF_CUDA_CHECK(cudaEventRecord(t1, s));
      wait_stream(s, op, deadline());
    } else {
      require_live(op);
      // NCCL's estimate of the same group, then the real one.
      ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
      check(ncclGroupStart(), "ncclGroupStart", op);
      post(sp, sb, soff, rp, rb, roff, s, op);
      check(ncclGroupSimulateEnd(&sim), "ncclGroupSimulateEnd", op);
      wait_issued(op, deadline());
      if (sim.estimatedTime > 0 && sim.estimatedTime < 1e30f) t.nccl_estimate_s = static_cast<double>(sim.estimatedTime) * 1e-6;  // NCCL's model works in microseconds
      const auto dl = deadline();
      MOEPERF_CUDA_CHECK(cudaEventRecord(t0, s));
      check(ncclGroupStart(), "ncclGroupStart", op);
      post(sp, sb, soff, rp, rb, roff, s, op);
      check(ncclGroupEnd(), "ncclGroupEnd", op);
      wait_issued(op, dl);
      MOEPERF_CUDA_CHECK(cudaEventRecord(t1, s));
      wait_stream(s, op, dl);
    }
    float ms = 0;
    MOEPERF_CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
    t.measured_s = ms * 1e-3;
    return t;
  }
};

NcclComm::NcclComm(double timeout_s) : impl_(std::make_unique<Impl>(timeout_s)) {
  Impl& m = *impl_;
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) mpi_check(MPI_Init(nullptr, nullptr), "MPI_Init");
  mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &m.rank), "MPI_Comm_rank");
  mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &m.size), "MPI_Comm_size");
  MPI_Comm node;
  mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, m.rank, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int local = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  int devices = 0;
  MOEPERF_CUDA_CHECK(cudaGetDeviceCount(&devices));
  m.device = local % std::max(devices, 1);
  MOEPERF_CUDA_CHECK(cudaSetDevice(m.device));
  MOEPERF_CUDA_CHECK(cudaEventCreate(&m.t0));
  MOEPERF_CUDA_CHECK(cudaEventCreate(&m.t1));
  m.check(ncclGetVersion(&m.version), "ncclGetVersion", "init");
  ncclUniqueId id{};
  if (m.rank == 0) m.check(ncclGetUniqueId(&id), "ncclGetUniqueId", "init");
  mpi_check(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast(ncclUniqueId)");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every wait below has a deadline
  const auto dl = m.deadline();
  m.check(ncclCommInitRankConfig(&m.comm, m.size, id, m.rank, &config), "ncclCommInitRankConfig", "init");
  m.wait_issued("init (ncclCommInitRankConfig)", dl);
}

NcclComm::~NcclComm() {
  Impl& m = *impl_;
  if (m.comm) {
    // Flush, then free; a communicator that cannot finish in time is aborted instead.
    const ncclResult_t f = ncclCommFinalize(m.comm);
    bool ok = f == ncclSuccess || f == ncclInProgress;
    const auto dl = m.deadline();
    ncclResult_t st = ncclInProgress;
    while (ok && st == ncclInProgress) {
      if (ncclCommGetAsyncError(m.comm, &st) != ncclSuccess || Clock::now() > dl) ok = false;
      else if (st == ncclInProgress) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (ok && st == ncclSuccess) ncclCommDestroy(m.comm);
    else ncclCommAbort(m.comm);
  }
  if (m.t0) cudaEventDestroy(m.t0);
  if (m.t1) cudaEventDestroy(m.t1);
}

int NcclComm::rank() const { return impl_->rank; }
int NcclComm::size() const { return impl_->size; }
int NcclComm::device() const { return impl_->device; }
int NcclComm::nccl_version() const { return impl_->version; }
void NcclComm::set_force_nccl(bool on) { impl_->force_nccl = on; }
void NcclComm::abort() { impl_->abort_comm(); }

std::vector<int64_t> NcclComm::exchange_counts(const std::vector<int64_t>& send, int64_t width, cudaStream_t stream, A2aTiming* timing) {
  Impl& m = *impl_;
  if (width < 1 || static_cast<int64_t>(send.size()) != width * m.size)
    throw std::invalid_argument("NCCL moe.count_exchange: counts must be size() x width, width >= 1");
  const size_t bytes = send.size() * sizeof(int64_t);
  Dev d_send(bytes), d_recv(bytes);
  MOEPERF_CUDA_CHECK(cudaMemcpyAsync(d_send.p, send.data(), bytes, cudaMemcpyHostToDevice, stream));
  const std::vector<int64_t> per_peer(static_cast<size_t>(m.size), width * static_cast<int64_t>(sizeof(int64_t)));
  const A2aTiming t = m.exchange(d_send.p, per_peer, d_recv.p, per_peer, stream, "moe.count_exchange");
  if (timing) *timing = t;
  std::vector<int64_t> got(send.size());
  MOEPERF_CUDA_CHECK(cudaMemcpyAsync(got.data(), d_recv.p, bytes, cudaMemcpyDeviceToHost, stream));
  m.wait_stream(stream, "moe.count_exchange (copy to host)", m.deadline());
  return got;
}

A2aTiming NcclComm::alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv, const std::vector<int64_t>& recv_bytes,
                              cudaStream_t stream, const char* op) {
  return impl_->exchange(send, send_bytes, recv, recv_bytes, stream, op);
}

DispatchResult NcclComm::dispatch(const float* x, int64_t tokens, int64_t hidden, const std::vector<int32_t>& idx, int top_k,
                                  int64_t experts, bool dedup, float* out, int64_t capacity_rows, cudaStream_t stream) {
  Impl& m = *impl_;
  if (static_cast<int64_t>(idx.size()) != tokens * top_k) throw std::invalid_argument("dispatch: idx must be tokens x top_k");
  if (hidden < 1) throw std::invalid_argument("dispatch: hidden < 1");
  const DispatchPlan plan = plan_dispatch(idx.data(), tokens, top_k, experts, m.size, dedup);
  DispatchResult r;
  if (m.size == 1 && !m.force_nccl) r.note = "EP group of 1 rank: dispatch is a local device copy (no NCCL traffic)";
  const std::vector<int64_t> recv_counts = exchange_counts(plan.send_counts, plan.width, stream, &r.counts);
  const std::vector<int64_t> recv_rows = rows_per_peer(recv_counts, m.size, plan.width);
  r.sent_rows = std::accumulate(plan.send_rows.begin(), plan.send_rows.end(), int64_t{0});
  r.recv_rows = std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t{0});

  // Pack: send row i = x[send_token[i]] (the permute kernel with top_k = 1 is a row gather).
  const auto row_bytes = static_cast<int64_t>(sizeof(float)) * hidden;
  Dev d_tok(plan.send_token.size() * sizeof(int64_t)), d_send(static_cast<size_t>(r.sent_rows * row_bytes)),
      d_recv(static_cast<size_t>(r.recv_rows * row_bytes));
  MOEPERF_CUDA_CHECK(cudaMemcpyAsync(d_tok.p, plan.send_token.data(), plan.send_token.size() * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
  kernels::permute(x, r.sent_rows, hidden, 1, d_tok.as<int64_t>(), d_send.as<float>(), stream);
  const A2aLayout lay = a2a_layout(plan.send_rows, recv_rows, row_bytes);
  r.payload = m.exchange(d_send.p, lay.send_bytes, d_recv.p, lay.recv_bytes, stream, "moe.dispatch");

  ExpandMap map;
  if (dedup) {
    const A2aLayout ml = a2a_layout(plan.send_rows, recv_rows, static_cast<int64_t>(sizeof(int32_t)) * top_k);
    Dev d_ms(plan.send_meta.size() * sizeof(int32_t)), d_mr(static_cast<size_t>(ml.recv_off.back()));
    MOEPERF_CUDA_CHECK(cudaMemcpyAsync(d_ms.p, plan.send_meta.data(), plan.send_meta.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    r.meta = m.exchange(d_ms.p, ml.send_bytes, d_mr.p, ml.recv_bytes, stream, "moe.dispatch (dedup meta)");
    std::vector<int32_t> meta(static_cast<size_t>(r.recv_rows * top_k));
    MOEPERF_CUDA_CHECK(cudaMemcpyAsync(meta.data(), d_mr.p, meta.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
    m.wait_stream(stream, "moe.dispatch (dedup meta to host)", m.deadline());
    map = expand_dedup(meta, r.recv_rows, top_k, plan.local_experts);
  } else {
    map = expand_plain(recv_counts, m.size, plan.local_experts);
  }
  r.expanded_rows = static_cast<int64_t>(map.src_row.size());
  r.expert_offsets = map.expert_offsets;
  if (r.expanded_rows > capacity_rows)
    throw std::invalid_argument("dispatch: " + std::to_string(r.expanded_rows) + " rows arrived for a buffer of " +
                                std::to_string(capacity_rows));
  // Expand to expert-major rows: out[i] = recv[src_row[i]].
  Dev d_map(map.src_row.size() * sizeof(int64_t));
  MOEPERF_CUDA_CHECK(cudaMemcpyAsync(d_map.p, map.src_row.data(), map.src_row.size() * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
  kernels::permute(d_recv.as<float>(), r.expanded_rows, hidden, 1, d_map.as<int64_t>(), out, stream);
  m.wait_stream(stream, "moe.dispatch (expand)", m.deadline());
  return r;
}

namespace {

class NcclExchange final : public DeviceExchange {
 public:
  explicit NcclExchange(double timeout_s) : comm_(timeout_s) {
    MOEPERF_CUDA_CHECK(cudaSetDevice(comm_.device()));
    MOEPERF_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
  }
  ~NcclExchange() override {
    cudaStreamSynchronize(s_);
    cudaStreamDestroy(s_);
  }
  std::string name() const override { return "nccl"; }
  double alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv, const std::vector<int64_t>& recv_bytes,
                   const char* op) override {
    return comm_.alltoallv(send, send_bytes, recv, recv_bytes, s_, op).measured_s;
  }
  std::vector<int64_t> exchange_counts(const std::vector<int64_t>& send, int64_t width, double* device_s) override {
    A2aTiming t;
    std::vector<int64_t> got = comm_.exchange_counts(send, width, s_, &t);
    if (device_s) *device_s = t.measured_s;
    return got;
  }

 private:
  NcclComm comm_;
  cudaStream_t s_ = nullptr;
};

}  // namespace

std::unique_ptr<DeviceExchange> make_nccl_exchange(double timeout_s) { return std::make_unique<NcclExchange>(timeout_s); }

}  // namespace moeperf::exec
