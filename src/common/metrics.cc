#include "common/metrics.h"

#include <prometheus/client_metric.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <sstream>

#include "common/mutex.h"

namespace lakecache::metrics {
namespace {

std::map<std::string, std::string> ToMap(const Labels& labels) {
  return {labels.begin(), labels.end()};
}

std::vector<prometheus::ClientMetric::Label> ToLabels(Labels labels) {
  std::vector<prometheus::ClientMetric::Label> out;
  out.reserve(labels.size());
  for (auto& [name, value] : labels) out.push_back({std::move(name), std::move(value)});
  return out;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

const std::vector<double>& DurationBuckets() {
  static const std::vector<double> kBuckets = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                               0.005,   0.01,   0.025,   0.05,   0.1,   0.25,
                                               0.5,     1,      2.5,     5,      10,    30};
  return kBuckets;
}

void Histogram::Observe(double seconds) const {
  if (cell_ != nullptr) cell_->Observe(seconds);
}

void Counter::Add(double n) const {
  if (cell_ != nullptr) cell_->Increment(n);
}

double Counter::Value() const { return cell_ != nullptr ? cell_->Value() : 0; }

void Gauge::Set(double value) const {
  if (cell_ != nullptr) cell_->Set(value);
}

void Gauge::Add(double n) const {
  if (cell_ != nullptr) cell_->Increment(n);
}

// ---- Sink ------------------------------------------------------------------------------------

struct Sink::Families {
  std::vector<prometheus::MetricFamily> list;
  std::map<std::string, size_t, std::less<>> index;

  prometheus::MetricFamily& Get(std::string_view name, std::string_view help,
                                prometheus::MetricType type) {
    auto it = index.find(name);
    if (it != index.end()) return list[it->second];
    index.emplace(std::string(name), list.size());
    prometheus::MetricFamily& family = list.emplace_back();
    family.name = std::string(name);
    family.help = std::string(help);
    family.type = type;
    return family;
  }
};

Sink::Sink() : families_(std::make_unique<Families>()) {}
Sink::~Sink() = default;

void Sink::Counter(std::string_view name, std::string_view help, Labels labels, double value) {
  prometheus::ClientMetric metric;
  metric.label = ToLabels(std::move(labels));
  metric.counter.value = value;
  families_->Get(name, help, prometheus::MetricType::Counter).metric.push_back(std::move(metric));
}

void Sink::Gauge(std::string_view name, std::string_view help, Labels labels, double value) {
  prometheus::ClientMetric metric;
  metric.label = ToLabels(std::move(labels));
  metric.gauge.value = value;
  families_->Get(name, help, prometheus::MetricType::Gauge).metric.push_back(std::move(metric));
}

void Sink::Histogram(std::string_view name, std::string_view help, Labels labels,
                     const std::vector<double>& upper_bounds,
                     const std::vector<uint64_t>& cumulative, uint64_t count, double sum) {
  prometheus::ClientMetric metric;
  metric.label = ToLabels(std::move(labels));
  metric.histogram.sample_count = count;
  metric.histogram.sample_sum = sum;
  for (size_t i = 0; i < upper_bounds.size() && i < cumulative.size(); ++i) {
    metric.histogram.bucket.push_back({cumulative[i], upper_bounds[i]});
  }
  metric.histogram.bucket.push_back({count, std::numeric_limits<double>::infinity()});
  families_->Get(name, help, prometheus::MetricType::Histogram).metric.push_back(std::move(metric));
}

// ---- Registry --------------------------------------------------------------------------------

struct Registry::Collectors {
  // Held while collectors run, so a Registration waits for a scrape using it to finish.
  mutable Mutex mu;
  uint64_t next_id GUARDED_BY(mu) = 1;
  std::map<uint64_t, std::function<void(Sink&)>> entries GUARDED_BY(mu);
  std::map<std::string, std::string> declared GUARDED_BY(mu);  // counter name -> help
};

Registry::Registry()
    : cells_(std::make_shared<prometheus::Registry>()),
      collectors_(std::make_unique<Collectors>()) {}

Registry::~Registry() = default;

Histogram Registry::GetHistogram(const std::string& name, const std::string& help,
                                 const Labels& labels, const std::vector<double>& buckets) {
  auto& family = prometheus::BuildHistogram().Name(name).Help(help).Register(*cells_);
  return Histogram(&family.Add(ToMap(labels), buckets.empty() ? DurationBuckets() : buckets));
}

Counter Registry::GetCounter(const std::string& name, const std::string& help,
                             const Labels& labels) {
  auto& family = prometheus::BuildCounter().Name(name).Help(help).Register(*cells_);
  return Counter(&family.Add(ToMap(labels)));
}

Gauge Registry::GetGauge(const std::string& name, const std::string& help, const Labels& labels) {
  auto& family = prometheus::BuildGauge().Name(name).Help(help).Register(*cells_);
  return Gauge(&family.Add(ToMap(labels)));
}

void Registry::DeclareCounter(const std::string& name, const std::string& help) {
  // prometheus-cpp leaves a family without cells out of a scrape: Scrape adds it.
  MutexLock lock(&collectors_->mu);
  collectors_->declared.emplace(name, help);
}

Registry::Registration& Registry::Registration::operator=(Registration&& other) noexcept {
  if (this != &other) {
    Reset();
    registry_ = std::exchange(other.registry_, nullptr);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

void Registry::Registration::Reset() {
  if (registry_ != nullptr) registry_->RemoveCollector(id_);
  registry_ = nullptr;
  id_ = 0;
}

Registry::Registration Registry::AddCollector(std::function<void(Sink&)> collect) {
  MutexLock lock(&collectors_->mu);
  uint64_t id = collectors_->next_id++;
  collectors_->entries.emplace(id, std::move(collect));
  return Registration(this, id);
}

void Registry::RemoveCollector(uint64_t id) {
  MutexLock lock(&collectors_->mu);
  collectors_->entries.erase(id);
}

std::string Registry::Scrape() const {
  Sink sink;
  {
    MutexLock lock(&collectors_->mu);
    for (const auto& [id, collect] : collectors_->entries) collect(sink);
  }
  std::vector<prometheus::MetricFamily> families = cells_->Collect();
  for (prometheus::MetricFamily& family : sink.families_->list) {
    families.push_back(std::move(family));
  }
  std::map<std::string, std::string> declared;
  {
    MutexLock lock(&collectors_->mu);
    declared = collectors_->declared;
  }
  for (const auto& entry : declared) {
    const std::string& name = entry.first;
    bool present = std::any_of(families.begin(), families.end(),
                               [&name](const auto& family) { return family.name == name; });
    if (!present) families.push_back({name, entry.second, prometheus::MetricType::Counter, {}});
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

// ---- ScopedTimer -----------------------------------------------------------------------------

ScopedTimer::ScopedTimer(const Histogram& histogram)
    : histogram_(&histogram), start_ns_(histogram ? NowNs() : 0) {}

ScopedTimer::~ScopedTimer() {
  if (*histogram_) histogram_->Observe(static_cast<double>(NowNs() - start_ns_) / 1e9);
}

}  // namespace lakecache::metrics
