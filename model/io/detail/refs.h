// Internal to model/io: following a field that names another file (or holds an inline object):
// paths resolve relative to the naming file, parsed files are cached, reference cycles are refused
// and a file of the wrong kind is reported at the referencing field.
#pragma once

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/io/detail/json_node.h"

namespace moeperf::io::detail {

namespace fs = std::filesystem;

class Refs {
 public:
  // The root node of a file opened directly (not through a reference).
  Node open(const std::string& path) {
    const std::string key = canonical(path);
    return Node(doc(path, key), path, "");
  }

  // Follows `field`: a path (relative to the file holding the field) or an inline object.
  // Calls parse(node) with the referenced root while the file is on the stack.
  template <class F>
  auto follow(const Node& field, const char* kind, F parse) {
    if (field.is_object()) {
      check_kind(field, kind, /*required=*/false);
      return parse(field);
    }
    if (!field.is_string())
      field.fail(std::string("expected a path to a \"") + kind + "\" file or an inline object, got " +
                 field.raw().dump());
    const std::string rel = field.as_string();
    const fs::path base = fs::path(field.file()).parent_path();
    const fs::path target = base / rel;
    std::error_code ec;
    if (!fs::is_regular_file(target, ec))
      field.fail("referenced file \"" + rel + "\" " +
                 (fs::is_directory(target, ec) ? "is a directory" : fs::exists(target, ec) ? "is not a regular file" : "not found") +
                 " (looked for " + target.lexically_normal().string() + ")");
    const std::string key = canonical(target.string());
    if (std::find(stack_.begin(), stack_.end(), key) != stack_.end()) {
      std::string chain;
      auto it = std::find(stack_.begin(), stack_.end(), key);
      for (; it != stack_.end(); ++it) chain += fs::path(*it).filename().string() + " -> ";
      field.fail("reference cycle: " + chain + fs::path(key).filename().string());
    }
    const std::string shown = target.lexically_normal().string();
    Node root(doc(shown, key), shown, "");
    check_kind(root, kind, /*required=*/true, &field);
    stack_.push_back(key);
    struct Pop {
      std::vector<std::string>& s;
      ~Pop() { s.pop_back(); }
    } pop{stack_};
    return parse(root);
  }

  // Marks a file as being loaded (the top-level file), for cycle detection.
  void push(const std::string& path) { stack_.push_back(canonical(path)); }

 private:
  static std::string canonical(const std::string& p) {
    std::error_code ec;
    fs::path c = fs::weakly_canonical(p, ec);
    return ec ? p : c.string();
  }
  const json& doc(const std::string& shown, const std::string& key) {
    auto it = cache_.find(key);
    if (it == cache_.end())
      it = cache_.emplace(key, std::make_unique<json>(detail::read_json_file(shown))).first;
    return *it->second;
  }
  // A mismatch is reported at the referencing field when there is one (the user's mistake is there).
  static void check_kind(const Node& n, const char* kind, bool required, const Node* referrer = nullptr) {
    n.expect_object();
    auto k = n.get("kind");
    if (!k) {
      const bool hf_model = std::string(kind) == "model" && n.has("model_type");
      if (required && !hf_model) n.fail(std::string("missing required field \"kind\" (expected \"") + kind + "\")");
      return;
    }
    if (k->as_string() != kind && referrer)
      referrer->fail("expected a path to a \"" + std::string(kind) + "\" file, but \"" + referrer->as_string() +
                     "\" is a \"" + k->as_string() + "\"");
    if (k->as_string() != kind)
      k->fail(std::string("expected a \"") + kind + "\" here, got a \"" + k->as_string() + "\"");
  }
  std::map<std::string, std::unique_ptr<json>> cache_;
  std::vector<std::string> stack_;
};

}  // namespace moeperf::io::detail
