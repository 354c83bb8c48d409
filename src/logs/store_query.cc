// LogStore reads: Select (newest first, cursor paging), Histogram, label names and values.

#include <zstd.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <variant>

#include "base/mutex.h"
#include "logs/store.h"
#include "logs/block.h"
#include "logs/store_internal.h"

namespace trainwatch::logs {

namespace {

// A WHERE clause with its bound values, for one partition.
struct Where {
  std::string sql;
  std::vector<std::variant<int64_t, std::string>> binds;
  bool empty_result = false;  // no stream of the partition matches

  void Add(const std::string& cond) { sql += sql.empty() ? cond : " AND " + cond; }
  std::string Param(std::variant<int64_t, std::string> v) {
    binds.push_back(std::move(v));
    return "?" + std::to_string(binds.size());
  }
  void BindTo(Stmt* s) const {
    for (size_t i = 0; i < binds.size(); ++i) {
      if (auto* n = std::get_if<int64_t>(&binds[i])) s->Bind(static_cast<int>(i) + 1, *n);
      else s->Bind(static_cast<int>(i) + 1, std::get<std::string>(binds[i]));
    }
  }
};

std::string IdList(const std::vector<int64_t>& ids) {
  std::string out = "(";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  return out + ")";
}

// Level bits (block.h) a line of one alternative may have.
uint32_t LevelMask(const Query& a) {
  uint32_t mask = a.MatchesLevel("") ? 1u : 0u;
  for (std::string_view l : kLevels) {
    if (a.MatchesLevel(l)) mask |= LevelBit(l);
  }
  bool other = true;  // a level outside the canonical set
  for (const FieldFilter& f : a.levels) {
    bool ordering = f.op == CmpOp::kGt || f.op == CmpOp::kGe || f.op == CmpOp::kLt || f.op == CmpOp::kLe;
    if (ordering || (f.op == CmpOp::kEq && LevelRank(f.value) > 0)) other = false;
  }
  return other ? mask | (1u << 7) : mask;
}

// Conditions on the selector, common to blocks and chunks.
void StreamsAndTime(const LogStore::Partition& p, const Query& q, Where* w) {
  if (q.matchers.empty()) return;
  std::vector<int64_t> ids;
  for (const auto& [id, labels] : p.streams) {
    if (q.MatchesStream(labels)) ids.push_back(id);
  }
  if (ids.empty()) w->empty_result = true;
  else if (ids.size() < p.streams.size()) w->Add("stream IN " + IdList(ids));
}

// Candidate blocks: their time range overlaps, their stream matches, and for
// some alternative their level mask and full-text index admit it. Lines are
// checked one by one after.
Where BlockWhere(const LogStore::Partition& p, const Query& q, int64_t start_ns, int64_t end_ns) {
  Where w;
  w.Add("t_max >= " + w.Param(start_ns) + " AND t_min <= " + w.Param(end_ns));
  StreamsAndTime(p, q, &w);
  std::string any;
  bool all = false;
  for (const Query* a : q.Alternatives()) {
    std::string cond;
    uint32_t mask = LevelMask(*a);
    if (mask == 0) continue;  // no line can match this alternative
    if (mask != 0xff) cond = "levels & " + std::to_string(mask) + " != 0";
    std::string fts = a->FtsTokens();
    if (!fts.empty()) {
      std::string in = "id IN (SELECT rowid FROM blocks_fts WHERE blocks_fts MATCH " + w.Param(fts) + ")";
      cond = cond.empty() ? in : cond + " AND " + in;
    }
    if (cond.empty()) all = true;
    any += any.empty() ? "(" + cond + ")" : " OR (" + cond + ")";
  }
  if (any.empty() && !all) w.empty_result = true;
  else if (!all) w.Add("(" + any + ")");
  return w;
}

// Chunks of waiting lines (not in the full-text index): time and streams.
Where ChunkWhere(const LogStore::Partition& p, const Query& q, int64_t start_ns, int64_t end_ns) {
  Where w;
  w.Add("t_max >= " + w.Param(start_ns) + " AND t_min <= " + w.Param(end_ns));
  StreamsAndTime(p, q, &w);
  return w;
}

// Reads candidate blocks of a partition: meta on Open, body when asked.
class BlockSource {
 public:
  BlockSource(LogStore::Partition* p, ZSTD_DCtx* dctx)
      : p_(p), dctx_(dctx), meta_(p->db, "SELECT meta FROM blocks WHERE id = ?"),
        body_(p->db, "SELECT body FROM blocks WHERE id = ?") {}
  Status Open(int64_t id, BlockReader* r) {
    RETURN_IF_ERROR(Fetch(&meta_, id));
    id_ = id;
    return r->Open(dctx_, meta_.Text(0), p_->path + ": block " + std::to_string(id));
  }
  Status Body(BlockReader* r) {
    if (r->body_loaded()) return Status::OK();
    RETURN_IF_ERROR(Fetch(&body_, id_));
    return r->LoadBody(dctx_, body_.Text(0));
  }

