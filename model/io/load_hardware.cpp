// Loading hardware: GPUs, CPUs, NICs, switches, compute trays, NVLink domains, fat trees and the
// systems composed of them (topologies/), each building block inline or by reference.
#include <cstdio>
#include <algorithm>
#include <numeric>
#include <sstream>

#include "model/io/detail/parsers.h"
#include "model/io/load.h"

namespace moeperf::io {
namespace detail {

// ------------------------------------------------------------------ hardware
std::pair<int, int> parse_cc(const Node& n) {
  const std::string s = n.as_string();
  int major = 0, minor = 0;
  char dot = 0;
  std::istringstream in(s);
  if (!(in >> major >> dot >> minor) || dot != '.' || major <= 0 || minor < 0)
    n.fail("expected a compute capability like \"9.0\", got \"" + s + "\"");
  return {major, minor};
}

GpuSpec parse_gpu(const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "compute_capability", "sms", "dense_flops", "hbm_capacity",
                "hbm_usable", "hbm_bandwidth", "nvlink"});
  GpuSpec g;
  g.name = n.at("name").as_string();
  std::tie(g.cc_major, g.cc_minor) = parse_cc(n.at("compute_capability"));
  g.sms = static_cast<int>(n.at("sms").as_positive_int());
  const Node f = n.at("dense_flops");
  f.allow_only({"bf16", "fp16", "fp8", "mxfp8", "nvfp4"});
  g.dense_bf16 = f.at("bf16").as_flop_rate();
  g.dense_fp8 = f.at("fp8").as_flop_rate();
  if (auto x = f.get("mxfp8")) g.dense_mxfp8 = x->as_flop_rate();
  if (auto x = f.get("nvfp4")) g.dense_nvfp4 = x->as_flop_rate();
  g.hbm_capacity = n.at("hbm_capacity").as_bytes();
  g.hbm_usable = n.at("hbm_usable").as_bytes();
  if (g.hbm_usable > g.hbm_capacity)
    n.at("hbm_usable").fail("usable HBM exceeds the nominal capacity (hbm_capacity)");
  g.hbm_bandwidth = n.at("hbm_bandwidth").as_bandwidth();
  const Node nv = n.at("nvlink");
  nv.allow_only({"generation", "links", "bandwidth_per_link"});
  g.nvlink_generation = static_cast<int>(nv.at("generation").as_positive_int());
  g.nvlink_links = static_cast<int>(nv.at("links").as_nonneg_int());
  g.nvlink_bandwidth_per_link = nv.at("bandwidth_per_link").as_bandwidth();
  return g;
}

CpuSpec parse_cpu(const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "memory", "memory_bandwidth", "gpu_link"});
  CpuSpec c;
  c.name = n.at("name").as_string();
  c.memory = n.at("memory").as_bytes();
  c.memory_bandwidth = n.at("memory_bandwidth").as_bandwidth();
  const Node l = n.at("gpu_link");
  l.allow_only({"name", "bandwidth_bidirectional"});
  c.gpu_link_name = l.at("name").as_string();
  c.gpu_link_bidirectional = l.at("bandwidth_bidirectional").as_bandwidth();
  return c;
}

NicSpec parse_nic(const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "port_bandwidth", "host_link"});
  NicSpec c;
  c.name = n.at("name").as_string();
  c.port_bandwidth = n.at("port_bandwidth").as_bandwidth();
  const Node l = n.at("host_link");
  l.allow_only({"name", "bandwidth"});
  c.host_link_name = l.at("name").as_string();
  c.host_link_bandwidth = l.at("bandwidth").as_bandwidth();
  return c;
}

SwitchSpec parse_switch(const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "ports", "port_bandwidth", "latency", "routing"});
  SwitchSpec s;
  s.name = n.at("name").as_string();
  s.ports = static_cast<int>(n.at("ports").as_positive_int());
  s.port_bandwidth = n.at("port_bandwidth").as_bandwidth();
  s.latency = n.at("latency").as_time();
  if (auto r = n.get("routing")) {
    // "adaptive" | "static_ecmp", or {"value": ..., "source": ...}.
    const Node v = r->is_object() ? r->at("value") : *r;
    if (r->is_object()) r->allow_only({"value", "source"});
    s.adaptive_routing = v.as_enum<bool>({{"adaptive", true}, {"static_ecmp", false}});
  }
  return s;
}

