#pragma once

// trainwatch's own metrics, one registry for /metrics: every module declares
// its counters, gauges and summaries (or a collector computing values at
// scrape time) and registers them; the /metrics handler renders the registry
// in the Prometheus text format 0.0.4. No module writes exposition text.
//
//   metrics::CounterFamily sent_{"x_sent_total", "Alerts sent.", {"alertmanager"}};
//   metrics::Registration reg_ = registry->MustRegister({&sent_});  // declared last
//   sent_.With({url}).Inc();
//
// Thread safety: cells (Counter, Gauge, Summary) are lock-free; families,
// Registry and Registration may be used from any thread.

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"

namespace trainwatch::common::metrics {

enum class Type { kCounter, kGauge, kSummary, kUntyped };

// A family's description: `name` is unique in a registry.
struct Desc {
  std::string name;
  std::string help;
  Type type = Type::kGauge;
  std::vector<std::string> label_names;  // rendered in this order
};

// A monotonically increasing integer.
class Counter {
 public:
  void Inc(uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t Value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

// A value that goes up and down.
class Gauge {
 public:
  void Set(double v) { v_.store(v, std::memory_order_relaxed); }
  void Add(double d);
  double Value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0};
};

// Observations as a sum and a count (TYPE summary without quantiles). A
// render may see an observation in the count and not yet in the sum.
class Summary {
 public:
  void Observe(double v);
  double Sum() const { return sum_.load(std::memory_order_relaxed); }
  uint64_t Count() const { return count_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> sum_{0};
  std::atomic<uint64_t> count_{0};
};

// Where sources write their samples at scrape time.
class Emitter {
 public:
  virtual ~Emitter() = default;
  // One sample of family `name` (one of the emitting source's descs), with
  // one value per label name; `suffix` is appended to the name ("_sum").
  virtual void Add(std::string_view name, std::vector<std::string> label_values, double value,
                   std::string_view suffix = {}) = 0;
};

// What a registry holds: one or more families and how to read them.
class Source {
 public:
  virtual ~Source() = default;
  virtual std::vector<Desc> Describe() const = 0;
  virtual void Collect(Emitter* e) const = 0;
};

// A family of cells T (Counter, Gauge, Summary) by label values. Without
// label names it holds one cell, always rendered; with them, a cell per
// label values used, kept until Remove.
template <class T>
class Family final : public Source {
 public:
  Family(std::string name, std::string help, std::vector<std::string> label_names = {});
  // The cell for `values`, created at 0. REQUIRES: one value per label name.
  // The reference stays valid until Remove of those values or destruction.
  T& With(const std::vector<std::string>& values);
  // The one cell of a family without labels.
  T& Get() { return *single_; }
  const T& Get() const { return *single_; }
  void Remove(const std::vector<std::string>& values);

  std::vector<Desc> Describe() const override { return {desc_}; }
  void Collect(Emitter* e) const override;

 private:
  Desc desc_;
  mutable base::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> cells_ TW_GUARDED_BY(mu_);
  T* single_ = nullptr;  // the cell of {} when there are no label names
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Summary>;
using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using SummaryFamily = Family<Summary>;

// Families whose values are computed at scrape time: `collect` emits samples
// of `descs` (in any order). It runs on the scraping thread, under no lock of
// the registry but while its Registration cannot finish unregistering.
class Collector final : public Source {
 public:
  Collector(std::vector<Desc> descs, std::function<void(Emitter*)> collect)
      : descs_(std::move(descs)), collect_(std::move(collect)) {}
  std::vector<Desc> Describe() const override { return descs_; }
  void Collect(Emitter* e) const override { collect_(e); }

 private:
  const std::vector<Desc> descs_;
  const std::function<void(Emitter*)> collect_;
};

class Registry;

// Sources registered together; unregisters them when destroyed or Reset,
// waiting for a render that is reading them. Declare it after the sources
// it names (so it goes first), and do not destroy it while holding a lock
// a collector of it takes.
class Registration {
 public:
  Registration() = default;
  Registration(Registration&& o) noexcept;
  Registration& operator=(Registration&& o) noexcept;
  ~Registration() { Reset(); }
  void Reset();

 private:
  friend class Registry;
  struct Entry;
  Registration(Registry* r, std::shared_ptr<Entry> e) : registry_(r), entry_(std::move(e)) {}
  Registry* registry_ = nullptr;
  std::shared_ptr<Entry> entry_;
};

class Registry {
 public:
  Registry() = default;
  // REQUIRES: every Registration made here is gone.
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Registers `sources` (not owned; they outlive the Registration).
  // InvalidArgument when a family name is registered already or repeats.
  [[nodiscard]] Result<Registration> Register(std::vector<const Source*> sources);
  // Register, CHECKing success: for names fixed in code.
  Registration MustRegister(std::vector<const Source*> sources);

  // Appends every family with samples, by name, in the text format 0.0.4.
  void Render(std::string* out) const;

 private:
  friend class Registration;
  void Unregister(const std::shared_ptr<Registration::Entry>& e);

  mutable base::Mutex mu_;
  // family name -> the registration holding it
  std::map<std::string, std::shared_ptr<Registration::Entry>, std::less<>> families_ TW_GUARDED_BY(mu_);
};

// A sample value as Prometheus prints it: NaN, +Inf, -Inf, else the shortest
// round-trip digits in fixed notation (integers without a point).
void AppendValue(std::string* out, double v);

}  // namespace trainwatch::common::metrics
