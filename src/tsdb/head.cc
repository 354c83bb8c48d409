#include "tsdb/head.h"

#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <utility>
#include <unordered_set>

#include "base/clock.h"
#include "base/coding.h"
#include "base/log.h"
#include "base/mutex.h"
#include "base/units.h"
#include "base/utf8.h"
#include "tsdb/wal/wal.h"

namespace trainwatch::tsdb {

// Series by label hash: open addressing with linear probing over series
// pointers (the hash is in the series), deletion by backward shift. Series
// with equal hashes simply occupy several slots. 8 bytes per slot at a load
// of at most 3/4, instead of a node allocation per series.
struct Head::Stripe {
  mutable base::SharedMutex mu;
  std::unique_ptr<MemSeries*[]> slots TW_GUARDED_BY(mu);
  uint32_t mask TW_GUARDED_BY(mu) = 0;  // slots - 1, when slots is non-null
  uint32_t used TW_GUARDED_BY(mu) = 0;

  static size_t Home(uint64_t hash, uint32_t mask) { return (hash >> kStripeBits) & mask; }

  template <typename Fn>
  MemSeries* Find(uint64_t hash, Fn&& eq) const TW_REQUIRES_SHARED(mu) {
    if (slots == nullptr) return nullptr;
    for (size_t i = Home(hash, mask);; i = (i + 1) & mask) {
      MemSeries* s = slots[i];
      if (s == nullptr) return nullptr;
      if (s->hash == hash && eq(s)) return s;
    }
  }

  void Insert(MemSeries* s) TW_REQUIRES(mu) {
    if (slots == nullptr || 4 * (uint64_t{used} + 1) > 3 * (uint64_t{mask} + 1)) {
      uint32_t cap = slots == nullptr ? 16 : 2 * (mask + 1);
      std::unique_ptr<MemSeries*[]> old = std::move(slots);
      uint32_t old_cap = old == nullptr ? 0 : mask + 1;
      slots.reset(new MemSeries*[cap]());
      mask = cap - 1;
      for (uint32_t i = 0; i < old_cap; i++) {
        if (old[i] != nullptr) Place(old[i]);
      }
    }
    Place(s);
    used++;
  }

  void Erase(const MemSeries* s) TW_REQUIRES(mu) {
    if (slots == nullptr) return;
    size_t i = Home(s->hash, mask);
    while (slots[i] != s) {
      if (slots[i] == nullptr) return;
      i = (i + 1) & mask;
    }
    // Backward-shift deletion: move later entries of the probe run into the
    // hole when their home position does not lie cyclically in (hole, j].
    for (size_t j = (i + 1) & mask; slots[j] != nullptr; j = (j + 1) & mask) {
      size_t k = Home(slots[j]->hash, mask);
      bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
      if (!stays) {
        slots[i] = slots[j];
        i = j;
      }
    }
    slots[i] = nullptr;
    used--;
  }