ComputeTraySpec parse_tray(Refs& refs, const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "gpu", "gpus", "cpu", "cpus", "nic", "nics"});
  ComputeTraySpec t;
  t.name = n.at("name").as_string();
  t.gpu = refs.follow(n.at("gpu"), "gpu", parse_gpu);
  t.gpus = static_cast<int>(n.at("gpus").as_positive_int());
  t.cpus = static_cast<int>(n.positive_int_or("cpus", 0));
  if (t.cpus > 0) t.cpu = refs.follow(n.at("cpu"), "cpu", parse_cpu);
  if (auto nics = n.get("nics")) {
    t.nics = static_cast<int>(nics->as_nonneg_int());
    if (t.nics != 0 && t.nics != t.gpus)
      nics->fail("expected one NIC per GPU (" + std::to_string(t.gpus) + "), got " + std::to_string(t.nics));
    if (t.nics > 0) t.nic = refs.follow(n.at("nic"), "nic", parse_nic);
  }
  if (t.cpus > 0 && t.gpus % t.cpus != 0)
    n.at("cpus").fail("expected a CPU count that divides the tray's " + std::to_string(t.gpus) + " GPUs");
  return t;
}

NvlinkDomainSpec parse_domain(Refs& refs, const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "tray", "trays", "switch", "switch_chips", "gpu_links_per_chip",
                "nvlink_latency", "transport"});
  NvlinkDomainSpec d;
  d.name = n.at("name").as_string();
  d.tray = refs.follow(n.at("tray"), "compute_tray", [&](const Node& x) { return parse_tray(refs, x); });
  d.trays = static_cast<int>(n.at("trays").as_positive_int());
  d.switch_chips = static_cast<int>(n.at("switch_chips").as_nonneg_int());
  if (d.switch_chips > 0) {
    d.nvswitch = refs.follow(n.at("switch"), "switch", parse_switch);
    const Node l = n.at("gpu_links_per_chip");
    if (l.is_array()) {
      if (l.size() != static_cast<size_t>(d.switch_chips))
        l.fail("expected one entry per switch chip (" + std::to_string(d.switch_chips) + "), got " +
               std::to_string(l.size()));
      for (size_t i = 0; i < l.size(); ++i) d.gpu_links_per_chip.push_back(static_cast<int>(l[i].as_nonneg_int()));
    } else {
      d.gpu_links_per_chip.assign(static_cast<size_t>(d.switch_chips), static_cast<int>(l.as_positive_int()));
    }
    const int sum = std::accumulate(d.gpu_links_per_chip.begin(), d.gpu_links_per_chip.end(), 0);
    if (sum != d.tray.gpu.nvlink_links)
      l.fail("the links per chip add up to " + std::to_string(sum) + ", but the GPU (" + d.tray.gpu.name + ") has " +
             std::to_string(d.tray.gpu.nvlink_links) + " NVLink links");
    d.nvlink_latency = n.at("nvlink_latency").as_time();
    // Every GPU of the domain reaches every chip: a chip needs a port per GPU link it takes.
    const int most = *std::max_element(d.gpu_links_per_chip.begin(), d.gpu_links_per_chip.end());
    if (d.nvswitch && static_cast<int64_t>(most) * d.gpus() > d.nvswitch->ports)
      l.fail("a switch chip takes " + std::to_string(most) + " link(s) from each of the domain's " + std::to_string(d.gpus()) +
             " GPUs, " + std::to_string(static_cast<int64_t>(most) * d.gpus()) + " ports, but the switch (" + d.nvswitch->name +
             ") has " + std::to_string(d.nvswitch->ports));
  }
  if (d.switch_chips == 0 && d.gpus() > 1)
    n.at("switch_chips").fail("expected NVSwitch chips for a domain of " + std::to_string(d.gpus()) +
                              " GPUs (moeperf joins a domain's GPUs through its switch chips, and has no model of "
                              "GPUs linked to each other directly; 0 is for a domain of one GPU), got 0");
  if (auto t = n.get("transport")) {
    const std::string v = t->as_string();
    if (v != "nvlink" && v != "host_memory") t->fail("expected \"nvlink\" or \"host_memory\", got \"" + v + "\"");
    d.host_memory = v == "host_memory";
    if (d.host_memory && d.switch_chips == 0) t->fail("expected a switch for a host-memory transport (the ranks' exchange rate is its port)");
  }
  return d;
}

FatTreeSpec parse_fat_tree(Refs& refs, const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "switch", "tiers", "rail_optimized", "nic_to_leaf_latency"});
  FatTreeSpec f;
  f.name = n.at("name").as_string();
  f.sw = refs.follow(n.at("switch"), "switch", parse_switch);
  if (f.sw.ports < 2 || f.sw.ports % 2 != 0) n.at("switch").fail("a fat-tree switch needs an even port count");
  if (auto t = n.get("tiers")) {
    if (t->is_string()) {
      if (t->as_string() != "auto") t->fail("expected 2, 3 or \"auto\", got \"" + t->as_string() + "\"");
      f.tiers = FatTreeTiers::automatic;
    } else {
      const int64_t v = t->as_positive_int();
      if (v != 2 && v != 3) t->fail("expected 2, 3 or \"auto\", got " + std::to_string(v));
      f.tiers = v == 2 ? FatTreeTiers::two : FatTreeTiers::three;
    }
  }
  f.rail_optimized = n.bool_or("rail_optimized", true);
  f.nic_to_leaf_latency = n.at("nic_to_leaf_latency").as_time();
  return f;
}

