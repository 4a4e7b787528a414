// cache_policy: a trace simulator for the block cache's eviction policies.
//
// Drives the real policies of src/cache (through MakeEvictionPolicy) and Belady's MIN, computed
// here, over epoch and Zipf traces of equal-sized blocks, and prints per-epoch hit ratios and the
// goals the default policy must meet (exit status 1 when one fails, so a regression is visible).
//   cache_policy [--csv] [--blocks N] [--epochs N] [--cache F]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <queue>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/eviction_policy.h"

namespace lakecache {
namespace {

constexpr uint64_t kBlockBytes = uint64_t{4} << 20;
constexpr uint64_t kSeed = 1;
constexpr double kZipfSkew = 0.9;

struct Options {
  bool csv = false;
  uint64_t blocks = 2000;       // epoch workloads' dataset D; Zipf is over 10 x blocks
  int epochs = 5;               // epochs, or for Zipf equal windows of the trace
  double cache_fraction = 0.5;  // C/D of the epoch workloads; Zipf's cache is 5%
};

struct Workload {
  std::string name;
  std::string description;
  std::vector<uint32_t> trace;  // block ids in [0, distinct)
  uint64_t distinct = 0;
  uint64_t cache_blocks = 0;
  bool epoch_bound = false;  // every block read once per epoch: the C/D goal applies
};

struct Row {
  std::string workload;
  std::string policy;
  std::vector<double> hit_ratio;  // per epoch
};

std::vector<uint32_t> Iota(uint64_t n) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

Workload EpochWorkload(bool shuffled, const Options& opt) {
  const uint64_t blocks = opt.blocks;
  const auto cache = static_cast<uint64_t>(std::llround(opt.cache_fraction * blocks));
  Workload w{shuffled ? "shuffled" : "seq", "", {}, blocks, cache, true};
  std::mt19937_64 rng(kSeed);
  std::vector<uint32_t> order = Iota(blocks);
  for (int e = 0; e < opt.epochs; ++e) {
    if (shuffled) std::shuffle(order.begin(), order.end(), rng);
    w.trace.insert(w.trace.end(), order.begin(), order.end());
  }
  w.description = std::to_string(opt.epochs) + " epochs, " +
                  (shuffled ? "a new permutation each epoch" : "sequential scans") +
                  ", D=" + std::to_string(blocks) + " blocks, C=" + std::to_string(w.cache_blocks);
  return w;
}

// Zipf over 10 x `blocks` distinct blocks, ten accesses per block on average, cache 5%; equal
// windows of the trace stand for epochs.
Workload ZipfWorkload(const Options& opt) {
  const uint64_t n = 10 * opt.blocks;
  Workload w{"zipf", "", {}, n, n / 20, false};
  std::vector<double> cdf(n);
  double sum = 0;
  for (uint64_t k = 0; k < n; ++k) cdf[k] = sum += std::pow(static_cast<double>(k + 1), -kZipfSkew);
  std::mt19937_64 rng(kSeed);
  std::vector<uint32_t> id_of_rank = Iota(n);  // hot blocks scattered over the id space
  std::shuffle(id_of_rank.begin(), id_of_rank.end(), rng);
  std::uniform_real_distribution<double> uniform(0, sum);
  for (uint64_t i = 0; i < 10 * n; ++i) {
    const auto rank = std::lower_bound(cdf.begin(), cdf.end(), uniform(rng)) - cdf.begin();
    w.trace.push_back(id_of_rank[std::min<uint64_t>(rank, n - 1)]);
  }
  w.description = "Zipf(" + std::to_string(kZipfSkew).substr(0, 3) + ") over " + std::to_string(n) +
                  " blocks, " + std::to_string(w.trace.size()) + " accesses in " +
                  std::to_string(opt.epochs) + " windows, C=" + std::to_string(w.cache_blocks) +
                  " (5%)";
  return w;
}

// Hit counts per epoch to ratios; epoch e covers the e-th of `epochs` equal slices of the trace.
class EpochCounter {
 public:
  EpochCounter(size_t trace_size, int epochs)
      : len_((trace_size + epochs - 1) / epochs), hits_(epochs), total_(epochs) {}
  void Count(size_t i, bool hit) {
    hits_[i / len_] += hit;
    total_[i / len_] += 1;
  }
  std::vector<double> Ratios() const {
    std::vector<double> r;
    for (size_t e = 0; e < hits_.size(); ++e) {
      r.push_back(total_[e] ? static_cast<double>(hits_[e]) / total_[e] : 0);
    }
    return r;
  }

