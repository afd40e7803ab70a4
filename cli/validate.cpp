// moeperf validate: files checked (systems, models, scenarios, building blocks); exit 2 if any is wrong.
#include "cli/commands.h"

#include <iostream>
#include "model/error.h"

namespace moeperf::cli {
namespace {

int cmd_validate(const std::vector<std::string>& files) {
  int bad = 0;
  for (const std::string& f : files) {
    try {
      const io::Validated v = io::validate_file(f);
      std::cout << "ok     " << f << "  [" << v.kind << "] " << v.summary << "\n";
    } catch (const InputError& e) {
      std::cerr << "error  " << e.what() << "\n";
      ++bad;
    }
  }
  if (bad) std::cerr << bad << " of " << files.size() << " file" << (files.size() > 1 ? "s" : "") << " failed\n";
  return bad ? kExitBadInput : kExitOk;
}

}  // namespace

Command add_validate(CLI::App& app) {
  auto files = std::make_shared<std::vector<std::string>>();
  auto* sub = app.add_subcommand("validate", "Check files (systems, models, scenarios, building blocks); exit 2 if any is wrong");
  sub->add_option("FILE", *files, "files to check")->required();
  return {sub, [files] { return cmd_validate(*files); }};
}

}  // namespace moeperf::cli
