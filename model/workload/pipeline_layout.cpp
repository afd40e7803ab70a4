#include "model/workload/pipeline_layout.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

#include "model/limits.h"
#include "model/workload/step.h"

namespace moeperf {
namespace {

// Letters and separators: at most one of each per layer and stage (model/limits.h) and a margin.
constexpr int64_t kMaxExpanded = 4 * limits::kLayers;

// Expands "(...)*n" (innermost first) and "X*n".
std::string expand(std::string t) {
  auto count_at = [&](size_t pos, size_t* end) {
    size_t e = pos;
    while (e < t.size() && std::isdigit(static_cast<unsigned char>(t[e]))) ++e;
    if (e == pos) throw std::invalid_argument("expected a count after '*' at character " + std::to_string(pos + 1));
    if (e - pos > 6) throw std::invalid_argument("repeat count " + t.substr(pos, e - pos) + " out of range");
    const int n = std::stoi(t.substr(pos, e - pos));
    if (n < 1 || n > 100000) throw std::invalid_argument("repeat count " + std::to_string(n) + " out of range");
    *end = e;
    return n;
  };
  for (;;) {
    const size_t close = t.find(')');
    if (close == std::string::npos) break;
    const size_t open = t.rfind('(', close);
    if (open == std::string::npos) throw std::invalid_argument("')' without '(' at character " + std::to_string(close + 1));
    if (close + 1 >= t.size() || t[close + 1] != '*')
      throw std::invalid_argument("a group \"(...)\" must be followed by '*n' (character " + std::to_string(close + 2) + ")");
    size_t end = 0;
    const int n = count_at(close + 2, &end);
    // Every letter is a layer or marks a stage: a layout past the layer limit is no real model's.
    if (static_cast<int64_t>(close - open - 1) * n + static_cast<int64_t>(t.size()) > kMaxExpanded)
      throw std::invalid_argument("the layout expands past " + std::to_string(kMaxExpanded) + " characters");
    std::string rep;
    for (int i = 0; i < n; ++i) rep += t.substr(open + 1, close - open - 1);
    t = t.substr(0, open) + rep + t.substr(end);
  }
  if (t.find('(') != std::string::npos) throw std::invalid_argument("'(' without ')'");
  for (size_t star = t.find('*'); star != std::string::npos; star = t.find('*')) {
    if (star == 0 || t[star - 1] == '|') throw std::invalid_argument("'*' must follow a letter or a group");
    size_t end = 0;
    const int n = count_at(star + 1, &end);
    if (static_cast<int64_t>(n) + static_cast<int64_t>(t.size()) > kMaxExpanded)
      throw std::invalid_argument("the layout expands past " + std::to_string(kMaxExpanded) + " characters");
    t = t.substr(0, star - 1) + std::string(static_cast<size_t>(n), t[star - 1]) + t.substr(end);
  }
  return t;
}

// n layers over V stages as evenly as consecutive runs allow: stage v takes the layers l with
// floor(l V / n) = v, so the shorter stages are spread out (61 over 32: stages 10, 21 and 31 hold one).
std::vector<int> even_split(int n, int V) {
  std::vector<int> k(static_cast<size_t>(V), 0);
  for (int l = 0; l < n; ++l) ++k[static_cast<size_t>(static_cast<int64_t>(l) * V / n)];
  return k;
}

// Layers per virtual stage as a layout: the embedding first, the loss and `mtp` MTP modules last.
std::vector<VirtualStageLayout> with_ends(const std::vector<int>& k, int mtp) {
  std::vector<VirtualStageLayout> out(k.size());
  for (size_t v = 0; v < k.size(); ++v) out[v].layers = k[v];
  out.front().embedding = true;
  out.back().loss = true;
  out.back().mtp = mtp;
  return out;
}

}  // namespace

namespace {

// The groups and counts of the text as the user wrote it, checked before anything is expanded, so
// that a position names a character of that text: every ')' closes a '(' and is followed by '*n',
// every '*' by a count.
void check_groups(std::string_view text) {
  std::vector<size_t> open;
  auto next_visible = [&](size_t i) {
    while (i < text.size() && (std::isspace(static_cast<unsigned char>(text[i])) || text[i] == ',')) ++i;
    return i;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '(') open.push_back(i);
    if (c == ')') {
      if (open.empty()) throw std::invalid_argument("')' without '(' at character " + std::to_string(i + 1));
      open.pop_back();
      const size_t star = next_visible(i + 1);
      if (star >= text.size() || text[star] != '*')
        throw std::invalid_argument("the group closed at character " + std::to_string(i + 1) + " must be followed by '*n'");
    }
    if (c == '*') {
      const size_t digit = next_visible(i + 1);
      if (digit >= text.size() || !std::isdigit(static_cast<unsigned char>(text[digit])))
        throw std::invalid_argument("expected a count after '*' at character " + std::to_string(i + 1));
    }
  }
  if (!open.empty()) throw std::invalid_argument("'(' at character " + std::to_string(open.back() + 1) + " without ')'");
}

}  // namespace

