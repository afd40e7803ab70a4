// The processes of one study: a single process, or the ranks mpirun or srun started. `moeperf`
// links no MPI; under a launcher with more than one rank it execs `moeperf-mpi` (cli/mpi_main.cpp),
// the same commands with an MPI implementation of this interface installed. sweep and plan split
// their points over the ranks and merge on rank 0, which alone writes the output.
#pragma once

#include <exception>
#include <string>
#include <vector>

namespace moeperf::cli {

class Ranks {
 public:
  virtual ~Ranks() = default;
  virtual int rank() const { return 0; }
  virtual int size() const { return 1; }
  // Rank 0's `s` on every rank.
  virtual void broadcast(std::string& s) { (void)s; }
  // Point-to-point, to and from rank 0 only, in order per pair of ranks.
  virtual void send_to_root(const std::string& s) { (void)s; }
  virtual std::string receive_from(int rank);  // a single process has no other rank: logic_error
  // Every rank's `s`, in rank order, on rank 0 (empty elsewhere).
  virtual std::vector<std::string> gather(const std::string& s) { return {s}; }
  // Whether `ok` holds on every rank (every rank must call it: the setup's verdict, so a failure
  // on one rank ends them all instead of leaving the others waiting for it).
  virtual bool all(bool ok) { return ok; }
};

// The process's ranks: a single process unless moeperf-mpi installed others.
Ranks& ranks();
void set_ranks(Ranks* r);

// "2 threads", or "3 processes x 2 threads" under several ranks: where a study ran.
std::string workers_text(int threads);

// Ranks under mpirun/srun/mpiexec, from the launcher's environment (0 or 1: not launched so).
int launcher_ranks();

// Runs the setup `f` on every rank, then agrees: when it failed anywhere, the ranks where it threw
// rethrow (their message printed as usual) and the others return `quiet` (true) so that the caller
// exits with the same code without a second message.
template <class F>
bool agree(F&& f) {
  std::exception_ptr err;
  try {
    f();
  } catch (...) {
    err = std::current_exception();
  }
  if (ranks().all(!err)) return false;
  if (err) std::rethrow_exception(err);
  return true;
}

}  // namespace moeperf::cli