 private:
  size_t len_;
  std::vector<uint64_t> hits_, total_;
};

// A cache that holds exactly what the policy admitted and has not evicted.
std::vector<double> SimulatePolicy(std::string_view name, const Workload& w, int epochs) {
  auto made = MakeEvictionPolicy(name, w.cache_blocks * kBlockBytes, kSeed);
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
    std::exit(2);
  }
  EvictionPolicy& policy = **made;
  std::vector<char> held(w.distinct);
  std::vector<BlockKey> evict;
  EpochCounter counter(w.trace.size(), epochs);
  for (size_t i = 0; i < w.trace.size(); ++i) {
    const BlockKey key{ContentId{0x1a4e, 1}, w.trace[i]};
    counter.Count(i, held[key.index]);
    if (held[key.index]) {
      policy.OnHit(key);
      continue;
    }
    evict.clear();
    const bool admit = policy.OnMiss(key, kBlockBytes, &evict);
    for (const BlockKey& k : evict) {
      if (!held[k.index]) std::abort();  // the policy evicted a block it never admitted
      held[k.index] = 0;
    }
    held[key.index] = admit;
  }
  const auto held_count = static_cast<uint64_t>(std::count(held.begin(), held.end(), 1));
  if (policy.used_bytes() != held_count * kBlockBytes) std::abort();
  return counter.Ratios();
}

// Belady's MIN with bypass: on a miss with a full cache, evict the block reused furthest in the
// future, unless the new block itself is reused later still (then it is not admitted).
std::vector<double> SimulateBelady(const Workload& w, int epochs) {
  constexpr uint64_t kNever = UINT64_MAX - 1, kNotHeld = UINT64_MAX;
  const size_t n = w.trace.size();
  std::vector<uint64_t> next_use(n), upcoming(w.distinct, kNever);
  for (size_t i = n; i-- > 0;) {
    next_use[i] = upcoming[w.trace[i]];
    upcoming[w.trace[i]] = i;
  }
  std::vector<uint64_t> held_next(w.distinct, kNotHeld);    // next use of each held block
  std::priority_queue<std::pair<uint64_t, uint32_t>> heap;  // stale entries skipped lazily
  uint64_t held = 0;
  EpochCounter counter(n, epochs);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t b = w.trace[i];
    const bool hit = held_next[b] != kNotHeld;
    counter.Count(i, hit);
    if (!hit && held == w.cache_blocks) {
      while (held_next[heap.top().second] != heap.top().first) heap.pop();
      if (next_use[i] >= heap.top().first) continue;  // bypass
      held_next[heap.top().second] = kNotHeld;
      heap.pop();
      --held;
    }
    held += !hit;
    held_next[b] = next_use[i];
    heap.emplace(next_use[i], b);
  }
  return counter.Ratios();
}

struct Goal {
  std::string text;
  bool pass;
};

double Mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / v.size();
}
double MinFromEpoch2(const std::vector<double>& v) {
  return *std::min_element(v.begin() + 1, v.end());
}

const Row& Find(const std::vector<Row>& rows, const std::string& workload,
                std::string_view policy) {
  for (const Row& r : rows) {
    if (r.workload == workload && r.policy == policy) return r;
  }
  std::abort();
}

std::vector<Goal> CheckGoals(const std::vector<Workload>& workloads, const std::vector<Row>& rows) {
  std::vector<Goal> goals;
  char buf[256];
  const std::string def(kDefaultEvictionPolicy);
  for (const Workload& w : workloads) {
    const Row& d = Find(rows, w.name, def);
    if (w.epoch_bound) {
      const double bound = double(w.cache_blocks) / w.distinct, got = MinFromEpoch2(d.hit_ratio);
      std::snprintf(buf, sizeof(buf), "%s: %s from epoch 2 >= 0.9 x C/D = %.3f: worst %.3f",
                    w.name.c_str(), def.c_str(), 0.9 * bound, got);
      goals.push_back({buf, got >= 0.9 * bound});
      const double min = MinFromEpoch2(Find(rows, w.name, "belady").hit_ratio);
      if (w.name == "seq") {  // checks the simulator itself: MIN meets the bound exactly
        std::snprintf(buf, sizeof(buf), "seq: belady from epoch 2 == C/D = %.3f: worst %.3f", bound,
                      min);
        goals.push_back({buf, std::abs(min - bound) < 1e-9});
      }
    } else {
      const double lru = Mean(Find(rows, w.name, "lru").hit_ratio), got = Mean(d.hit_ratio);
      std::snprintf(buf, sizeof(buf), "%s: %s >= 0.95 x lru = %.3f (whole trace): %.3f",
                    w.name.c_str(), def.c_str(), 0.95 * lru, got);
      goals.push_back({buf, got >= 0.95 * lru});
    }
  }
  return goals;
}