std::vector<VirtualStageLayout> parse_pipeline_layout(std::string_view text) {
  // Megatron's syntax (--pipeline-model-parallel-layout): whitespace, and commas used cosmetically
  // ("E|(t|)*3,m|m||L"), are not part of the layout.
  check_groups(text);
  std::string t;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c)) && c != ',') t += c;
  if (t.empty()) throw std::invalid_argument("empty layout");
  t = expand(t);
  std::vector<VirtualStageLayout> out(1);
  for (char c : t) {
    VirtualStageLayout& v = out.back();
    const std::string stage = "virtual stage " + std::to_string(out.size() - 1);
    switch (c) {
      case '|': out.emplace_back(); break;
      case 'E':
        if (v.embedding) throw std::invalid_argument("the embedding (E) twice on " + stage);
        if (v.layers > 0 || v.mtp > 0 || v.loss) throw std::invalid_argument("the embedding (E) after a layer on " + stage + "; it comes first");
        v.embedding = true;
        break;
      case 't':
        if (v.mtp > 0 || v.loss) throw std::invalid_argument("a layer (t) after an MTP module or the loss on " + stage);
        ++v.layers;
        break;
      case 'm':
        if (v.loss) throw std::invalid_argument("an MTP module (m) after the loss on " + stage);
        ++v.mtp;
        break;
      case 'L':
        if (v.loss) throw std::invalid_argument("the loss (L) twice on " + stage);
        v.loss = true;
        break;
      default:
        throw std::invalid_argument(std::string("unknown letter '") + c +
                                    "': a layout is made of E (embedding), t (layer), m (MTP module), L (loss), "
                                    "'|' between virtual stages, X*n and (...)*n");
    }
  }
  return out;
}

std::vector<VirtualStageLayout> effective_layout(const Scenario& s) {
  if (!s.parallelism.layout.empty()) return s.parallelism.layout;
  return with_ends(even_split(s.model.layers, virtual_stages(s)), s.train_mtp ? s.model.mtp_layers : 0);
}

std::string pipeline_layout_problem(const Scenario& s) {
  const auto& lay = s.parallelism.layout;
  if (lay.empty()) return "";
  const int want = virtual_stages(s);
  if (static_cast<int>(lay.size()) != want)
    return "the layout has " + std::to_string(lay.size()) + " virtual stages; this schedule with pp = " +
           std::to_string(s.parallelism.pp) +
           (s.parallelism.schedule == PipelineSchedule::interleaved ? " and vpp = " + std::to_string(s.parallelism.vpp) : "") +
           " runs " + std::to_string(want);
  int layers = 0, mtp = 0, emb = 0, loss = 0;
  for (size_t v = 0; v < lay.size(); ++v) {
    layers += lay[v].layers;
    mtp += lay[v].mtp;
    emb += lay[v].embedding;
    loss += lay[v].loss;
    if (lay[v].embedding && v != 0) return "the embedding (E) is on virtual stage " + std::to_string(v) + "; it must be on the first";
    if (lay[v].loss && v + 1 != lay.size())
      return "the loss (L) is on virtual stage " + std::to_string(v) + "; it must be on the last (" +
             std::to_string(lay.size() - 1) + ")";
    if (lay[v].mtp > 0 && v + 1 != lay.size())
      return "MTP modules (m) are on virtual stage " + std::to_string(v) + "; moeperf runs them after the main head, on the last";
  }
  if (emb != 1) return "the layout needs the embedding (E) once, on the first virtual stage; it has it " + std::to_string(emb) + " times";
  if (loss != 1) return "the layout needs the loss (L) once, on the last virtual stage; it has it " + std::to_string(loss) + " times";
  if (layers != s.model.layers)
    return "the layout places " + std::to_string(layers) + " layers (t); model '" + s.model.name + "' has " +
           std::to_string(s.model.layers);
  if (mtp > 0 && !s.train_mtp) return "the layout places " + std::to_string(mtp) + " MTP modules (m) but train_mtp is false";
  if (mtp > 0 && mtp != s.model.mtp_layers)
    return "the layout places " + std::to_string(mtp) + " MTP modules (m); model '" + s.model.name + "' has " +
           std::to_string(s.model.mtp_layers);
  return "";
}

