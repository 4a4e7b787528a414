// The process's metrics: one registry that every counter of a daemon feeds, so `report`,
// `cluster status` and Prometheus' `/metrics` read the same numbers.
//
// Two kinds of metrics live in it:
//   - cells the registry owns (prometheus-cpp's core): histograms of durations and counters that
//     exist only for metrics (object-store requests by operation and code, FUSE operations,
//     worker RPCs). A component asks for its cells once and keeps them; a default-made cell does
//     nothing, so code runs the same with metrics off (no registry) and on.
//   - collectors: the counters a component already keeps for its reports (BlockStore, tiers, a
//     worker's and the cluster client's counters), read at every scrape by a callback that turns
//     the component's own snapshot into samples. The numbers exist once; the registry reads them.
//
// Names follow Prometheus' conventions: `lakecache_<what>_total` for counters, `_bytes` and
// `_seconds` for units, label values from small fixed sets (a tier, an operation, an error code),
// never an object key. Thread-safe; a collector's Registration must not outlive the registry.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
}  // namespace prometheus

namespace lakecache::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Upper bounds, in seconds, of the duration histograms: 50 us to 30 s.
const std::vector<double>& DurationBuckets();

// A histogram of durations (seconds). Default-made: records nothing.
class Histogram {
 public:
  Histogram() = default;
  void Observe(double seconds) const;
  explicit operator bool() const { return cell_ != nullptr; }

 private:
  friend class Registry;
  explicit Histogram(prometheus::Histogram* cell) : cell_(cell) {}
  prometheus::Histogram* cell_ = nullptr;
};

// A counter. Default-made: counts nothing (Value() is 0).
class Counter {
 public:
  Counter() = default;
  void Add(double n = 1) const;
  double Value() const;
  explicit operator bool() const { return cell_ != nullptr; }

 private:
  friend class Registry;
  explicit Counter(prometheus::Counter* cell) : cell_(cell) {}
  prometheus::Counter* cell_ = nullptr;
};

// A gauge. Default-made: holds nothing.
class Gauge {
 public:
  Gauge() = default;
  void Set(double value) const;
  void Add(double n) const;
  explicit operator bool() const { return cell_ != nullptr; }

 private:
  friend class Registry;
  explicit Gauge(prometheus::Gauge* cell) : cell_(cell) {}
  prometheus::Gauge* cell_ = nullptr;
};

// What a collector writes at a scrape: samples of families named by the metric name. A name is
// one family whatever collector writes it (the first help text wins).
class Sink {
 public:
  Sink();
  ~Sink();
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  void Counter(std::string_view name, std::string_view help, Labels labels, double value);
  void Gauge(std::string_view name, std::string_view help, Labels labels, double value);
  // `upper_bounds` ascending (seconds); `cumulative[i]` observations <= upper_bounds[i];
  // `count` all of them (the +Inf bucket), `sum` their total.
  void Histogram(std::string_view name, std::string_view help, Labels labels,
                 const std::vector<double>& upper_bounds, const std::vector<uint64_t>& cumulative,
                 uint64_t count, double sum);

 private:
  friend class Registry;
  struct Families;
  std::unique_ptr<Families> families_;
};

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The cell of `name` with `labels`, made on first use; the same cell for the same name and
  // labels. `buckets` empty: DurationBuckets().
  Histogram GetHistogram(const std::string& name, const std::string& help, const Labels& labels,
                         const std::vector<double>& buckets = {});
  Counter GetCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge GetGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  // A counter family with no cells yet (errors by operation and code, made on the first error):
  // scraped as its HELP and TYPE, so a dashboard's query of it names a metric that exists.
  void DeclareCounter(const std::string& name, const std::string& help);

  // Removes its collector when destroyed, after any scrape running it has finished.
  class Registration {
   public:
    Registration() = default;
    Registration(Registration&& other) noexcept { *this = std::move(other); }
    Registration& operator=(Registration&& other) noexcept;
    ~Registration() { Reset(); }
    void Reset();

   private:
    friend class Registry;
    Registration(Registry* registry, uint64_t id) : registry_(registry), id_(id) {}
    Registry* registry_ = nullptr;
    uint64_t id_ = 0;
  };
  // `collect` runs at every scrape (on the scraping thread) until the Registration is destroyed.
  [[nodiscard]] Registration AddCollector(std::function<void(Sink&)> collect);

  // Every metric in Prometheus' text format (version 0.0.4).
  std::string Scrape() const;

 private:
  struct Collectors;
  void RemoveCollector(uint64_t id);

  std::shared_ptr<prometheus::Registry> cells_;
  std::unique_ptr<Collectors> collectors_;
};

// A histogram observation of the time from construction to destruction.
class ScopedTimer {
 public:
  explicit ScopedTimer(const Histogram& histogram);
  ~ScopedTimer();
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  const Histogram* histogram_;
  int64_t start_ns_ = 0;
};

}  // namespace lakecache::metrics