void PrintCsv(const std::vector<Row>& rows) {
  std::printf("workload,policy,is_default,epoch,hit_ratio\n");
  for (const Row& r : rows) {
    for (size_t e = 0; e < r.hit_ratio.size(); ++e) {
      std::printf("%s,%s,%d,%zu,%.4f\n", r.workload.c_str(), r.policy.c_str(),
                  r.policy == kDefaultEvictionPolicy ? 1 : 0, e + 1, r.hit_ratio[e]);
    }
  }
}

void PrintTable(const std::vector<Workload>& workloads, const std::vector<Row>& rows,
                const std::vector<Goal>& goals, int epochs) {
  std::printf("Block cache eviction, %llu MiB blocks, seed %llu. Workloads:\n",
              static_cast<unsigned long long>(kBlockBytes >> 20),
              static_cast<unsigned long long>(kSeed));
  for (const Workload& w : workloads) {
    std::printf("  %-9s %s\n", w.name.c_str(), w.description.c_str());
  }
  std::printf("\n%-9s %-8s %-7s", "workload", "policy", "default");
  for (int e = 1; e <= epochs; ++e) std::printf("  epoch%d", e);
  std::printf("\n");
  for (const Row& r : rows) {
    std::printf("%-9s %-8s %-7s", r.workload.c_str(), r.policy.c_str(),
                r.policy == kDefaultEvictionPolicy ? "yes" : "");
    for (double h : r.hit_ratio) std::printf("  %6.3f", h);
    std::printf("\n");
  }
  std::printf("\nGoals:\n");
  for (const Goal& g : goals) std::printf("  %s  %s\n", g.pass ? "PASS" : "FAIL", g.text.c_str());
}

int Usage(const char* argv0) {
  std::fprintf(
      stderr,
      "usage: %s [--csv] [--blocks N] [--epochs N] [--cache F]\n"
      "  --csv       only CSV: workload,policy,is_default,epoch,hit_ratio\n"
      "  --blocks N  epoch dataset D in blocks, 20..200000 (default 2000); Zipf: 10 x N blocks\n"
      "  --epochs N  epochs, or Zipf windows (default 5)\n"
      "  --cache F   cache size as a fraction of D for seq and shuffled (default 0.5)\n",
      argv0);
  return 2;
}

// False on a malformed command line.
bool ParseOptions(int argc, char** argv, Options* opt) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--csv") {
      opt->csv = true;
    } else if (arg == "--blocks" && has_value) {
      opt->blocks = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--epochs" && has_value) {
      opt->epochs = std::atoi(argv[++i]);
    } else if (arg == "--cache" && has_value) {
      opt->cache_fraction = std::atof(argv[++i]);
    } else {
      return false;
    }
  }
  return opt->blocks >= 20 && opt->blocks <= 200'000 && opt->epochs >= 2 && opt->epochs <= 1000 &&
         opt->cache_fraction <= 1 &&
         std::llround(opt->cache_fraction * static_cast<double>(opt->blocks)) >= 1;
}

int Main(int argc, char** argv) {
  Options opt;
  if (!ParseOptions(argc, argv, &opt)) return Usage(argv[0]);
  const std::vector<Workload> workloads = {EpochWorkload(false, opt), EpochWorkload(true, opt),
                                           ZipfWorkload(opt)};
  std::vector<Row> rows;
  for (const Workload& w : workloads) {
    for (std::string_view policy : {"lru", "tinylfu"}) {
      rows.push_back({w.name, std::string(policy), SimulatePolicy(policy, w, opt.epochs)});
    }
    rows.push_back({w.name, "belady", SimulateBelady(w, opt.epochs)});
  }
  const std::vector<Goal> goals = CheckGoals(workloads, rows);
  if (opt.csv) {
    PrintCsv(rows);
  } else {
    PrintTable(workloads, rows, goals, opt.epochs);
  }
  return std::all_of(goals.begin(), goals.end(), [](const Goal& g) { return g.pass; }) ? 0 : 1;
}

}  // namespace
}  // namespace lakecache

int main(int argc, char** argv) { return lakecache::Main(argc, argv); }