std::string describe_virtual_stage(const VirtualStageLayout& v, int first_layer) {
  std::string out;
  auto add = [&](const std::string& x) { out += (out.empty() ? "" : " ") + x; };
  if (v.embedding) add("E");
  if (v.layers == 1) add(std::to_string(first_layer));
  if (v.layers > 1) add(std::to_string(first_layer) + "-" + std::to_string(first_layer + v.layers - 1));
  if (v.mtp > 0) add(v.mtp == 1 ? "m" : std::to_string(v.mtp) + "m");
  if (v.loss) add("L");
  return out.empty() ? "-" : out;
}

std::vector<std::vector<std::string>> stage_layout_descriptions(const Scenario& s) {
  const std::vector<VirtualStageLayout> lay = effective_layout(s);
  std::vector<int> first(lay.size(), 0);
  for (size_t v = 1; v < lay.size(); ++v) first[v] = first[v - 1] + lay[v - 1].layers;
  std::vector<std::vector<std::string>> out(static_cast<size_t>(s.parallelism.pp));
  for (int st = 0; st < s.parallelism.pp; ++st)
    for (int c = 0; c < pipeline_chunks(s); ++c) {
      const auto v = static_cast<size_t>(virtual_stage(s, st, c));
      out[static_cast<size_t>(st)].push_back(describe_virtual_stage(lay[v], first[v]));
    }
  return out;
}

namespace {

std::string stage_letters(const VirtualStageLayout& v) {
  std::string out;
  if (v.embedding) out += 'E';
  out += v.layers > 2 ? "t*" + std::to_string(v.layers) : std::string(static_cast<size_t>(v.layers), 't');
  out += v.mtp > 2 ? "m*" + std::to_string(v.mtp) : std::string(static_cast<size_t>(v.mtp), 'm');
  if (v.loss) out += 'L';
  return out;
}

}  // namespace

std::string format_pipeline_layout(const std::vector<VirtualStageLayout>& layout) {
  std::string out;
  const size_t n = layout.size();
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && layout[j] == layout[i]) ++j;
    const std::string x = stage_letters(layout[i]);
    // A run of two or more followed by another stage: "(x|)*k", which ends on the separator; one
    // of three or more that ends the layout: "(x|)*(k-1)x".
    if (j - i >= 2 && j < n) {
      out += "(" + x + "|)*" + std::to_string(j - i);
      i = j;
      continue;
    }
    if (j - i >= 3) {
      out += "(" + x + "|)*" + std::to_string(j - i - 1) + x;
      i = j;
      continue;
    }
    // A run that ends the layout (or a single stage): written out, one '|' between stages.
    for (; i < j; ++i) out += x + (i + 1 < n ? "|" : "");
  }
  return out;
}