 private:
  void Place(MemSeries* s) TW_REQUIRES(mu) {
    size_t i = Home(s->hash, mask);
    while (slots[i] != nullptr) i = (i + 1) & mask;
    slots[i] = s;
  }
};

MemSeries* MemSeries::New(uint64_t ref, uint64_t hash, uint32_t num_labels) {
  void* p = ::operator new(sizeof(MemSeries) + 2 * sizeof(uint32_t) * num_labels);
  return new (p) MemSeries(ref, hash, num_labels);
}

void MemSeries::Delete(MemSeries* s) {
  if (s == nullptr) return;
  s->~MemSeries();
  ::operator delete(s);
}

Head::Head(HeadOptions opts)
    : opts_(opts),
      stripes_(new Stripe[kStripes]),
      pages_(new std::atomic<std::atomic<MemSeries*>*>[kMaxPages]),
      slabs_(kClosedSlabBlock, opts_.spill) {
  for (uint32_t i = 0; i < kMaxPages; i++) pages_[i].store(nullptr, std::memory_order_relaxed);
}

Head::~Head() {
  for (uint32_t p = 0; p < kMaxPages; p++) {
    std::atomic<MemSeries*>* page = pages_[p].load(std::memory_order_relaxed);
    if (page == nullptr) continue;
    for (uint32_t i = 0; i < kPageSize; i++) MemSeries::Delete(page[i].load(std::memory_order_relaxed));
    delete[] page;
  }
}

void Head::SetWal(wal::Writer* wal, bool sync_each_commit) {
  wal_ = wal;
  sync_each_commit_ = sync_each_commit;
}

MemSeries* Head::GetByRef(uint64_t ref) const {
  if (ref == 0 || (ref >> kPageBits) >= kMaxPages) return nullptr;
  std::atomic<MemSeries*>* page = pages_[ref >> kPageBits].load(std::memory_order_acquire);
  if (page == nullptr) return nullptr;
  return page[ref & (kPageSize - 1)].load(std::memory_order_acquire);
}

void Head::SetRef(uint64_t ref, MemSeries* s) {
  CHECK((ref >> kPageBits) < kMaxPages, "BUG: series ref space exhausted");
  std::atomic<MemSeries*>* page = pages_[ref >> kPageBits].load(std::memory_order_acquire);
  if (page == nullptr) {
    page = new std::atomic<MemSeries*>[kPageSize];
    for (uint32_t i = 0; i < kPageSize; i++) page[i].store(nullptr, std::memory_order_relaxed);
    pages_[ref >> kPageBits].store(page, std::memory_order_release);
  }
  page[ref & (kPageSize - 1)].store(s, std::memory_order_release);
}

bool Head::LabelsEqual(const MemSeries* s, const model::Labels& labels) const {
  if (s->num_labels != labels.size()) return false;
  size_t i = 0;
  for (const auto& l : labels) {
    if (symbols_.Get(s->syms()[2 * i]) != l.name || symbols_.Get(s->syms()[2 * i + 1]) != l.value) return false;
    i++;
  }
  return true;
}

MemSeries* Head::Lookup(const model::Labels& labels, uint64_t hash) const {
  const Stripe& st = stripes_[hash & (kStripes - 1)];
  base::ReaderMutexLock lock(&st.mu);
  return st.Find(hash, [&](const MemSeries* s) { return LabelsEqual(s, labels); });
}

model::Labels Head::LabelsOf(const MemSeries* s) const {
  std::vector<model::Label> ls;
  ls.reserve(s->num_labels);
  for (uint32_t i = 0; i < s->num_labels; i++) {
    ls.push_back({std::string(symbols_.Get(s->syms()[2 * i])), std::string(symbols_.Get(s->syms()[2 * i + 1]))});
  }
  return model::Labels(std::move(ls));
}

MemSeries* Head::CreateLocked(uint64_t ref, const model::Labels& labels, uint64_t hash) {
  MemSeries* s = MemSeries::New(ref, hash, static_cast<uint32_t>(labels.size()));
  size_t i = 0;
  for (const auto& l : labels) {
    s->syms()[2 * i] = symbols_.Intern(l.name);
    s->syms()[2 * i + 1] = symbols_.Intern(l.value);
    i++;
  }
  SetRef(ref, s);
  {
    base::WriterMutexLock lock(&postings_mu_);
    postings_.Add(ref, labels);
  }
  Stripe& st = stripes_[hash & (kStripes - 1)];
  {
    base::WriterMutexLock lock(&st.mu);
    st.Insert(s);
  }
  num_series_.fetch_add(1, std::memory_order_relaxed);
  ReserveRef(ref);
  return s;
}

void Head::ReserveRef(uint64_t ref) {
  if ((ref >> kPageBits) >= kMaxPages) return;  // no series can have it
  uint64_t next = next_ref_.load(std::memory_order_relaxed);
  while (next <= ref && !next_ref_.compare_exchange_weak(next, ref + 1)) {
  }
}

MemSeries* Head::GetOrCreate(const model::Labels& labels) { return GetOrCreate(labels, labels.Hash()); }

MemSeries* Head::GetOrCreate(const model::Labels& labels, uint64_t h) {
  if (MemSeries* s = Lookup(labels, h)) return s;
  base::MutexLock lock(&creation_mu_);
  if (MemSeries* s = Lookup(labels, h)) return s;
  return CreateLocked(next_ref_.load(std::memory_order_relaxed), labels, h);
}

Result<MemSeries*> Head::GetOrCreateChecked(const model::Labels& labels) {
  uint64_t h = labels.Hash();
  if (MemSeries* s = Lookup(labels, h)) return s;
  // Only new series are checked: an existing one passed this check once.
  RETURN_IF_ERROR(model::CheckSeriesLabels(labels));
  for (const model::Label& l : labels) {
    if (!IsValidUtf8(l.name) || !IsValidUtf8(l.value)) {
      return Status::InvalidArgument("series " + labels.ToString() + ": label " + l.name + " is not valid UTF-8");
    }
  }
  const SeriesLimits& lim = opts_.limits;
  if (lim.max_labels_per_series > 0 && labels.size() > lim.max_labels_per_series) {
    return RefuseSeries(SeriesRefusal::kLabelsPerSeries, labels,
                        "has " + std::to_string(labels.size()) + " labels, more than " +
                            std::to_string(lim.max_labels_per_series) + " (--ingest.max-labels-per-series)");
  }
  for (const model::Label& l : labels) {
    if (lim.max_label_name_length > 0 && l.name.size() > lim.max_label_name_length) {
      return RefuseSeries(SeriesRefusal::kLabelNameLength, labels,
                          "has a label name of " + std::to_string(l.name.size()) + " bytes, more than " +
                              std::to_string(lim.max_label_name_length) + " (--ingest.max-label-name-length)");
    }
    if (lim.max_label_value_length > 0 && l.value.size() > lim.max_label_value_length) {
      return RefuseSeries(SeriesRefusal::kLabelValueLength, labels,
                          "has a value of " + std::to_string(l.value.size()) + " bytes for label " + l.name.substr(0, 64) +
                              ", more than " + std::to_string(lim.max_label_value_length) +
                              " (--ingest.max-label-value-length)");
    }
  }
  if (lim.max_series == 0) return GetOrCreate(labels, h);
  base::MutexLock lock(&creation_mu_);
  if (MemSeries* s = Lookup(labels, h)) return s;
  if (NumSeries() >= lim.max_series) {
    return RefuseSeries(SeriesRefusal::kMaxSeries, labels,
                        "is new and the head holds the series limit of " + std::to_string(lim.max_series) +
                            " (--storage.max-series)");
  }
  return CreateLocked(next_ref_.load(std::memory_order_relaxed), labels, h);
}

Status Head::RefuseSeries(SeriesRefusal r, const model::Labels& labels, const std::string& why) {
  series_refused_[static_cast<size_t>(r)].fetch_add(1, std::memory_order_relaxed);
  std::string l = labels.ToString();
  if (l.size() > 200) l = l.substr(0, 200) + "...";
  return Status::ResourceExhausted("series " + l + " refused: it " + why);
}

std::string_view SeriesRefusalName(SeriesRefusal r) {
  switch (r) {
    case SeriesRefusal::kMaxSeries: return "max_series";
    case SeriesRefusal::kLabelsPerSeries: return "labels_per_series";
    case SeriesRefusal::kLabelNameLength: return "label_name_length";
    case SeriesRefusal::kLabelValueLength: return "label_value_length";
  }
  return "unknown";
}

bool OooBuffer::Insert(int64_t t, double v) {
  const auto end = samples.begin() + static_cast<std::ptrdiff_t>(sorted);
  auto it = std::lower_bound(samples.begin(), end, t, [](const model::Sample& a, int64_t x) { return a.t < x; });
  if (it != end && it->t == t) return false;
  if (sorted == samples.size() && it == end) {
    // Out-of-order samples that arrive in order among themselves stay sorted.
    samples.push_back({t, v});
    sorted++;
    return true;
  }
  if (!tail_ts.insert(t).second) return false;
  samples.push_back({t, v});
  return true;
}

bool OooBuffer::Has(int64_t t) const {
  const auto end = samples.begin() + static_cast<std::ptrdiff_t>(sorted);
  auto it = std::lower_bound(samples.begin(), end, t, [](const model::Sample& a, int64_t x) { return a.t < x; });
  return (it != end && it->t == t) || tail_ts.count(t) > 0;
}

size_t OooBuffer::Normalize() {
  if (sorted == samples.size()) return 0;
  const auto mid = samples.begin() + static_cast<std::ptrdiff_t>(sorted);
  auto by_t = [](const model::Sample& a, const model::Sample& b) { return a.t < b.t; };
  // Stable: of equal timestamps the earlier insert stays first, and unique
  // keeps the first.
  std::stable_sort(mid, samples.end(), by_t);
  std::inplace_merge(samples.begin(), mid, samples.end(), by_t);
  auto last = std::unique(samples.begin(), samples.end(),
                          [](const model::Sample& a, const model::Sample& b) { return a.t == b.t; });
  size_t dropped = static_cast<size_t>(samples.end() - last);
  samples.erase(last, samples.end());
  sorted = samples.size();
  std::unordered_set<int64_t>().swap(tail_ts);
  return dropped;
}

void OooBuffer::CopyRange(int64_t mint, int64_t maxt, std::vector<model::Sample>* out) const {
  const size_t first = out->size();
  auto in_range = [&](const model::Sample& x) { return x.t >= mint && x.t <= maxt; };
  for (size_t i = 0; i < sorted; i++) {
    if (in_range(samples[i])) out->push_back(samples[i]);
  }
  if (sorted == samples.size()) return;
  const size_t prefix_end = out->size();
  for (size_t i = sorted; i < samples.size(); i++) {
    if (in_range(samples[i])) out->push_back(samples[i]);
  }
  if (prefix_end == out->size()) return;
  auto b = out->begin() + static_cast<std::ptrdiff_t>(first);
  auto m = out->begin() + static_cast<std::ptrdiff_t>(prefix_end);
  auto by_t = [](const model::Sample& a, const model::Sample& c) { return a.t < c.t; };
  std::stable_sort(m, out->end(), by_t);
  std::inplace_merge(b, m, out->end(), by_t);
  out->erase(std::unique(b, out->end(), [](const model::Sample& a, const model::Sample& c) { return a.t == c.t; }),
             out->end());
}

int64_t Head::Now() const { return opts_.now_ms ? opts_.now_ms() : NowMillis(); }

Head::TimeBounds Head::AcceptedTimeRange() const {
  TimeBounds b{model::kMinTime, model::kMaxTime};
  if (opts_.max_future_ms <= 0 && opts_.max_age_ms <= 0) return b;
  const int64_t now = std::clamp(Now(), model::kMinTime / 2, model::kMaxTime / 2);
  if (opts_.max_future_ms > 0) b.maxt = now + std::min(opts_.max_future_ms, model::kMaxTime / 2);
  if (opts_.max_age_ms > 0) b.mint = now - std::min(opts_.max_age_ms, model::kMaxTime / 2);
  return b;
}

namespace {

// " (2027-01-09T10:00:00Z)" for a timestamp gmtime can show, else "".
std::string ShowTime(int64_t t_ms) {
  time_t secs = static_cast<time_t>(t_ms >= 0 ? t_ms / 1000 : -((-(t_ms + 1)) / 1000) - 1);
  struct tm tm;
  if (t_ms < -62135596800000LL || t_ms > 253402300799999LL || gmtime_r(&secs, &tm) == nullptr) return "";
  char buf[40];
  size_t n = strftime(buf, sizeof(buf), " (%Y-%m-%dT%H:%M:%SZ)", &tm);
  return std::string(buf, n);
}

}  // namespace

Status Head::OutOfRange(int64_t t, const TimeBounds& b) {
  std::string ts = "sample timestamp " + std::to_string(t) + ShowTime(t);
  if (t > b.maxt) {
    too_new_total_.fetch_add(1, std::memory_order_relaxed);
    if (b.maxt == model::kMaxTime) return Status::OutOfRange(ts + " is beyond the largest supported timestamp");
    return Status::OutOfRange(ts + " is too far in the future: more than " + FormatDurationMs(opts_.max_future_ms) +
                              " after the server's clock (--ingest.max-future)");
  }
  too_old_total_.fetch_add(1, std::memory_order_relaxed);
  if (b.mint == model::kMinTime) return Status::OutOfRange(ts + " is before the smallest supported timestamp");
  return Status::OutOfRange(ts + " is too old: more than " + FormatDurationMs(opts_.max_age_ms) +
                            " before the server's clock, outside the retention (--retention.time)");
}

void Head::UpdateTimes(int64_t mint, int64_t maxt) {
  if (mint > maxt) return;
  int64_t cur = min_time_.load(std::memory_order_relaxed);
  while (mint < cur && !min_time_.compare_exchange_weak(cur, mint)) {
  }
  cur = max_time_.load(std::memory_order_relaxed);
  while (maxt > cur && !max_time_.compare_exchange_weak(cur, maxt)) {
  }
}

static int64_t BlockEnd(int64_t t, int64_t block) {
  int64_t start = t >= 0 ? (t / block) * block : -(((-t) + block - 1) / block) * block;
  return start + block;
}

void Head::NormalizeOooLocked(MemSeries* s) {
  size_t dropped = s->ooo->Normalize();
  if (dropped == 0) return;
  // Counted as applied at insert; they were duplicates after all.
  num_samples_.fetch_sub(std::min<uint64_t>(dropped, num_samples_.load()), std::memory_order_relaxed);
  dup_total_.fetch_add(dropped, std::memory_order_relaxed);
}

void Head::CloseOpenLocked(MemSeries* s, bool dense_ok) {
  if (!s->open) return;
  HeadChunk c;
  c.mint = s->open->MinTime();
  c.maxt = s->open->MaxTime();
  c.num_samples = s->open->NumSamples();
  c.enc = chunkenc::DeltaChunk::kEncoding;
  // Closed chunks are immutable: re-encode them with the dense codec when
  // that is smaller (about half of XOR on typical metrics), so the head
  // holds recent data at close to on-disk density.
  std::string_view open_bytes = s->open->Bytes();
  HeadChunk dense;
  // The encoder's search over orders and modes is most of its cost; a
  // series' data keeps its character, so three chunks in four are encoded as
  // the last search chose (0.2 % more bytes on the peers workload, the
  // encoding 2.5 times as fast: chunkenc_bench BM_WorkloadEncodeLike).
  // A series' first chunk takes the timestamps' order and the value mode of
  // the last search over a series of its metric (one GPU's temperature is
  // like another's) and searches the values' order only; its second is
  // searched, and every fourth after it.
  constexpr size_t kDenseSearchEvery = 4;
  using chunkenc::DenseSearch;
  DenseSearch search = s->closed.size() % kDenseSearchEvery == 1 ? DenseSearch::kAll : DenseSearch::kNone;
  std::atomic<uint8_t>* metric = nullptr;
  const bool dense_now = dense_ok && !defer_dense_.load(std::memory_order_relaxed);
  if (dense_now && s->dense_choice.bits == 0) {
    metric = MetricChoice(s);
    const uint8_t b = metric->load(std::memory_order_relaxed);
    s->dense_choice.bits = b;
    search = b != 0 ? DenseSearch::kOrders : DenseSearch::kAll;
  }
  const bool denser = dense_now && EncodeDenser(c, &dense, open_bytes, &s->dense_choice, search);
  if (metric != nullptr && search == DenseSearch::kAll) metric->store(s->dense_choice.bits, std::memory_order_relaxed);
  if (!denser) {
    c.data = CopyClosed(open_bytes, c.maxt);
  } else {
    c = std::move(dense);
  }
  if (s->extra) WrapSTLocked(s, &c, /*closed=*/true);
  QueueForChunkLog(s->ref, c);
  s->closed.push_back(std::move(c));
  s->open.reset();
  if (s->extra) TrimSTLocked(s);
}

void Head::OooSTLocked(const MemSeries* s, const std::vector<model::Sample>& ooo, std::vector<int64_t>* out) {
  out->clear();
  if (!s->extra || s->extra->st.empty()) return;
  chunkenc::STCursor c;
  c.Reset(&s->extra->st);
  out->reserve(ooo.size());
  bool any = false;
  for (const model::Sample& x : ooo) {
    out->push_back(c.At(x.t));
    any = any || out->back() != 0;
  }
  if (!any) out->clear();
}

void Head::WrapSTLocked(const MemSeries* s, HeadChunk* c, bool closed) const {
  if (!s->extra || s->extra->st.empty()) return;
  thread_local std::vector<chunkenc::STRun> runs;
  chunkenc::ClipRuns(s->extra->st, c->mint, c->maxt, &runs);
  if (!chunkenc::AnyST(runs)) return;
  thread_local std::string buf;
  buf.clear();
  chunkenc::WrapST(c->enc, c->data.view(), runs, &buf);
  c->enc = chunkenc::Encoding::kStartTimes;
  c->data = closed ? CopyClosed(buf, c->maxt) : ChunkBytes::Copy(buf);
}

void Head::TrimSTLocked(MemSeries* s) {
  if (!s->extra || s->extra->st.empty()) return;
  // The earliest sample read through the runs; the run in force there
  // (which also decides whether the next in-order sample starts a run)
  // and those after it stay.
  int64_t from = INT64_MAX;
  if (s->open && s->open->NumSamples() > 0) from = std::min(from, s->open->MinTime());
  if (s->extra->open && s->extra->open->NumSamples() > 0) from = std::min(from, s->extra->open->MinTime());
  if (s->ooo && !s->ooo->samples.empty()) {
    for (const model::Sample& x : s->ooo->samples) from = std::min(from, x.t);
  }
  if (from == INT64_MAX) {
    // None: only the latest run matters, for the next sample.
    from = InOrderMaxtLocked(s);
    if (from == INT64_MIN) {
      s->extra->st.clear();
      return;
    }
  }
  std::vector<chunkenc::STRun>& st = s->extra->st;
  auto it = std::upper_bound(st.begin(), st.end(), from, [](int64_t t, const chunkenc::STRun& r) { return t < r.t; });
  if (it == st.begin()) return;
  --it;  // in force at `from`
  if (it == st.begin()) return;
  st.erase(st.begin(), it);
  if (st.size() == 1 && st.front().st == 0) st.clear();
}

void Head::NoteSTLocked(MemSeries* s, int64_t t, int64_t st, bool in_order) {
  if (st == 0 && (!s->extra || s->extra->st.empty())) return;
  if (!s->extra) s->extra = std::make_unique<SeriesExtras>();
  std::vector<chunkenc::STRun>& runs = s->extra->st;
  auto it = std::upper_bound(runs.begin(), runs.end(), t, [](int64_t x, const chunkenc::STRun& r) { return x < r.t; });
  const int64_t prev = it == runs.begin() ? 0 : std::prev(it)->st;
  if (prev == st) return;
  size_t i = static_cast<size_t>(it - runs.begin());
  // Samples after t keep theirs: a run back to `prev` right after t (no
  // sample lies between t and the next one after it).
  if (!in_order && (i == runs.size() || runs[i].t != t + 1)) runs.insert(runs.begin() + static_cast<std::ptrdiff_t>(i), {t + 1, prev});
  if (i > 0 && runs[i - 1].t == t) {
    runs[i - 1].st = st;
  } else {
    runs.insert(runs.begin() + static_cast<std::ptrdiff_t>(i), {t, st});
  }
}

void Head::QueueForChunkLog(uint64_t ref, const HeadChunk& c) {
  if (chunk_queue_on_.load(std::memory_order_relaxed)) {
    base::MutexLock lock(&chunk_queue_mu_);
    chunk_queue_bytes_.fetch_add(c.data.view().size(), std::memory_order_relaxed);
    chunk_queue_.emplace_back(ref, c);
  }
}

void Head::CloseHistOpenLocked(MemSeries* s) {
  if (!s->extra || !s->extra->open) return;
  const chunkenc::FloatHistogramChunk& o = *s->extra->open;
  if (o.NumSamples() > 0) {
    HeadChunk c;
    c.mint = o.MinTime();
    c.maxt = o.MaxTime();
    c.num_samples = o.NumSamples();
    c.enc = chunkenc::FloatHistogramChunk::kEncoding;
    c.data = CopyClosed(o.Bytes(), c.maxt);
    WrapSTLocked(s, &c, /*closed=*/true);
    QueueForChunkLog(s->ref, c);
    s->closed.push_back(std::move(c));
  }
  s->extra->open.reset();
  TrimSTLocked(s);
}

int64_t Head::InOrderMaxtLocked(const MemSeries* s) {
  if (s->open) return s->open->MaxTime();
  if (s->extra && s->extra->open && s->extra->open->NumSamples() > 0) return s->extra->open->MaxTime();
  return s->closed.empty() ? INT64_MIN : s->closed.back().maxt;
}

bool Head::OpenRangeLocked(const MemSeries* s, int64_t* mint, int64_t* maxt) {
  if (s->open && s->open->NumSamples() > 0) {
    *mint = s->open->MinTime();
    *maxt = s->open->MaxTime();
    return true;
  }
  if (s->extra && s->extra->open && s->extra->open->NumSamples() > 0) {
    *mint = s->extra->open->MinTime();
    *maxt = s->extra->open->MaxTime();
    return true;
  }
  return false;
}

bool SeriesExtras::OooHas(int64_t t) const {
  auto it = std::lower_bound(ooo.begin(), ooo.end(), t,
                             [](const storage::HistogramSample& a, int64_t x) { return a.t < x; });
  return it != ooo.end() && it->t == t;
}

Head::ChunkLogDrain Head::DrainForChunkLog(bool all) {
  ChunkLogDrain d;
  {
    base::MutexLock lock(&chunk_queue_mu_);
    if (!all) d.chunks.swap(chunk_queue_);
    chunk_queue_.clear();
    chunk_queue_bytes_.store(0, std::memory_order_relaxed);
  }
  // A chunk closing meanwhile may come both from the queue (next time) and
  // from `closed` here; the log's reader drops the second copy.
  for (uint64_t ref : SeriesRefs()) {
    MemSeries* s = GetByRef(ref);
    if (s == nullptr) continue;
    SpinGuard lock(s->mu);
    if (all) {
      for (const auto& c : s->closed) d.chunks.emplace_back(ref, c);
    }
    if (s->ooo && (all || s->ooo_dirty)) {
      NormalizeOooLocked(s);
      d.ooo.emplace_back(ref, s->ooo->samples);
      d.ooo_st.emplace_back();
      OooSTLocked(s, s->ooo->samples, &d.ooo_st.back());
    }
    // A series that lost its last out-of-order histogram logs an empty list
    // (replacing the one logged before).
    if (s->extra && (all ? !s->extra->ooo.empty() : s->ooo_dirty)) d.ooo_hist.emplace_back(ref, s->extra->ooo);
    s->ooo_dirty = false;
    int64_t omin, omax;
    if (OpenRangeLocked(s, &omin, &omax)) d.open_min = std::min(d.open_min, omin);
  }
  return d;
}

void Head::SetReplayBase(std::unordered_map<uint64_t, std::vector<HeadChunk>> chunks,
                         std::unordered_map<uint64_t, std::vector<model::Sample>> ooo,
                         std::unordered_map<uint64_t, std::vector<storage::HistogramSample>> ooo_hist,
                         std::unordered_map<uint64_t, std::vector<int64_t>> ooo_st) {
  auto base = std::make_unique<ReplayBase>();
  uint64_t max_ref = 0;
  for (const auto& [ref, list] : chunks) max_ref = std::max(max_ref, ref);
  if (max_ref < 4 * chunks.size() + (uint64_t{1} << 20)) {  // at most 4 slots an entry, or 8 MiB
    base->covered_dense.assign(chunks.empty() ? 0 : max_ref + 1, INT64_MIN);
    for (const auto& [ref, list] : chunks) {
      if (!list.empty()) base->covered_dense[ref] = list.back().maxt;
    }
  } else {
    for (const auto& [ref, list] : chunks) {
      if (!list.empty()) base->covered[ref] = list.back().maxt;
    }
  }
  base->chunks = std::move(chunks);
  base->ooo = std::move(ooo);
  base->ooo_hist = std::move(ooo_hist);
  base->ooo_st = std::move(ooo_st);
  base::MutexLock lock(&creation_mu_);
  replay_base_ = std::move(base);
  // Series replay created before the base arrived (no samples applied yet)
  // take theirs now; later ones as they are created.
  std::vector<uint64_t> refs;
  for (const auto& [ref, list] : replay_base_->chunks) refs.push_back(ref);
  for (const auto& [ref, samples] : replay_base_->ooo) refs.push_back(ref);
  for (const auto& [ref, samples] : replay_base_->ooo_hist) refs.push_back(ref);
  for (uint64_t ref : refs) {
    if (MemSeries* s = GetByRef(ref); s != nullptr) AttachReplayBaseLocked(s, ref);
  }
  // Aliases found before the base arrived: their chunks go to their series,
  // after its own. (What an alias's chunks cover is not skipped: its samples
  // come under the series' ref, and those the chunks hold are duplicates.)
  for (const auto& [alias, ref] : replay_alias_) {
    if (MemSeries* s = GetByRef(ref); s != nullptr) AttachReplayBaseLocked(s, alias);
  }
}

uint64_t Head::EndReplayBase() {
  base::MutexLock lock(&creation_mu_);
  uint64_t left = 0;
  if (replay_base_ != nullptr) {
    for (const auto& [ref, list] : replay_base_->chunks) left += list.size();
  }
  replay_base_.reset();
  if (!replay_alias_.empty()) {
    TW_LOG(Info, "wal replay: {} series came back under a new ref after a head cut dropped them; their samples "
           "went to the series the first ref created", replay_alias_.size());
  }
  replay_alias_.clear();
  has_replay_alias_.store(false, std::memory_order_relaxed);
  return left;
}

void Head::AttachReplayBaseLocked(MemSeries* s, uint64_t ref) {
  if (replay_base_ == nullptr) return;
  SpinGuard lock(s->mu);
  uint64_t samples = 0;
  int64_t mint = INT64_MAX, maxt = INT64_MIN;
  if (auto it = replay_base_->chunks.find(ref); it != replay_base_->chunks.end()) {
    std::vector<HeadChunk>& list = it->second;
    if (!list.empty() && s->closed.empty() && !s->open && !(s->extra && s->extra->open)) {
      for (const auto& c : list) samples += c.num_samples;
      mint = list.front().mint;
      maxt = list.back().maxt;
      // The open chunk of a replayed series starts after these; its block
      // boundary is set by its first sample as always.
      num_chunks_.fetch_add(list.size(), std::memory_order_relaxed);
      s->closed = std::move(list);
    } else if (!list.empty()) {
      // An alias's chunks (ReplaySeries), after what the series holds: the
      // first ref's data ends before the second ref's began.
      CloseOpenLocked(s, /*dense_ok=*/true);
      if (s->extra && s->extra->open) CloseHistOpenLocked(s);
      int64_t last = s->closed.empty() ? INT64_MIN : s->closed.back().maxt;
      for (auto& c : list) {
        if (c.mint <= last) continue;  // overlaps: the WAL's samples stay the truth
        samples += c.num_samples;
        mint = std::min(mint, c.mint);
        maxt = std::max(maxt, c.maxt);
        last = c.maxt;
        num_chunks_.fetch_add(1, std::memory_order_relaxed);
        s->closed.push_back(std::move(c));
      }
    }
    replay_base_->chunks.erase(it);
  }
  if (auto it = replay_base_->ooo.find(ref); it != replay_base_->ooo.end()) {
    std::vector<model::Sample>& list = it->second;
    auto st = replay_base_->ooo_st.find(ref);
    if (!list.empty()) {
      const bool with_st = st != replay_base_->ooo_st.end() && st->second.size() == list.size();
      mint = std::min(mint, list.front().t);
      maxt = std::max(maxt, list.back().t);
      if (!s->ooo) {
        s->ooo = std::make_unique<OooBuffer>();
        s->ooo->samples = std::move(list);
        s->ooo->sorted = s->ooo->samples.size();
        samples += s->ooo->samples.size();
        if (with_st) {
          for (size_t i = 0; i < st->second.size(); i++) NoteSTLocked(s, s->ooo->samples[i].t, st->second[i], false);
        }
      } else {
        for (size_t i = 0; i < list.size(); i++) {
          if (!s->ooo->Insert(list[i].t, list[i].v)) continue;
          samples++;
          if (with_st) NoteSTLocked(s, list[i].t, st->second[i], false);
        }
        if (s->ooo->NeedsNormalize()) NormalizeOooLocked(s);
      }
    }
    if (st != replay_base_->ooo_st.end()) replay_base_->ooo_st.erase(st);
    replay_base_->ooo.erase(it);
  }
  if (auto it = replay_base_->ooo_hist.find(ref); it != replay_base_->ooo_hist.end()) {
    std::vector<storage::HistogramSample>& list = it->second;
    if (!list.empty()) {
      if (!s->extra) s->extra = std::make_unique<SeriesExtras>();
      mint = std::min(mint, list.front().t);
      maxt = std::max(maxt, list.back().t);
      std::vector<storage::HistogramSample>& have = s->extra->ooo;
      if (have.empty()) {
        samples += list.size();
        have = std::move(list);
      } else {
        // Both sorted by time; the series' own sample wins a tie.
        for (auto& x : list) {
          auto at = std::lower_bound(have.begin(), have.end(), x.t,
                                     [](const storage::HistogramSample& a, int64_t t) { return a.t < t; });
          if (at != have.end() && at->t == x.t) continue;
          have.insert(at, std::move(x));
          samples++;
        }
      }
    }
    replay_base_->ooo_hist.erase(it);
  }
  UpdateTimes(mint, maxt);
  CountApplied(samples);
}

std::atomic<uint8_t>* Head::MetricChoice(const MemSeries* s) {
  uint32_t name = 0;
  for (uint32_t i = 0; i < s->num_labels; i++) {
    if (symbols_.Get(s->syms()[2 * i]) == model::kMetricName) {
      name = s->syms()[2 * i + 1];
      break;
    }
  }
  return &metric_choices_[name % kMetricChoices];
}

bool Head::EncodeDenser(const HeadChunk& c, HeadChunk* out, std::string_view bytes, chunkenc::DenseChoice* choice,
                        chunkenc::DenseSearch search) const {
  if (!opts_.dense_closed_chunks) return false;
  thread_local std::vector<int64_t> ts;
  thread_local std::vector<double> vs;
  thread_local std::string dense;
  thread_local std::vector<chunkenc::STRun> runs;
  ts.clear();
  vs.clear();
  dense.clear();
  // A chunk with start timestamps: the chunk inside is re-encoded, the runs kept.
  Result<chunkenc::Unwrapped> u = chunkenc::UnwrapST(c.enc, bytes, &runs);
  if (!u.ok() || !chunkenc::IsDeltaEncoding(u->enc)) return false;
  if (!chunkenc::DecodeAll(u->enc, u->data, &ts, &vs).ok() || ts.empty()) return false;
  chunkenc::EncodeDenseLike(ts.data(), vs.data(), ts.size(), &dense, choice, search);
  if (dense.size() >= u->data.size()) return false;
  out->mint = c.mint;
  out->maxt = c.maxt;
  out->num_samples = c.num_samples;
  out->enc = chunkenc::Encoding::kDense;
  if (c.enc == chunkenc::Encoding::kStartTimes) {
    thread_local std::string wrapped;
    wrapped.clear();
    chunkenc::WrapST(chunkenc::Encoding::kDense, dense, runs, &wrapped);
    out->enc = chunkenc::Encoding::kStartTimes;
    out->data = CopyClosed(wrapped, c.maxt);
    return true;
  }
  out->data = CopyClosed(dense, c.maxt);
  return true;
}

ChunkBytes Head::CopyClosed(std::string_view b, int64_t maxt) const {
  base::MutexLock lock(&slabs_mu_);
  return slabs_.Copy(b, BlockEnd(maxt, opts_.block_duration_ms));
}

std::vector<uint64_t> Head::SeriesRefs() const {
  base::ReaderMutexLock lock(&postings_mu_);
  return std::vector<uint64_t>(postings_.All().begin(), postings_.All().end());
}

uint64_t Head::DensifyClosed(const std::vector<uint64_t>& refs) {
  uint64_t done = 0;
  std::vector<HeadChunk> todo;
  for (uint64_t ref : refs) {
    MemSeries* s = GetByRef(ref);
    if (s == nullptr) continue;
    todo.clear();
    {
      SpinGuard lock(s->mu);
      for (const auto& c : s->closed) {
        // With start timestamps too: EncodeDenser keeps them.
        if (chunkenc::IsDeltaEncoding(chunkenc::InnerEncoding(c.enc, c.data.view()))) todo.push_back(c);
      }
    }
    // Encoded outside the series' lock (appenders go on); swapped in only
    // where the chunk is still the one read.
    for (const HeadChunk& c : todo) {
      HeadChunk dense;
      chunkenc::DenseChoice choice;  // outside the series' lock: its own is left alone
      if (!EncodeDenser(c, &dense, c.data.view(), &choice, chunkenc::DenseSearch::kAll)) continue;
      SpinGuard lock(s->mu);
      for (auto& cur : s->closed) {
        if (!cur.data.SameAs(c.data)) continue;
        cur = std::move(dense);
        done++;
        break;
      }
    }
  }
  return done;
}

bool Head::InOrderHasLocked(const MemSeries* s, int64_t t) const {
  chunkenc::Iterator it;
  if (s->open && s->open->NumSamples() > 0 && t >= s->open->MinTime()) {
    it.Reset(chunkenc::DeltaChunk::kEncoding, s->open->Bytes());
  } else if (s->extra && s->extra->open && s->extra->open->NumSamples() > 0 && t >= s->extra->open->MinTime()) {
    chunkenc::FloatHistogramIterator hit(s->extra->open->Bytes());
    return hit.Seek(t) && hit.t() == t;
  } else {
    auto c = std::lower_bound(s->closed.begin(), s->closed.end(), t,
                              [](const HeadChunk& c, int64_t x) { return c.maxt < x; });
    if (c == s->closed.end() || c->mint > t) return false;
    Result<chunkenc::Unwrapped> u = chunkenc::UnwrapST(c->enc, c->data.view(), nullptr);
    if (!u.ok()) return false;
    if (chunkenc::IsHistogramEncoding(u->enc)) {
      chunkenc::FloatHistogramIterator hit(u->data);
      return hit.Seek(t) && hit.t() == t;
    }
    it.Reset(u->enc, u->data);
  }
  return it.Seek(t) && it.t() == t;
}

bool Head::ApplySample(MemSeries* s, int64_t t, double v, int64_t st) {
  SpinGuard lock(s->mu);
  return ApplySampleLocked(s, t, v, st);
}

bool Head::ApplySampleLocked(MemSeries* s, int64_t t, double v, int64_t st) {
  // A start after its sample is no start (Prometheus refuses it).
  if (st > t) st = 0;
  int64_t maxt = s->open ? s->open->MaxTime() : InOrderMaxtLocked(s);
  if (t > maxt) {
    if (s->open && (s->open->NumSamples() >= opts_.samples_per_chunk || t >= s->open_block_end)) {
      CloseOpenLocked(s);
    }
    if (!s->open) {
      if (s->extra) CloseHistOpenLocked(s);  // a float after histograms: a chunk of floats
      s->open.emplace();
      // In replay the chunk fills at once: as much room as the last one took.
      if (defer_dense_.load(std::memory_order_relaxed) && !s->closed.empty()) {
        s->open->Reserve(s->closed.back().data.view().size() + 32);
      }
      s->open_block_end = BlockEnd(t, opts_.block_duration_ms);
      num_chunks_.fetch_add(1, std::memory_order_relaxed);
    }
    s->open->Append(t, v);
    if (st != 0 || s->extra) [[unlikely]] NoteSTLocked(s, t, st, /*in_order=*/true);
  } else if (t == maxt) {
    dup_total_.fetch_add(1, std::memory_order_relaxed);
    return false;
  } else {
    if (InOrderHasLocked(s, t)) {
      dup_total_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (s->extra && s->extra->OooHas(t)) {  // a histogram holds t
      dup_total_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (!s->ooo) s->ooo = std::make_unique<OooBuffer>();
    if (!s->ooo->Insert(t, v)) {
      dup_total_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    ooo_total_.fetch_add(1, std::memory_order_relaxed);
    s->ooo_dirty = true;
    if (s->ooo->NeedsNormalize()) NormalizeOooLocked(s);
    NoteSTLocked(s, t, st, /*in_order=*/false);
  }
  return true;
}

bool Head::ApplyHistogram(MemSeries* s, int64_t t, const model::FloatHistogram& h, int64_t st) {
  SpinGuard lock(s->mu);
  return ApplyHistogramLocked(s, t, h, st);
}

bool Head::ApplyHistogramLocked(MemSeries* s, int64_t t, const model::FloatHistogram& h, int64_t st) {
  if (st > t) st = 0;
  const int64_t maxt = InOrderMaxtLocked(s);
  if (t == maxt) {
    dup_total_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (!s->extra) s->extra = std::make_unique<SeriesExtras>();
  SeriesExtras& hs = *s->extra;
  if (t > maxt) {
    if (s->open) CloseOpenLocked(s);  // a histogram after floats: a chunk of histograms
    if (hs.open && (!hs.open->CanAppend(h) || hs.open->NumSamples() >= opts_.samples_per_chunk ||
                    hs.open->Bytes().size() >= chunkenc::kHistogramChunkBytes || t >= s->open_block_end)) {
      CloseHistOpenLocked(s);
    }
    if (!hs.open) {
      hs.open.emplace();
      s->open_block_end = BlockEnd(t, opts_.block_duration_ms);
      num_chunks_.fetch_add(1, std::memory_order_relaxed);
    }
    hs.open->Append(t, h);
    NoteSTLocked(s, t, st, /*in_order=*/true);
    return true;
  }
  if (InOrderHasLocked(s, t) || (s->ooo && s->ooo->Has(t)) || hs.OooHas(t)) {
    dup_total_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  auto at = std::lower_bound(hs.ooo.begin(), hs.ooo.end(), t,
                             [](const storage::HistogramSample& a, int64_t x) { return a.t < x; });
  hs.ooo.insert(at, storage::HistogramSample{t, h, st});  // out of order: the sample keeps its own
  ooo_total_.fetch_add(1, std::memory_order_relaxed);
  s->ooo_dirty = true;
  return true;
}

SeriesSnapshot Head::Snapshot(const MemSeries* s, int64_t mint, int64_t maxt) const {
  SeriesSnapshot snap;
  SpinGuard lock(s->mu);
  for (const auto& c : s->closed) {
    if (c.maxt >= mint && c.mint <= maxt) snap.chunks.push_back(c);
  }
  if (s->open && s->open->NumSamples() > 0 && s->open->MaxTime() >= mint && s->open->MinTime() <= maxt) {
    HeadChunk c;
    c.mint = s->open->MinTime();
    c.maxt = s->open->MaxTime();
    c.num_samples = s->open->NumSamples();
    c.enc = chunkenc::DeltaChunk::kEncoding;
    c.data = ChunkBytes::Copy(s->open->Bytes());
    WrapSTLocked(s, &c, /*closed=*/false);
    snap.chunks.push_back(std::move(c));
  }
  if (s->ooo) {
    s->ooo->CopyRange(mint, maxt, &snap.ooo);
    OooSTLocked(s, snap.ooo, &snap.ooo_st);
  }
  if (s->extra) {
    const SeriesExtras& hs = *s->extra;
    if (hs.open && hs.open->NumSamples() > 0 && hs.open->MaxTime() >= mint && hs.open->MinTime() <= maxt) {
      HeadChunk c;
      c.mint = hs.open->MinTime();
      c.maxt = hs.open->MaxTime();
      c.num_samples = hs.open->NumSamples();
      c.enc = chunkenc::FloatHistogramChunk::kEncoding;
      c.data = ChunkBytes::Copy(hs.open->Bytes());
      WrapSTLocked(s, &c, /*closed=*/false);
      snap.chunks.push_back(std::move(c));
    }
    for (const auto& x : hs.ooo) {
      if (x.t >= mint && x.t <= maxt) snap.ooo_hist.push_back(x);
    }
  }
  return snap;
}

Head::PersistSet Head::SnapshotForPersist(int64_t boundary, bool close_all) {
  PersistSet set;
  std::vector<MemSeries*> all;
  {
    base::ReaderMutexLock lock(&postings_mu_);
    for (uint64_t ref : postings_.All()) all.push_back(GetByRef(ref));
  }
  for (MemSeries* s : all) {
    if (s == nullptr) continue;
    SeriesSnapshot snap;
    {
      SpinGuard lock(s->mu);
      // Persisted next and then dropped: a dense copy would be decoded
      // again by WriteBlocks, which encodes the block's chunks itself.
      if (s->open && (close_all || s->open->MaxTime() < boundary)) CloseOpenLocked(s, /*dense_ok=*/false);
      if (s->extra && s->extra->open && (close_all || s->extra->open->MaxTime() < boundary)) CloseHistOpenLocked(s);
      for (const auto& c : s->closed) {
        if (c.maxt < boundary) snap.chunks.push_back(c);
      }
      if (s->ooo) {
        NormalizeOooLocked(s);
        for (const auto& smp : s->ooo->samples) {
          if (smp.t < boundary) snap.ooo.push_back(smp);
        }
        OooSTLocked(s, snap.ooo, &snap.ooo_st);
      }
      if (s->extra) {
        for (const auto& x : s->extra->ooo) {
          if (x.t < boundary) snap.ooo_hist.push_back(x);
        }
      }
    }
    if (snap.chunks.empty() && snap.ooo.empty() && snap.ooo_hist.empty()) continue;
    for (const auto& c : snap.chunks) {
      set.mint = std::min(set.mint, c.mint);
      set.maxt = std::max(set.maxt, c.maxt);
    }
    if (!snap.ooo.empty()) {
      set.mint = std::min(set.mint, snap.ooo.front().t);
      set.maxt = std::max(set.maxt, snap.ooo.back().t);
    }
    if (!snap.ooo_hist.empty()) {
      set.mint = std::min(set.mint, snap.ooo_hist.front().t);
      set.maxt = std::max(set.maxt, snap.ooo_hist.back().t);
    }
    set.series.emplace_back(s, std::move(snap));
  }
  // Sorted by labels, compared through the symbol table: no label strings
  // are materialized for the whole head at once.
  std::sort(set.series.begin(), set.series.end(),
            [this](const auto& a, const auto& b) { return LabelsLess(a.first, b.first); });
  return set;
}

bool Head::LabelsLess(const MemSeries* a, const MemSeries* b) const {
  // Lexicographic over (name, value) pairs, as model::Labels compares.
  const uint32_t n = std::min(a->num_labels, b->num_labels);
  for (uint32_t i = 0; i < 2 * n; i++) {
    const uint32_t x = a->syms()[i], y = b->syms()[i];
    if (x == y) continue;
    return symbols_.Get(x) < symbols_.Get(y);
  }
  return a->num_labels < b->num_labels;
}

void Head::Truncate(const PersistSet& set) {
  uint64_t removed_samples = 0, removed_chunks = 0;
  for (const auto& [s, snap] : set.series) {
    SpinGuard lock(s->mu);
    // Persisted chunks are a prefix of `closed` (chunks are only appended).
    size_t n = 0;
    while (n < s->closed.size() && n < snap.chunks.size() && s->closed[n].data.SameAs(snap.chunks[n].data)) {
      removed_samples += s->closed[n].num_samples;
      n++;
    }
    removed_chunks += n;
    s->closed.EraseFront(n);
    if (s->ooo && !snap.ooo.empty()) {
      NormalizeOooLocked(s);
      std::vector<model::Sample> keep;
      size_t j = 0;
      for (const auto& smp : s->ooo->samples) {
        while (j < snap.ooo.size() && snap.ooo[j].t < smp.t) j++;
        if (j < snap.ooo.size() && snap.ooo[j].t == smp.t) {
          removed_samples++;
          continue;
        }
        keep.push_back(smp);
      }
      if (keep.empty()) {
        s->ooo.reset();
      } else {
        s->ooo->samples = std::move(keep);
        s->ooo->sorted = s->ooo->samples.size();
        s->ooo->tail_ts.clear();
      }
    }
    if (s->extra && !snap.ooo_hist.empty()) {
      // Both sorted by time: drop the persisted ones.
      std::vector<storage::HistogramSample>& ooo = s->extra->ooo;
      // A plain reference: clang 14 refuses lambdas capturing structured bindings.
      const std::vector<storage::HistogramSample>& persisted = snap.ooo_hist;
      size_t j = 0;
      const size_t before = ooo.size();
      std::erase_if(ooo, [&persisted, &j](const storage::HistogramSample& x) {
        while (j < persisted.size() && persisted[j].t < x.t) j++;
        return j < persisted.size() && persisted[j].t == x.t;
      });
      removed_samples += before - ooo.size();
    }
    if (s->extra) {
      TrimSTLocked(s);
      if (s->extra->Unused()) s->extra.reset();
    }
  }
  num_samples_.fetch_sub(std::min(removed_samples, num_samples_.load()), std::memory_order_relaxed);
  num_chunks_.fetch_sub(std::min(removed_chunks, num_chunks_.load()), std::memory_order_relaxed);

  // Recompute the in-order time range and drop series left without data.
  // Dropping needs appenders out of the way: one may hold a pointer it looked
  // up before we unlink the series.
  ExclusiveAppendLock append_lock(this);
  base::MutexLock create_lock(&creation_mu_);
  int64_t mint = INT64_MAX, maxt = INT64_MIN;
  std::vector<MemSeries*> all, dead;
  {
    base::ReaderMutexLock lock(&postings_mu_);
    for (uint64_t ref : postings_.All()) all.push_back(GetByRef(ref));
  }
  for (MemSeries* s : all) {
    SpinGuard lock(s->mu);
    bool empty = s->closed.empty() && !s->open && !s->ooo && !s->extra;
    if (empty) {
      dead.push_back(s);
      continue;
    }
    int64_t omin, omax;
    const bool has_open = OpenRangeLocked(s, &omin, &omax);
    if (!s->closed.empty()) mint = std::min(mint, s->closed.front().mint);
    else if (has_open) mint = std::min(mint, omin);
    maxt = std::max(maxt, InOrderMaxtLocked(s));
  }
  min_time_.store(mint);
  max_time_.store(maxt);
  {
    // The chunks of block ranges ending at or before the head's first
    // sample are gone (or held by readers): stop carving their slabs.
    base::MutexLock lock(&slabs_mu_);
    slabs_.DropGroupsUpTo(mint);
  }
  if (dead.empty()) return;
  // The dead refs, and their label pairs as symbol ids (name << 32 | value),
  // each once: a cut that drops a million series must not build a million
  // label sets to find the few thousand postings lists they are in.
  std::vector<index::SeriesRef> dead_refs;
  std::vector<uint64_t> dead_pairs;
  for (MemSeries* s : dead) {
    dead_refs.push_back(s->ref);
    for (uint32_t i = 0; i < s->num_labels; i++) {
      dead_pairs.push_back(uint64_t{s->syms()[2 * i]} << 32 | s->syms()[2 * i + 1]);
    }
    Stripe& st = stripes_[s->hash & (kStripes - 1)];
    base::WriterMutexLock lock(&st.mu);
    st.Erase(s);
  }
  std::sort(dead_refs.begin(), dead_refs.end());
  std::sort(dead_pairs.begin(), dead_pairs.end());
  dead_pairs.erase(std::unique(dead_pairs.begin(), dead_pairs.end()), dead_pairs.end());
  {
    // Readers resolve a ref and copy its data under postings_mu_ held
    // shared, so once the refs are unpublished under the exclusive lock no
    // reader can still reach these series. Every reader of symbols and ref
    // pages holds that lock (or is an appender, excluded too): the dead
    // series' strings and the pages left empty can go now.
    base::WriterMutexLock lock(&postings_mu_);
    std::vector<index::MemPostings::Pair> affected;
    affected.reserve(dead_pairs.size());
    for (uint64_t p : dead_pairs) {
      affected.emplace_back(symbols_.Get(static_cast<uint32_t>(p >> 32)), symbols_.Get(static_cast<uint32_t>(p)));
    }
    postings_.Delete(dead_refs, affected);
    std::vector<uint64_t> pages;
    for (MemSeries* s : dead) {
      SetRef(s->ref, nullptr);
      symbols_.Release(s->syms(), 2 * size_t{s->num_labels});
      pages.push_back(s->ref >> kPageBits);
    }
    symbols_.Compact();
    std::sort(pages.begin(), pages.end());
    pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
    // A page wholly before the next ref to hand out gets no new series
    // (replay's creations come before any cut).
    const uint64_t frontier = next_ref_.load(std::memory_order_relaxed) >> kPageBits;
    for (uint64_t p : pages) {
      if (p >= frontier) continue;
      std::atomic<MemSeries*>* page = pages_[p].load(std::memory_order_relaxed);
      if (page == nullptr) continue;
      bool empty = true;
      for (uint32_t i = 0; i < kPageSize && empty; i++) empty = page[i].load(std::memory_order_relaxed) == nullptr;
      if (!empty) continue;
      pages_[p].store(nullptr, std::memory_order_release);
      delete[] page;
    }
  }
  for (MemSeries* s : dead) MemSeries::Delete(s);
  num_series_.fetch_sub(dead.size(), std::memory_order_relaxed);
}

void Head::ForEachSeries(const std::function<void(uint64_t, const model::Labels&, const SeriesSnapshot&)>& fn) {
  std::vector<uint64_t> refs;
  {
    base::ReaderMutexLock lock(&postings_mu_);
    refs.assign(postings_.All().begin(), postings_.All().end());
  }
  SeriesSnapshot snap;
  for (uint64_t ref : refs) {
    if (SnapshotByRef(ref, INT64_MIN, INT64_MAX, &snap)) fn(ref, snap.labels, snap);
  }
}

namespace {

// LogCommit's buffers, a set a thread. A body of new series makes a series
// record of megabytes (its labels, twice with label_bytes), which a thread
// kept for its life: four serving threads held 8 MB after the peers
// harness's first step (80 B a series of its 101 k). Trim keeps what is
// small, as a samples record is.
struct LogScratch {
  std::vector<std::string> recs = std::vector<std::string>(4);
  std::string label_bytes;
  std::vector<size_t> ends;
  std::vector<std::pair<uint64_t, std::string_view>> series;

  static constexpr size_t kKeepBytes = 256u << 10;
  size_t Bytes() const {
    size_t b = label_bytes.capacity() + ends.capacity() * sizeof(size_t) + series.capacity() * sizeof(series[0]);
    for (const std::string& r : recs) b += r.capacity();
    return b;
  }
  void Trim() {
    for (std::string& r : recs) {
      if (r.capacity() > kKeepBytes) std::string().swap(r);
    }
    if (Bytes() > kKeepBytes) {
      std::string().swap(label_bytes);
      std::vector<size_t>().swap(ends);
      std::vector<std::pair<uint64_t, std::string_view>>().swap(series);
    }
  }
};

LogScratch& ThreadLogScratch() {
  thread_local LogScratch scratch;
  return scratch;
}

}  // namespace

size_t Head::ThreadLogScratchBytes() { return ThreadLogScratch().Bytes(); }

Status Head::LogCommit(const std::vector<MemSeries*>& unlogged, const std::vector<wal::RefSample>& samples,
                       const std::vector<wal::RefHistogramSample>& hist_samples,
                       const std::vector<wal::RefSampleST>& st_samples) {
  if (wal_ == nullptr) return Status::OK();
  LogScratch& scratch = ThreadLogScratch();
  auto& [recs, label_bytes, ends, series] = scratch;
  recs.resize(4);
  size_t n = 0;
  if (!unlogged.empty()) {
    // Each new series' labels encoded straight from the symbol table (as
    // model::AppendEncodedLabels would): a body of new series builds no
    // label sets, only this record.
    label_bytes.clear();
    ends.clear();
    for (const MemSeries* s : unlogged) {
      PutVarint64(&label_bytes, s->num_labels);
      for (uint32_t i = 0; i < 2 * s->num_labels; i++) PutLengthPrefixed(&label_bytes, symbols_.Get(s->syms()[i]));
      ends.push_back(label_bytes.size());
    }
    series.clear();
    size_t begin = 0;
    for (size_t i = 0; i < unlogged.size(); i++) {
      series.emplace_back(unlogged[i]->ref, std::string_view(label_bytes).substr(begin, ends[i] - begin));
      begin = ends[i];
    }
    wal::EncodeSeriesEncoded(series, &recs[n++]);
  }
  if (!samples.empty()) {
    wal::EncodeSamples(samples, &recs[n++]);
    int64_t maxt;
    if (wal::SamplesMaxTime(recs[n - 1], &maxt)) NoteLogged(maxt);  // the encoder's own figure
  }
  if (!st_samples.empty()) {
    wal::EncodeSamplesST(st_samples, &recs[n++]);
    int64_t maxt;
    if (wal::SamplesSTMaxTime(recs[n - 1], &maxt)) NoteLogged(maxt);
  }
  // After the floats: replay applies them in this order, as Commit does.
  if (!hist_samples.empty()) {
    wal::EncodeHistogramSamples(hist_samples, &recs[n++]);
    int64_t maxt;
    if (wal::HistogramSamplesMaxTime(recs[n - 1], &maxt)) NoteLogged(maxt);
  }
  recs.resize(n);
  if (n == 0) return Status::OK();
  Status st = wal_->Log(recs);
  scratch.Trim();
  RETURN_IF_ERROR(st);
  if (sync_each_commit_) RETURN_IF_ERROR(wal_->Sync());
  for (MemSeries* s : unlogged) s->logged.store(true, std::memory_order_release);
  return Status::OK();
}

void Head::ReplaySeries(const std::vector<wal::RefSeries>& series) {
  base::MutexLock lock(&creation_mu_);
  for (const auto& rs : series) {
    if (GetByRef(rs.ref) != nullptr) continue;
    uint64_t h = rs.labels.Hash();
    if (MemSeries* s = Lookup(rs.labels, h); s != nullptr) {
      if (!replay_alias_.emplace(rs.ref, s->ref).second) continue;
      has_replay_alias_.store(true, std::memory_order_relaxed);
      ReserveRef(rs.ref);
      AttachReplayBaseLocked(s, rs.ref);
      continue;
    }
    MemSeries* s = CreateLocked(rs.ref, rs.labels, h);
    s->logged.store(true, std::memory_order_relaxed);
    AttachReplayBaseLocked(s, rs.ref);
  }
}

template <typename Sample>
void Head::ResolveAliases(std::vector<Sample>* samples) {
  if (!has_replay_alias_.load(std::memory_order_relaxed)) return;
  base::MutexLock lock(&creation_mu_);
  for (Sample& x : *samples) {
    if (auto it = replay_alias_.find(x.ref); it != replay_alias_.end()) x.ref = it->second;
  }
}

void Head::ResolveReplayAliases(std::vector<wal::RefSample>* samples) { ResolveAliases(samples); }
void Head::ResolveReplayAliases(std::vector<wal::RefSampleST>* samples) { ResolveAliases(samples); }
void Head::ResolveReplayAliases(std::vector<wal::RefHistogramSample>* samples) { ResolveAliases(samples); }

namespace {

// Stable LSD radix sort of samples by ref, in as few passes of at most 16
// bits as the largest ref needs. *tmp only grows (to the capacity of *a,
// which the caller reserves for its whole batch): a new buffer's pages are
// cleared by the kernel on first touch, which costs more than the sort.
void SortByRef(Head::ReplayBatch* a, Head::ReplayBatch* tmp) {
  uint64_t max_ref = 0;
  for (const auto& s : *a) max_ref = std::max(max_ref, s.ref);
  const int bits = max_ref == 0 ? 0 : 64 - __builtin_clzll(max_ref);
  if (bits == 0) return;
  const int passes = (bits + 15) / 16;
  const int digit = (bits + passes - 1) / passes;
  const uint64_t mask = (uint64_t{1} << digit) - 1;
  std::vector<size_t> count(size_t{1} << digit);
  const size_t n = a->size();
  if (tmp->size() < n) {
    if (tmp->capacity() < n) {
      Head::ReplayBatch fresh;
      fresh.reserve(std::max(n, a->capacity()));
      tmp->swap(fresh);
    }
    tmp->resize(n);
  }
  wal::RefSample* from = a->data();
  wal::RefSample* to = tmp->data();
  for (int shift = 0; shift < bits; shift += digit) {
    std::fill(count.begin(), count.end(), 0);
    for (size_t i = 0; i < n; i++) count[(from[i].ref >> shift) & mask]++;
    size_t sum = 0;
    for (auto& c : count) sum += std::exchange(c, sum);
    for (size_t i = 0; i < n; i++) to[count[(from[i].ref >> shift) & mask]++] = from[i];
    std::swap(from, to);
  }
  if (from != a->data()) std::copy(from, from + n, a->data());  // an odd number of passes
}

}  // namespace

void Head::ReplayRun(const wal::RefSample* run, size_t n, bool skip_covered, ReplayTally* tally) {
  MemSeries* ms = GetByRef(run[0].ref);
  if (ms == nullptr) {
    tally->unknown += n;
    tally->max_unknown = std::max(tally->max_unknown, run[0].ref);
    return;
  }
  const int64_t covered = skip_covered && replay_base_ != nullptr ? replay_base_->Covered(ms->ref) : INT64_MIN;
  SpinGuard lock(ms->mu);
  for (size_t i = 0; i < n; i++) {
    const int64_t t = run[i].t;
    if (t <= covered) {
      tally->skipped++;
      continue;
    }
    // Written by a version that had no time bounds: no block can hold it
    // (a block's range would overflow), and it would stop every cut.
    if (t < model::kMinTime || t > model::kMaxTime) {
      (t < model::kMinTime ? too_old_total_ : too_new_total_).fetch_add(1, std::memory_order_relaxed);
      TW_LOG(Warn, "wal replay: dropped a sample of series {} at unsupported timestamp {}", ms->ref, t);
      continue;
    }
    tally->applied += ApplySampleLocked(ms, t, run[i].v, 0) ? 1 : 0;
    tally->mint = std::min(tally->mint, t);
    tally->maxt = std::max(tally->maxt, t);
  }
}

size_t Head::AppendUncovered(const std::vector<wal::RefSample>& samples, int64_t from, ReplayBatch* out) const {
  const size_t before = out->size();
  const ReplayBase* base = replay_base_.get();
  for (const auto& smp : samples) {
    if (smp.t >= from && (base == nullptr || smp.t > base->Covered(smp.ref))) out->push_back(smp);
  }
  return samples.size() - (out->size() - before);
}

void Head::ReplaySamples(ReplayBatch* batch, ReplayBatch* scratch, int workers, bool skip_covered) {
  if (batch->empty()) return;
  SortByRef(batch, scratch);
  const wal::RefSample* b = batch->data();
  const size_t n = batch->size();
  // Contiguous shares that end where a series' run ends.
  workers = static_cast<int>(std::clamp<size_t>(static_cast<size_t>(std::max(workers, 1)), 1, n / 4096 + 1));
  std::vector<size_t> cut{0};
  for (int w = 1; w < workers; w++) {
    size_t i = std::max(cut.back(), n * static_cast<size_t>(w) / static_cast<size_t>(workers));
    while (i < n && i > 0 && b[i].ref == b[i - 1].ref) i++;
    cut.push_back(i);
  }
  cut.push_back(n);
  std::vector<ReplayTally> tallies(cut.size() - 1);
  auto apply = [&](size_t w) {
    for (size_t i = cut[w]; i < cut[w + 1];) {
      size_t j = i + 1;
      while (j < cut[w + 1] && b[j].ref == b[i].ref) j++;
      ReplayRun(b + i, j - i, skip_covered, &tallies[w]);
      i = j;
    }
  };
  std::vector<std::thread> threads;
  for (size_t w = 1; w < tallies.size(); w++) threads.emplace_back(apply, w);
  apply(0);
  for (auto& t : threads) t.join();
  for (const ReplayTally& t : tallies) {
    replay_unknown_.fetch_add(t.unknown, std::memory_order_relaxed);
    if (t.unknown > 0) ReserveRef(t.max_unknown);
    replay_skipped_.fetch_add(t.skipped, std::memory_order_relaxed);
    UpdateTimes(t.mint, t.maxt);
    CountApplied(t.applied);
  }
}

// Replays samples of a side record kind (histograms, floats with start
// timestamps) in log order on this thread; `apply(series, sample)` applies
// one and returns whether it was new.
template <typename S, typename Apply>
void Head::ReplayInOrder(const std::vector<S>& samples, bool skip_covered, int64_t from, const char* what,
                         const Apply& apply) {
  const ReplayBase* base = skip_covered ? replay_base_.get() : nullptr;
  uint64_t applied = 0, unknown = 0, skipped = 0;
  int64_t mint = INT64_MAX, maxt = INT64_MIN;
  for (const auto& x : samples) {
    if (skip_covered && (x.t < from || (base != nullptr && x.t <= base->Covered(x.ref)))) {
      skipped++;
      continue;
    }
    MemSeries* ms = GetByRef(x.ref);
    if (ms == nullptr) {
      unknown++;
      ReserveRef(x.ref);
      continue;
    }
    if (x.t < model::kMinTime || x.t > model::kMaxTime) {
      (x.t < model::kMinTime ? too_old_total_ : too_new_total_).fetch_add(1, std::memory_order_relaxed);
      TW_LOG(Warn, "wal replay: dropped a {} of series {} at unsupported timestamp {}", what, ms->ref, x.t);
      continue;
    }
    applied += apply(ms, x) ? 1 : 0;
    mint = std::min(mint, x.t);
    maxt = std::max(maxt, x.t);
  }
  replay_unknown_.fetch_add(unknown, std::memory_order_relaxed);
  replay_skipped_.fetch_add(skipped, std::memory_order_relaxed);
  UpdateTimes(mint, maxt);
  CountApplied(applied);
}

void Head::ReplayHistograms(const std::vector<wal::RefHistogramSample>& samples, bool skip_covered, int64_t from) {
  ReplayInOrder(samples, skip_covered, from, "histogram", [this](MemSeries* ms, const wal::RefHistogramSample& x) {
    // A record that decodes but holds a histogram storage cannot take
    // (written by a damaged or other build): dropped like an unknown ref.
    if (!x.h.Validate().ok()) {
      TW_LOG(Warn, "wal replay: dropped an invalid histogram of series {} at {}", ms->ref, x.t);
      return false;
    }
    return ApplyHistogram(ms, x.t, x.h, x.st);
  });
}

void Head::ReplaySamplesST(const std::vector<wal::RefSampleST>& samples, bool skip_covered, int64_t from) {
  ReplayInOrder(samples, skip_covered, from, "sample",
                [this](MemSeries* ms, const wal::RefSampleST& x) { return ApplySample(ms, x.t, x.v, x.st); });
}

Head::MemoryStats Head::GetMemoryStats() const {
  MemoryStats m;
  base::ReaderMutexLock lock(&postings_mu_);
  m.postings = postings_.MemoryBytes();
  m.symbols = symbols_.MemoryBytes();
  {
    base::MutexLock sl(&slabs_mu_);
    m.closed_slack = slabs_.Unused();
  }
  for (size_t i = 0; i < kStripes; i++) {
    base::ReaderMutexLock sl(&stripes_[i].mu);
    if (stripes_[i].slots != nullptr) m.series_maps += (size_t{stripes_[i].mask} + 1) * sizeof(MemSeries*);
  }
  m.series_maps += kStripes * sizeof(Stripe);
  const uint64_t last_page = next_ref_.load(std::memory_order_relaxed) >> kPageBits;
  for (uint64_t p = 0; p <= last_page && p < kMaxPages; p++) {
    if (pages_[p].load(std::memory_order_relaxed) != nullptr) m.series_maps += kPageSize * sizeof(std::atomic<MemSeries*>);
  }
  for (uint64_t ref : postings_.All()) {
    const MemSeries* s = GetByRef(ref);
    if (s == nullptr) continue;
    m.series += ::malloc_usable_size(const_cast<MemSeries*>(s));
    SpinGuard sl(s->mu);
    if (s->closed.capacity() > 0) m.chunk_lists += ::malloc_usable_size(const_cast<HeadChunk*>(s->closed.data()));
    for (const auto& c : s->closed) {
      m.closed_bytes += c.data.MemoryBytes();
      m.closed_mapped += c.data.MappedBytes();
      m.closed_samples += c.num_samples;
    }
    if (s->open) {
      m.open_bytes += s->open->MemoryBytes();
      m.open_samples += s->open->NumSamples();
    }
    if (s->ooo) m.ooo += sizeof(*s->ooo) + s->ooo->samples.capacity() * sizeof(model::Sample);
    if (s->extra) {
      m.series += sizeof(SeriesExtras) + s->extra->st.capacity() * sizeof(chunkenc::STRun);
      if (s->extra->open) {
        m.open_bytes += s->extra->open->MemoryBytes();
        m.open_samples += s->extra->open->NumSamples();
      }
      for (const auto& x : s->extra->ooo) {
        m.ooo += sizeof(x) + (x.h.positive_buckets.capacity() + x.h.negative_buckets.capacity() +
                              x.h.custom_values.capacity()) * sizeof(double) +
                 (x.h.positive_spans.capacity() + x.h.negative_spans.capacity()) * sizeof(model::Span);
      }
    }
  }
  return m;
}

index::MemPostings::Cardinality Head::Cardinality(size_t limit) const {
  base::ReaderMutexLock lock(&postings_mu_);
  return postings_.Stats(model::kMetricName, limit);
}

Result<index::Postings> Head::PostingsFor(const model::Matchers& ms) const {
  base::ReaderMutexLock lock(&postings_mu_);
  return index::PostingsForMatchers(postings_, ms);
}

Result<std::vector<std::string>> Head::LabelValuesFor(std::string_view name, const model::Matchers& ms) const {
  if (ms.empty()) {
    base::ReaderMutexLock lock(&postings_mu_);
    return postings_.SortedLabelValues(name);
  }
  ASSIGN_OR_RETURN(index::Postings refs, PostingsFor(ms));
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  for (uint64_t ref : refs) {
    base::ReaderMutexLock lock(&postings_mu_);
    MemSeries* s = GetByRef(ref);
    if (s == nullptr) continue;
    for (uint32_t i = 0; i < s->num_labels; i++) {
      if (symbols_.Get(s->syms()[2 * i]) == name) {
        std::string v(symbols_.Get(s->syms()[2 * i + 1]));
        if (seen.insert(v).second) out.push_back(std::move(v));
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::vector<std::string>> Head::LabelNamesFor(const model::Matchers& ms) const {
  if (ms.empty()) {
    base::ReaderMutexLock lock(&postings_mu_);
    return postings_.LabelNames();
  }
  ASSIGN_OR_RETURN(index::Postings refs, PostingsFor(ms));
  std::unordered_set<std::string> seen;
  for (uint64_t ref : refs) {
    base::ReaderMutexLock lock(&postings_mu_);
    MemSeries* s = GetByRef(ref);
    if (s == nullptr) continue;
    for (uint32_t i = 0; i < s->num_labels; i++) seen.emplace(symbols_.Get(s->syms()[2 * i]));
  }
  std::vector<std::string> out(seen.begin(), seen.end());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace trainwatch::tsdb