SystemSpec parse_system(Refs& refs, const Node& n) {
  n.allow_only({"kind", "name", "source", "note", "description", "nvlink_domain", "fabric", "gpus", "placement", "power",
                "price"});
  SystemSpec s;
  s.name = n.at("name").as_string();
  s.description = n.string_or("description", "");
  s.domain = refs.follow(n.at("nvlink_domain"), "nvlink_domain", [&](const Node& x) { return parse_domain(refs, x); });
  if (auto f = n.get("fabric")) {
    s.fabric = refs.follow(*f, "fat_tree", [&](const Node& x) { return parse_fat_tree(refs, x); });
    // The fabric's ports are the trays' NICs: a tray without one would leave its domain unreachable.
    if (s.domain.tray.nics == 0)
      f->fail("expected compute trays with NICs for a scale-out fabric (the tray \"" + s.domain.tray.name +
              "\" has none: give it \"nics\" and \"nic\", or leave the fabric out)");
  }
  s.default_gpus = n.positive_int_or("gpus", s.domain.gpus());
  s.gpus_per_domain_when_spanning = s.domain.gpus();
  if (auto p = n.get("placement")) {
    p->allow_only({"gpus_per_domain", "note"});
    if (auto g = p->get("gpus_per_domain")) {
      const int64_t v = g->as_positive_int();
      if (v > s.domain.gpus())
        g->fail("expected at most the domain's " + std::to_string(s.domain.gpus()) + " GPUs, got " + std::to_string(v));
      s.gpus_per_domain_when_spanning = static_cast<int>(v);
    }
  }
  // Power: per GPU, or one node's (compute tray's) or one rack's (NVLink domain's) over its GPUs.
  if (auto pw = n.get("power")) {
    pw->allow_only({"per_gpu", "per_node", "per_rack", "source", "note"});
    const int given = pw->has("per_gpu") + pw->has("per_node") + pw->has("per_rack");
    if (given != 1) pw->fail("expected exactly one of \"per_gpu\", \"per_node\" or \"per_rack\"");
    char buf[96];
    if (auto x = pw->get("per_gpu")) {
      s.power_price.watts_per_gpu = x->as_power();
      std::snprintf(buf, sizeof buf, "%.0f W per GPU", s.power_price.watts_per_gpu->value());
    } else {
      const bool node = pw->has("per_node");
      const Watts w = pw->at(node ? "per_node" : "per_rack").as_power();
      const int gpus = node ? s.domain.tray.gpus : s.domain.gpus();
      s.power_price.watts_per_gpu = w / static_cast<double>(gpus);
      std::snprintf(buf, sizeof buf, "%.1f kW per %s of %d GPUs", w.value() / 1e3, node ? "node" : "rack", gpus);
    }
    s.power_price.power_basis = buf;
    if (auto note = pw->get("note")) s.power_price.power_basis += ", " + note->as_string();
  }
  if (auto pr = n.get("price")) {
    pr->allow_only({"usd_per_gpu_hour", "source", "note"});
    const Node v = pr->at("usd_per_gpu_hour");
    const double usd = v.as_number();
    if (!(usd > 0)) v.fail("expected a positive price in US dollars per GPU-hour, got " + v.raw().dump());
    s.power_price.usd_per_gpu_hour = usd;
    char buf[64];
    std::snprintf(buf, sizeof buf, "$%.2f per GPU-hour", usd);
    s.power_price.price_basis = buf;
    if (auto note = pr->get("note")) s.power_price.price_basis += ", " + note->as_string();
  }
  if (s.default_gpus > s.domain.gpus() && !s.fabric)
    n.at("gpus").fail("expected at most the domain's " + std::to_string(s.domain.gpus()) +
                      " GPUs: this system has no fabric");
  return s;
}


}  // namespace detail

using namespace detail;

SystemSpec load_system(const std::string& path) {
  Refs refs;
  const Node root = refs.open(path);
  refs.push(path);
  root.expect_object();
  if (!root.has("kind") || root.at("kind").as_string() != "system")
    root.fail("expected a system file (\"kind\": \"system\")");
  return parse_system(refs, root);
}


}  // namespace moeperf::io