namespace {

// Layers per virtual stage of the least-maximum split (then least sum of squares; ties to the
// fuller earlier stages): exact dynamic programming.
std::vector<int> min_max_split(const std::vector<double>& layer_cost, double embedding_cost, double tail_cost,
                               int virtual_stages, const std::vector<int>& max_layers) {
  const int n = static_cast<int>(layer_cost.size());
  const int V = virtual_stages;
  std::vector<double> prefix(static_cast<size_t>(n) + 1, 0.0);
  for (int l = 0; l < n; ++l) prefix[static_cast<size_t>(l) + 1] = prefix[static_cast<size_t>(l)] + layer_cost[static_cast<size_t>(l)];
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Stage v holding layers [a, b); more than its cap is no split.
  auto cost = [&](int v, int a, int b) {
    if (!max_layers.empty() && b - a > max_layers[static_cast<size_t>(v)]) return kInf;
    return prefix[static_cast<size_t>(b)] - prefix[static_cast<size_t>(a)] + (v == 0 ? embedding_cost : 0.0) +
           (v == V - 1 ? tail_cost : 0.0);
  };
  const auto idx = [n](int v, int i) { return static_cast<size_t>(v) * static_cast<size_t>(n + 1) + static_cast<size_t>(i); };
  // best[v][i]: the least maximum over stages 0..v holding layers [0, i).
  std::vector<double> best(static_cast<size_t>(V) * static_cast<size_t>(n + 1), kInf);
  for (int i = 0; i <= n; ++i) best[idx(0, i)] = cost(0, 0, i);
  for (int v = 1; v < V; ++v)
    for (int i = 0; i <= n; ++i)
      for (int a = 0; a <= i; ++a) best[idx(v, i)] = std::min(best[idx(v, i)], std::max(best[idx(v - 1, a)], cost(v, a, i)));
  const double top = best[idx(V - 1, n)];
  if (top == kInf) throw std::invalid_argument("no split of the layers keeps every stage within its cap");
  const double cap = top * (1 + 1e-9) + 1e-300;
  // Second pass: the least sum of squares with every stage within the cap; from[v][i] the start of
  // stage v. Ties keep the largest start (earlier stages fuller).
  std::vector<double> sq(best.size(), kInf);
  std::vector<int> from(best.size(), -1);
  for (int i = 0; i <= n; ++i)
    if (const double c = cost(0, 0, i); c <= cap) sq[idx(0, i)] = c * c, from[idx(0, i)] = 0;
  for (int v = 1; v < V; ++v)
    for (int i = 0; i <= n; ++i)
      for (int a = 0; a <= i; ++a) {
        const double c = cost(v, a, i);
        if (c > cap || sq[idx(v - 1, a)] == kInf) continue;
        const double x = sq[idx(v - 1, a)] + c * c;
        if (x <= sq[idx(v, i)] * (1 + 1e-12)) sq[idx(v, i)] = std::min(x, sq[idx(v, i)]), from[idx(v, i)] = a;
      }
  std::vector<int> out(static_cast<size_t>(V));
  for (int v = V - 1, i = n; v >= 0; --v) {
    const int a = from[idx(v, i)];
    if (a < 0) throw std::invalid_argument("no split of the layers keeps every stage's cost finite");
    out[static_cast<size_t>(v)] = i - a;
    i = a;
  }
  return out;
}

class MultiChunkSearch {
 public:
  MultiChunkSearch(const std::vector<double>& layer_cost, double embedding_cost, double tail_cost,
                   const std::vector<std::vector<int>>& gpu_stages, const std::vector<int>& max_layers, bool paired)
      : e_(embedding_cost), tail_(tail_cost), gpus_(gpu_stages), max_(max_layers), prefix_(layer_cost.size() + 1, 0.0),
        paired_(paired) {
    for (size_t l = 0; l < layer_cost.size(); ++l) prefix_[l + 1] = prefix_[l] + layer_cost[l];
  }

  // Each virtual stage's cost under split k, into `stage`.
  void stage_costs(const std::vector<int>& k, std::vector<double>& stage) const {
    const size_t V = k.size();
    stage.resize(V);
    size_t l = 0;
    for (size_t v = 0; v < V; ++v) {
      const size_t end = l + static_cast<size_t>(k[v]);
      stage[v] = prefix_[end] - prefix_[l] + (v == 0 ? e_ : 0.0) + (v + 1 == V ? tail_ : 0.0);
      l = end;
    }
  }

  double gpu_sum(const std::vector<int>& g, const std::vector<double>& stage) const {
    return pipeline_gpu_cost(g, stage, paired_);
  }

  // The GPUs' costs from the largest down, then the virtual stages' (compared in that order).
  std::vector<double> key(const std::vector<int>& k) const {
    std::vector<double> stage, out;
    stage_costs(k, stage);
    for (const auto& g : gpus_) out.push_back(gpu_sum(g, stage));
    std::sort(out.begin(), out.end(), std::greater<>());
    std::sort(stage.begin(), stage.end(), std::greater<>());
    out.insert(out.end(), stage.begin(), stage.end());
    return out;
  }

  bool within_caps(const std::vector<int>& k) const {
    for (size_t v = 0; v < k.size() && !max_.empty(); ++v)
      if (k[v] > max_[v]) return false;
    return true;
  }

  static bool better(const std::vector<double>& a, const std::vector<double>& b) {
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (a[i] < b[i] * (1 - 1e-9)) return true;
      if (a[i] > b[i] * (1 + 1e-9)) return false;
    }
    return false;
  }

  // Its busiest GPU's sum, the key's first element, without sorting: most moves are refused on it
  // alone.
  double busiest(const std::vector<int>& k, std::vector<double>& stage) const {
    stage_costs(k, stage);
    double most = 0;
    for (const auto& g : gpus_) most = std::max(most, gpu_sum(g, stage));
    return most;
  }

