// Writing outputs whole: the CLI's --out/--trace/--dot files and the executor's measurements.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace moeperf::io {

// The file a path names for writing: a symbolic link is followed (a chain of them too, a dangling
// one to where it points), so that its target is written and the link kept. A chain that does not
// end (a loop) is an InputError naming the path.
std::string output_target(const std::string& path);

// Writes every (path, content) only once all are whole: each to a temporary of its own beside its
// target (mkstemp: never a user's "X.tmp"), written through its descriptor and checked, given the
// target's mode when it exists (else what the umask gives a new file), then all renamed into place.
// On any failure every temporary is removed and std::runtime_error names the path and the reason;
// nothing is renamed until every file is written. MOEPERF_FAULT_WRITE=kill (tests) kills the
// process halfway through the first file's write.
// A target this process has read an input from (read_json_file notes each file it reads: a
// scenario's model, system and stack files, measurements, grids) is refused with an InputError
// naming it, before anything is written: an output over an input destroys what it came from.
void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files);

// Notes that this process read `path` as an input (see write_files_atomically).
void note_input_file(const std::string& path);
// Throws that InputError when `path` names a file noted as an input.
void check_not_input(const std::string& path);

}  // namespace moeperf::io
