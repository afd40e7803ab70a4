// moeperf-mpi: `moeperf sweep|plan` across the ranks mpirun or srun started (moeperf execs it when
// launched with more than one rank). The commands are moeperf's; the ranks come from MPI. Only the
// main thread calls MPI (MPI_THREAD_FUNNELED): worker threads compute, the main thread sends.
#include <mpi.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/ranks.h"

namespace {

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("MPI: ") + what + " failed");
}

class MpiRanks final : public moeperf::cli::Ranks {
 public:
  MpiRanks() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool talked() const { return talked_; }
  bool agreed_failure() const { return agreed_failure_; }

  void broadcast(std::string& s) override {
    talked_ = true;
    unsigned long long n = s.size();
    check(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD), "broadcast");
    s.resize(n);
    check(MPI_Bcast(s.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD), "broadcast");
  }
  void send_to_root(const std::string& s) override {
    talked_ = true;
    check(MPI_Send(s.data(), static_cast<int>(s.size()), MPI_CHAR, 0, kTag, MPI_COMM_WORLD), "send");
  }
  std::string receive_from(int from) override {
    talked_ = true;
    MPI_Status st;
    check(MPI_Probe(from, kTag, MPI_COMM_WORLD, &st), "probe");
    int n = 0;
    MPI_Get_count(&st, MPI_CHAR, &n);
    std::string s(static_cast<size_t>(n), '\0');
    check(MPI_Recv(s.data(), n, MPI_CHAR, from, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "receive");
    return s;
  }
  std::vector<std::string> gather(const std::string& s) override {
    talked_ = true;
    if (rank_ != 0) {
      send_to_root(s);
      return {};
    }
    std::vector<std::string> out{s};
    for (int r = 1; r < size_; ++r) out.push_back(receive_from(r));
    return out;
  }
  bool all(bool ok) override {
    talked_ = true;
    int mine = ok ? 1 : 0, every = 0;
    check(MPI_Allreduce(&mine, &every, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "allreduce");
    if (!every) agreed_failure_ = true;
    return every != 0;
  }

 private:
  static constexpr int kTag = 17;
  int rank_ = 0, size_ = 1;
  bool talked_ = false, agreed_failure_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "moeperf-mpi: MPI_Init_thread failed\n");
    return moeperf::cli::kExitFailed;
  }
  int rc = moeperf::cli::kExitFailed;
  bool talked = false, agreed = false;
  {
    MpiRanks r;
    moeperf::cli::set_ranks(&r);
    rc = moeperf::cli::run_cli(argc, argv);
    moeperf::cli::set_ranks(nullptr);
    talked = r.talked(), agreed = r.agreed_failure();
  }
  // A rank that failed alone after the ranks started talking would leave the others waiting for
  // it: end them all. Failures every rank met alike (bad options, a setup all ranks agreed had
  // failed) just return.
  if (rc != moeperf::cli::kExitOk && talked && !agreed) MPI_Abort(MPI_COMM_WORLD, rc);
  MPI_Finalize();
  return rc;
}
