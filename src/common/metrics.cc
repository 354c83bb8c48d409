#include "common/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "base/check.h"

namespace trainwatch::common::metrics {

void Gauge::Add(double d) { v_.fetch_add(d, std::memory_order_relaxed); }

void Summary::Observe(double v) {
  sum_.fetch_add(v, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

namespace {

void EmitCell(Emitter* e, const std::string& name, std::vector<std::string> values, const Counter& c) {
  e->Add(name, std::move(values), static_cast<double>(c.Value()));
}

void EmitCell(Emitter* e, const std::string& name, std::vector<std::string> values, const Gauge& g) {
  e->Add(name, std::move(values), g.Value());
}

void EmitCell(Emitter* e, const std::string& name, std::vector<std::string> values, const Summary& s) {
  e->Add(name, values, s.Sum(), "_sum");
  e->Add(name, std::move(values), static_cast<double>(s.Count()), "_count");
}

}  // namespace

template <class T>
Family<T>::Family(std::string name, std::string help, std::vector<std::string> label_names)
    : desc_{std::move(name), std::move(help), Type::kUntyped, std::move(label_names)} {
  if constexpr (std::is_same_v<T, Counter>) desc_.type = Type::kCounter;
  if constexpr (std::is_same_v<T, Gauge>) desc_.type = Type::kGauge;
  if constexpr (std::is_same_v<T, Summary>) desc_.type = Type::kSummary;
  if (desc_.label_names.empty()) {
    base::MutexLock l(&mu_);  // not shared yet; the lock is for the analysis
    single_ = cells_.emplace(std::vector<std::string>{}, std::make_unique<T>()).first->second.get();
  }
}

template <class T>
T& Family<T>::With(const std::vector<std::string>& values) {
  CHECK(values.size() == desc_.label_names.size(), "BUG: metric family used with the wrong number of label values");
  base::MutexLock l(&mu_);
  auto it = cells_.find(values);
  if (it == cells_.end()) it = cells_.emplace(values, std::make_unique<T>()).first;
  return *it->second;
}

template <class T>
void Family<T>::Remove(const std::vector<std::string>& values) {
  if (values.empty()) return;  // the one cell of a family without labels stays
  base::MutexLock l(&mu_);
  cells_.erase(values);
}

template <class T>
void Family<T>::Collect(Emitter* e) const {
  base::MutexLock l(&mu_);
  for (const auto& [values, cell] : cells_) EmitCell(e, desc_.name, values, *cell);
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Summary>;

struct Registration::Entry {
  std::vector<std::string> names;  // immutable after Register
  base::Mutex mu;
  std::vector<const Source*> sources TW_GUARDED_BY(mu);  // empty once unregistered
};

Registration::Registration(Registration&& o) noexcept : registry_(o.registry_), entry_(std::move(o.entry_)) {
  o.registry_ = nullptr;
}

Registration& Registration::operator=(Registration&& o) noexcept {
  if (this != &o) {
    Reset();
    registry_ = o.registry_;
    entry_ = std::move(o.entry_);
    o.registry_ = nullptr;
  }
  return *this;
}

void Registration::Reset() {
  if (registry_ != nullptr) registry_->Unregister(entry_);
  registry_ = nullptr;
  entry_.reset();
}

Registry::~Registry() {
  base::MutexLock l(&mu_);
  CHECK(families_.empty(), "BUG: metrics registry destroyed before a registration of it");
}

Result<Registration> Registry::Register(std::vector<const Source*> sources) {
  auto e = std::make_shared<Registration::Entry>();
  for (const Source* s : sources) {
    for (Desc& d : s->Describe()) e->names.push_back(std::move(d.name));
  }
  {
    base::MutexLock l(&e->mu);  // not shared yet; the lock is for the analysis
    e->sources = std::move(sources);
  }
  std::set<std::string_view> seen;
  base::MutexLock l(&mu_);
  for (const std::string& n : e->names) {
    if (n.empty()) return Status::InvalidArgument("metric family without a name");
    if (!seen.insert(n).second || families_.count(n) != 0) {
      return Status::InvalidArgument("metric family " + n + " is registered already");
    }
  }
  for (const std::string& n : e->names) families_.emplace(n, e);
  return Registration(this, std::move(e));
}

Registration Registry::MustRegister(std::vector<const Source*> sources) {
  Result<Registration> r = Register(std::move(sources));
  CHECK(r.ok(), "BUG: metric family registered twice");
  return std::move(*r);
}

void Registry::Unregister(const std::shared_ptr<Registration::Entry>& e) {
  {
    base::MutexLock l(&mu_);
    for (const std::string& n : e->names) {
      auto it = families_.find(n);
      if (it != families_.end() && it->second == e) families_.erase(it);
    }
  }
  // Waits for a render collecting these sources.
  base::MutexLock l(&e->mu);
  e->sources.clear();
}

namespace {

struct Sample {
  std::string_view suffix;
  std::vector<std::string> label_values;
  double value;
};

struct Pending {
  Desc desc;
  const void* owner;  // the registration entry describing it
  std::vector<Sample> samples;
};

class Sink final : public Emitter {
 public:
  std::map<std::string, Pending, std::less<>> families;
  const void* current = nullptr;  // the entry being collected

  void Add(std::string_view name, std::vector<std::string> label_values, double value,
           std::string_view suffix) override {
    auto it = families.find(name);
    CHECK(it != families.end() && it->second.owner == current, "BUG: metric emitted that its source did not describe");
    CHECK(label_values.size() == it->second.desc.label_names.size(), "BUG: metric emitted with wrong label count");
    it->second.samples.push_back(Sample{suffix, std::move(label_values), value});
  }
};

void AppendEscaped(std::string* out, std::string_view s, bool quote) {
  for (char c : s) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '"' && quote) {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

std::string_view TypeName(Type t) {
  switch (t) {
    case Type::kCounter: return "counter";
    case Type::kGauge: return "gauge";
    case Type::kSummary: return "summary";
    case Type::kUntyped: return "untyped";
  }
  return "untyped";
}

}  // namespace

void AppendValue(std::string* out, double v) {
  if (std::isnan(v)) {
    out->append("NaN");
  } else if (std::isinf(v)) {
    out->append(v > 0 ? "+Inf" : "-Inf");
  } else {
    char buf[400];  // fixed notation of DBL_MAX has 309 digits
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
    out->append(buf, r.ptr);
  }
}

void Registry::Render(std::string* out) const {
  std::vector<std::shared_ptr<Registration::Entry>> entries;
  {
    base::MutexLock l(&mu_);
    std::set<const Registration::Entry*> seen;
    for (const auto& [name, e] : families_) {
      if (seen.insert(e.get()).second) entries.push_back(e);
    }
  }
  Sink sink;
  for (const auto& e : entries) {
    base::MutexLock l(&e->mu);
    sink.current = e.get();
    for (const Source* s : e->sources) {
      for (Desc& d : s->Describe()) {
        std::string name = d.name;
        sink.families.emplace(std::move(name), Pending{std::move(d), e.get(), {}});
      }
    }
    for (const Source* s : e->sources) s->Collect(&sink);
  }
  for (auto& [name, f] : sink.families) {
    if (f.samples.empty()) continue;
    out->append("# HELP ").append(name).push_back(' ');
    AppendEscaped(out, f.desc.help, false);
    out->append("\n# TYPE ").append(name).push_back(' ');
    out->append(TypeName(f.desc.type)).push_back('\n');
    std::stable_sort(f.samples.begin(), f.samples.end(),
                     [](const Sample& a, const Sample& b) { return a.label_values < b.label_values; });
    for (const Sample& s : f.samples) {
      out->append(name).append(s.suffix);
      if (!s.label_values.empty()) {
        out->push_back('{');
        for (size_t i = 0; i < s.label_values.size(); i++) {
          if (i > 0) out->push_back(',');
          out->append(f.desc.label_names[i]).append("=\"");
          AppendEscaped(out, s.label_values[i], true);
          out->push_back('"');
        }
        out->push_back('}');
      }
      out->push_back(' ');
      AppendValue(out, s.value);
      out->push_back('\n');
    }
  }
}

}  // namespace trainwatch::common::metrics