  // Steepest descent over single-layer moves: one layer less on stage a, one more on stage b (the
  // stages between shift by one layer), until no move lowers the key.
  std::vector<int> descend(std::vector<int> k) const {
    std::vector<double> now = key(k), stage;
    const size_t V = k.size();
    for (size_t iter = 0; iter < 8 * (prefix_.size() + V); ++iter) {
      std::vector<int> best_k;
      std::vector<double> best = now;
      for (size_t a = 0; a < V; ++a) {
        if (k[a] == 0) continue;
        for (size_t b = 0; b < V; ++b) {
          if (a == b || (!max_.empty() && k[b] >= max_[b])) continue;
          --k[a], ++k[b];
          if (busiest(k, stage) <= best.front() * (1 + 1e-9)) {
            std::vector<double> x = key(k);
            if (better(x, best)) best = std::move(x), best_k = k;
          }
          ++k[a], --k[b];
        }
      }
      if (best_k.empty()) break;
      k = std::move(best_k), now = std::move(best);
    }
    return k;
  }

  // Layers given to the GPU groups one at a time, each to the group that stays lowest at the mean
  // layer cost (its embedding and tail included), spread over the group's stages in order.
  std::vector<int> water_fill(int n, int V) const {
    std::vector<std::vector<int>> groups;
    for (auto g : gpus_) {
      std::sort(g.begin(), g.end());
      if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
    }
    const double w = n > 0 ? prefix_.back() / n : 0.0;
    std::vector<double> load(groups.size(), 0.0);
    for (size_t j = 0; j < groups.size(); ++j)
      for (int v : groups[j]) load[j] += (v == 0 ? e_ : 0.0) + (v == V - 1 ? tail_ : 0.0);
    std::vector<int> held(groups.size(), 0), k(static_cast<size_t>(V), 0);
    for (int l = 0; l < n; ++l) {
      size_t j = 0;
      for (size_t i = 1; i < groups.size(); ++i)
        if (load[i] + w < load[j] + w * (1 - 1e-12)) j = i;
      load[j] += w;
      const auto& g = groups[j];
      ++k[static_cast<size_t>(g[static_cast<size_t>(held[j]++) % g.size()])];
    }
    return k;
  }

 private:
  double e_, tail_;
  std::vector<std::vector<int>> gpus_;
  std::vector<int> max_;
  std::vector<double> prefix_;
  bool paired_;
};

}  // namespace

double pipeline_gpu_cost(const std::vector<int>& stages, const std::vector<double>& stage_cost, bool paired) {
  double sum = 0, most = 0;
  for (int v : stages) sum += stage_cost[static_cast<size_t>(v)], most = std::max(most, stage_cost[static_cast<size_t>(v)]);
  return paired ? sum + most : sum;
}

std::vector<VirtualStageLayout> balance_pipeline_layout(const std::vector<double>& layer_cost, double embedding_cost,
                                                        double tail_cost, int mtp, int virtual_stages,
                                                        const std::vector<std::vector<int>>& gpu_stages,
                                                        const std::vector<int>& max_layers, bool paired) {
  if (virtual_stages < 1) throw std::invalid_argument("a pipeline layout needs at least one virtual stage");
  auto ok = [](double c) { return std::isfinite(c) && c >= 0; };
  if (!ok(embedding_cost) || !ok(tail_cost) || !std::all_of(layer_cost.begin(), layer_cost.end(), ok))
    throw std::invalid_argument("a pipeline stage's cost must be finite and >= 0");
  const int n = static_cast<int>(layer_cost.size());
  const int V = virtual_stages;
  bool multi = false;
  for (const auto& g : gpu_stages) {
    multi = multi || g.size() > 1;
    for (int v : g)
      if (v < 0 || v >= V) throw std::invalid_argument("a GPU's virtual stage " + std::to_string(v) + " is out of range");
  }
  if (!max_layers.empty() && static_cast<int>(max_layers.size()) != V)
    throw std::invalid_argument("one layer cap per virtual stage, got " + std::to_string(max_layers.size()));
  std::vector<int> k = min_max_split(layer_cost, embedding_cost, tail_cost, V, max_layers);
  if (multi) {
    // Several virtual stages per GPU: the busiest GPU's sum sets the pace. From the least-maximum
    // split, the even one and the water-filled one (those within the caps), each descended; the
    // best key wins.
    const MultiChunkSearch search(layer_cost, embedding_cost, tail_cost, gpu_stages, max_layers, paired);
    std::vector<int> best = search.descend(k);
    std::vector<double> best_key = search.key(best);
    for (std::vector<int> start : {even_split(n, V), search.water_fill(n, V)}) {
      if (!search.within_caps(start)) continue;
      std::vector<int> x = search.descend(std::move(start));
      std::vector<double> xk = search.key(x);
      if (MultiChunkSearch::better(xk, best_key)) best = std::move(x), best_key = std::move(xk);
    }
    k = std::move(best);
  }
  return with_ends(k, mtp);
}

}  // namespace moeperf