 private:
  Status Fetch(Stmt* s, int64_t id) {
    RETURN_IF_ERROR(s->status());
    s->Reset();
    s->Bind(1, id);
    if (!s->Step()) {
      RETURN_IF_ERROR(s->status());
      return Status::Corruption("logs: " + p_->path + ": block " + std::to_string(id) + " vanished");
    }
    return Status::OK();
  }
  LogStore::Partition* p_;
  ZSTD_DCtx* dctx_;
  Stmt meta_, body_;
  int64_t id_ = 0;
};

const model::Labels* StreamLabels(const LogStore::Partition& p, int64_t id, Status* st) {
  auto it = p.streams.find(id);
  if (it != p.streams.end()) return &it->second;
  *st = Status::Corruption("logs: " + p.path + ": line of unknown stream " + std::to_string(id));
  return nullptr;
}

Record ToRecord(const LineView& v, int64_t t, uint8_t flags) {
  Record r;
  r.time_ns = t;
  r.labels = *v.labels;
  r.level = std::string(v.level);
  r.message = std::string(v.message);
  r.fields = std::string(v.fields);
  r.truncated = (flags & kFlagTruncated) != 0;
  return r;
}

// Visits the lines of a partition that match `q` in [start, end]: those of
// chunks first (any order), then of candidate blocks in `order` (an ORDER BY
// over blocks columns); `extra` narrows both with an SQL condition on their
// common columns. `stop(block t_max, block seq_min)` is asked before each
// block, `keep(t, seq)` before a line is checked. `fn(view, t, seq, flags)`
// gets each match, with its message and fields when `want_body`.
template <typename Stop, typename Keep, typename Fn>
Status VisitLines(LogStore::Partition* p, ZSTD_DCtx* dctx, const Query& q, int64_t start_ns, int64_t end_ns,
                  const std::string& extra, const char* order, bool want_body, Stop stop, Keep keep, Fn fn) {
  Status st;
  BlockReader r;
  {
    Where w = ChunkWhere(*p, q, start_ns, end_ns);
    if (w.empty_result) return Status::OK();
    if (!extra.empty()) w.Add(extra);
    Stmt s(p->db, "SELECT id, stream, meta, body FROM chunks WHERE " + w.sql);
    w.BindTo(&s);
    while (s.Step()) {
      const model::Labels* labels = StreamLabels(*p, s.Int(1), &st);
      if (labels == nullptr) return st;
      RETURN_IF_ERROR(r.OpenRaw(s.Text(2), p->path + ": chunk " + std::to_string(s.Int(0))));
      RETURN_IF_ERROR(r.LoadRawBody(s.Text(3)));
      for (size_t i = 0; i < r.size(); ++i) {
        int64_t t = r.time(i);
        if (t < start_ns || t > end_ns || !keep(t, r.seq(i))) continue;
        LineView v{labels, r.level(i), r.message(i), r.fields(i)};
        if (q.Matches(v)) fn(v, t, r.seq(i), r.flags(i));
      }
    }
    RETURN_IF_ERROR(s.status());
  }
  Where w = BlockWhere(*p, q, start_ns, end_ns);
  if (w.empty_result) return Status::OK();
  if (!extra.empty()) w.Add(extra);
  // Blobs are fetched per block, so the ordering sorts small rows only.
  Stmt s(p->db, "SELECT id, stream, t_max, seq_min FROM blocks WHERE " + w.sql + " ORDER BY " + order);
  w.BindTo(&s);
  BlockSource src(p, dctx);
  std::vector<const Query*> alts = q.Alternatives();
  bool check_body = false;
  for (const Query* a : alts) check_body = check_body || a->NeedsBody();
  while (s.Step()) {
    if (stop(s.Int(2), static_cast<uint64_t>(s.Int(3)))) break;
    const model::Labels* labels = StreamLabels(*p, s.Int(1), &st);
    if (labels == nullptr) return st;
    RETURN_IF_ERROR(src.Open(s.Int(0), &r));
    for (size_t i = 0; i < r.size(); ++i) {
      int64_t t = r.time(i);
      if (t < start_ns || t > end_ns || !keep(t, r.seq(i))) continue;
      LineView v{labels, r.level(i), {}, {}};
      bool level_ok = false;
      for (const Query* a : alts) level_ok = level_ok || a->MatchesLevel(v.level);
      if (!level_ok) continue;
      if (check_body || want_body) {
        RETURN_IF_ERROR(src.Body(&r));
        v.message = r.message(i);
        v.fields = r.fields(i);
      }
      // Without body filters, the selector (one stream a block) and levels decided.
      if (check_body && !q.Matches(v)) continue;
      if (!check_body && alts.size() > 1 && !q.Matches(v)) continue;
      fn(v, t, r.seq(i), r.flags(i));
    }
  }
  return s.status();
}

// A matching line with its sequence number (for cursors and forwarding positions).
bool ParseCursor(std::string_view c, int64_t* t, int64_t* id) {
  size_t colon = c.find(':');
  if (colon == std::string_view::npos) return false;
  auto a = std::from_chars(c.data(), c.data() + colon, *t);
  auto b = std::from_chars(c.data() + colon + 1, c.data() + c.size(), *id);
  return a.ec == std::errc() && a.ptr == c.data() + colon && b.ec == std::errc() && b.ptr == c.data() + c.size();
}


struct Hit {
  int64_t t;
  uint64_t seq;
  Record rec;
};

bool Newer(const Hit& a, const Hit& b) { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }

// The newest `want` lines of a partition matching `q` (and older than the
// cursor when `use_cursor`), newest first.
Status ScanPartition(LogStore::Partition* p, ZSTD_DCtx* dctx, const Query& q, const SelectOptions& o,
                     bool use_cursor, int64_t cur_t, int64_t cur_seq, size_t want, std::vector<Hit>* out) {
  std::vector<Hit>& hits = *out;
  auto keep = [&](int64_t t, uint64_t seq) {
    return !use_cursor || t < cur_t || (t == cur_t && seq < static_cast<uint64_t>(cur_seq));
  };
  // Blocks come newest t_max first; once `want` lines newer than a block's
  // t_max are found, no later block can hold one of the newest `want`.
  auto stop = [&](int64_t t_max, uint64_t) {
    if (hits.size() < want) return false;
    auto kth = hits.begin() + static_cast<std::ptrdiff_t>(want - 1);
    std::nth_element(hits.begin(), kth, hits.end(), Newer);
    hits.resize(want);  // the rest can never be among the newest `want`
    return hits.back().t > t_max;
  };
  auto fn = [&](const LineView& v, int64_t t, uint64_t seq, uint8_t flags) {
    hits.push_back(Hit{t, seq, ToRecord(v, t, flags)});
  };
  std::string cursor = use_cursor ? "t_min <= " + std::to_string(cur_t) : "";
  RETURN_IF_ERROR(VisitLines(p, dctx, q, o.start_ns, o.end_ns, cursor, "t_max DESC", true, stop, keep, fn));
  std::sort(hits.begin(), hits.end(), Newer);
  if (hits.size() > want) hits.resize(want);
  return Status::OK();
}

}  // namespace

Result<SelectResult> LogStore::Select(const Query& q, const SelectOptions& o) {
  int64_t cur_t = 0, cur_seq = 0;
  bool has_cursor = !o.cursor.empty();
  if (has_cursor && !ParseCursor(o.cursor, &cur_t, &cur_seq)) {
    return Status::InvalidArgument("invalid cursor \"" + o.cursor + "\"");
  }
  SelectResult out;
  if (o.limit == 0) return out;
  base::MutexLock l(&mu_);
  int64_t cursor_part = has_cursor ? PartitionStart(cur_t) : INT64_MAX;
  for (int64_t start : PartitionsOverlapping(o.start_ns, o.end_ns, /*newest_first=*/true)) {
    if (start > cursor_part) continue;
    // One more than asked: whether there is a next page.
    std::vector<Hit> hits;
    ASSIGN_OR_RETURN(bool read, ReadPartition(start, [&](Partition* p) {
                       mu_.AssertHeld();  // ReadPartition runs it under mu_
                       return ScanPartition(p, dctx_, q, o, has_cursor && start == cursor_part, cur_t, cur_seq,
                                            o.limit + 1 - out.lines.size(), &hits);
                     }));
    if (!read) continue;  // damaged and set aside: the others are served
    for (Hit& h : hits) {
      if (out.lines.size() == o.limit) return out;  // more follow; next_cursor names the last line kept
      out.lines.push_back(std::move(h.rec));
      out.next_cursor = std::to_string(h.t) + ":" + std::to_string(h.seq);
    }
  }
  out.next_cursor.clear();
  return out;
}

Result<std::vector<std::pair<int64_t, uint64_t>>> LogStore::Histogram(const Query& q, int64_t start_ns, int64_t end_ns,
                                                                      int64_t step_ns) {
  if (step_ns <= 0) return Status::InvalidArgument("step must be positive");
  if (end_ns < start_ns) return Status::InvalidArgument("end is before start");
  // Unsigned: end - start overflows int64 for a range wider than half of it.
  auto offset = [&](int64_t t) { return static_cast<uint64_t>(t) - static_cast<uint64_t>(start_ns); };
  uint64_t last_bucket = offset(end_ns) / static_cast<uint64_t>(step_ns);
  if (last_bucket >= 11000) {  // compared before + 1, which wraps at UINT64_MAX
    return Status::InvalidArgument("too many buckets (more than 11000); raise step");
  }
  uint64_t nbuckets = last_bucket + 1;
  std::vector<uint64_t> counts(nbuckets, 0);
  base::MutexLock l(&mu_);
  auto never = [](int64_t, uint64_t) { return false; };
  auto always = [](int64_t, uint64_t) { return true; };
  std::vector<uint64_t> part_counts;
  auto count = [&](const LineView&, int64_t t, uint64_t, uint8_t) {
    part_counts[static_cast<size_t>(offset(t) / static_cast<uint64_t>(step_ns))]++;
  };
  for (int64_t start : PartitionsOverlapping(start_ns, end_ns, false)) {
    part_counts.assign(nbuckets, 0);
    ASSIGN_OR_RETURN(bool read, ReadPartition(start, [&](Partition* p) {
                       mu_.AssertHeld();  // ReadPartition runs it under mu_
                       return VisitLines(p, dctx_, q, start_ns, end_ns, "", "id", false, never, always, count);
                     }));
    if (!read) continue;  // damaged and set aside: its counts are dropped
    for (uint64_t i = 0; i < nbuckets; ++i) counts[i] += part_counts[i];
  }
  std::vector<std::pair<int64_t, uint64_t>> out;
  out.reserve(nbuckets);
  for (uint64_t i = 0; i < nbuckets; ++i) {
    out.emplace_back(static_cast<int64_t>(static_cast<uint64_t>(start_ns) + i * static_cast<uint64_t>(step_ns)), counts[i]);
  }
  return out;
}

Result<std::vector<Record>> LogStore::ReadAfter(std::map<int64_t, int64_t>* after, size_t max) {
  std::vector<Record> out;
  base::MutexLock l(&mu_);
  Query all;
  auto first = [](const Hit& a, const Hit& b) { return a.seq < b.seq; };
  for (int64_t pstart : PartitionsOverlapping(INT64_MIN, INT64_MAX, false)) {
    if (out.size() >= max) break;
    Partition* p = partitions_.at(pstart).get();
    int64_t& last = (*after)[pstart];
    // Nothing new: skipped without opening its connection.
    if (last >= 0 && static_cast<uint64_t>(last) + 1 >= p->next_seq) continue;
    size_t want = max - out.size();
    std::vector<Hit> hits;
    // Blocks come by seq_min; once `want` lines below a block's seq_min are
    // found, no later block holds one of the first `want`.
    auto stop = [&](int64_t, uint64_t seq_min) {
      if (hits.size() < want) return false;
      auto kth = hits.begin() + static_cast<std::ptrdiff_t>(want - 1);
      std::nth_element(hits.begin(), kth, hits.end(), first);
      hits.resize(want);
      return hits.back().seq < seq_min;
    };
    auto keep = [&](int64_t, uint64_t seq) { return seq > static_cast<uint64_t>(last); };
    auto fn = [&](const LineView& v, int64_t t, uint64_t seq, uint8_t flags) {
      hits.push_back(Hit{t, seq, ToRecord(v, t, flags)});
    };
    std::string after_sql = std::to_string(last);
    ASSIGN_OR_RETURN(bool read, ReadPartition(pstart, [&](Partition* part) {
                       mu_.AssertHeld();  // ReadPartition runs it under mu_
                       return VisitLines(part, dctx_, all, INT64_MIN, INT64_MAX, "seq_max > " + after_sql, "seq_min",
                                         true, stop, keep, fn);
                     }));
    if (!read) continue;  // damaged and set aside: its lines are not forwarded
    std::sort(hits.begin(), hits.end(), first);
    if (hits.size() > want) hits.resize(want);
    for (Hit& h : hits) {
      out.push_back(std::move(h.rec));
      last = static_cast<int64_t>(h.seq);
    }
  }
  // Partitions dropped by retention are forgotten.
  for (auto it = after->begin(); it != after->end();) {
    it = partitions_.count(it->first) ? std::next(it) : after->erase(it);
  }
  return out;
}

Result<std::vector<std::string>> LogStore::LabelNames(int64_t start_ns, int64_t end_ns) {
  std::set<std::string> names;
  base::MutexLock l(&mu_);
  for (auto& [pstart, p] : partitions_) {
    if (PartitionFirstNs(pstart) > end_ns || PartitionLastNs(pstart) < start_ns) continue;
    for (auto& [id, labels] : p->streams) {
      for (const model::Label& lb : labels) names.insert(lb.name);
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

Result<std::vector<std::string>> LogStore::LabelValues(std::string_view name, int64_t start_ns, int64_t end_ns) {
  std::set<std::string> values;
  base::MutexLock l(&mu_);
  for (auto& [pstart, p] : partitions_) {
    if (PartitionFirstNs(pstart) > end_ns || PartitionLastNs(pstart) < start_ns) continue;
    for (auto& [id, labels] : p->streams) {
      std::string_view v = labels.Get(name);
      if (!v.empty()) values.insert(std::string(v));
    }
  }
  return std::vector<std::string>(values.begin(), values.end());
}

}  // namespace trainwatch::logs
