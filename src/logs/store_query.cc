// LogStore reads: Select (newest first, cursor paging), Histogram, label names and values.

#include <zstd.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <variant>

#include "logs/store.h"
#include "logs/store_internal.h"

namespace trainwatch::logs {

namespace {

constexpr int kFlagTruncated = 1, kFlagZstd = 2;

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

Where BuildWhere(const LogStore::Partition& p, const Query& q, int64_t start_ns, int64_t end_ns) {
  Where w;
  w.Add("t >= " + w.Param(start_ns) + " AND t <= " + w.Param(end_ns));
  if (!q.matchers.empty()) {
    std::vector<int64_t> ids;
    for (const auto& [id, labels] : p.streams) {
      if (q.MatchesStream(labels)) ids.push_back(id);
    }
    if (ids.empty()) {
      w.empty_result = true;
      return w;
    }
    if (ids.size() < p.streams.size()) w.Add("stream IN " + IdList(ids));
  }
  for (const FieldFilter& f : q.levels) {
    if (f.op == CmpOp::kRe || f.op == CmpOp::kNre) continue;  // post-filter
    if (f.op == CmpOp::kEq) { w.Add("level = " + w.Param(f.value)); continue; }
    if (f.op == CmpOp::kNe) { w.Add("level != " + w.Param(f.value)); continue; }
    std::string in;
    Query one;
    one.levels.push_back(f);
    for (std::string_view l : kLevels) {
      if (!one.MatchesLevel(l)) continue;
      in += in.empty() ? "" : ",";
      in += w.Param(std::string(l));
    }
    if (in.empty()) w.empty_result = true;
    else w.Add("level IN (" + in + ")");
  }
  for (const FieldFilter& f : q.fields) {
    if (f.op == CmpOp::kNe || f.op == CmpOp::kNre || f.name == "message" || f.name == "msg") continue;
    // A positive comparison needs the field on the line or the label on its stream.
    std::vector<int64_t> ids;
    for (const auto& [id, labels] : p.streams) {
      if (labels.Has(f.name)) ids.push_back(id);
    }
    std::string path = "'$.\"";
    for (char c : f.name) path += c == '\'' ? std::string("''") : std::string(1, c);
    path += "\"'";
    std::string cond = "json_type(fields, " + path + ") IS NOT NULL";
    if (!ids.empty()) cond = "(" + cond + " OR stream IN " + IdList(ids) + ")";
    w.Add(cond);
  }
  std::string pos = q.FtsPositive(), neg = q.FtsNegative();
  if (!pos.empty()) w.Add("id IN (SELECT rowid FROM lines_fts WHERE lines_fts MATCH " + w.Param(pos) + ")");
  if (!neg.empty()) w.Add("id NOT IN (SELECT rowid FROM lines_fts WHERE lines_fts MATCH " + w.Param(neg) + ")");
  return w;
}

Status DecodeRow(const LogStore::Partition& p, const Stmt& s, int col, Record* r) {
  // Columns from `col`: t, stream, level, flags, message, fields.
  r->time_ns = s.Int(col);
  auto it = p.streams.find(s.Int(col + 1));
  if (it == p.streams.end()) return Status::Corruption("logs: " + p.path + ": line of unknown stream");
  r->labels = it->second;
  r->level = std::string(s.Text(col + 2));
  int64_t flags = s.Int(col + 3);
  r->truncated = (flags & kFlagTruncated) != 0;
  std::string_view msg = s.Text(col + 4);
  if (flags & kFlagZstd) {
    unsigned long long n = ZSTD_getFrameContentSize(msg.data(), msg.size());
    if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN || n > (64u << 20)) {
      return Status::Corruption("logs: " + p.path + ": bad compressed message");
    }
    r->message.resize(n);
    size_t got = ZSTD_decompress(r->message.data(), n, msg.data(), msg.size());
    if (ZSTD_isError(got)) return Status::Corruption("logs: " + p.path + ": bad compressed message");
    r->message.resize(got);
  } else {
    r->message.assign(msg);
  }
  r->fields = s.IsNull(col + 5) ? std::string() : std::string(s.Text(col + 5));
  return Status::OK();
}

bool ParseCursor(std::string_view c, int64_t* t, int64_t* id) {
  size_t colon = c.find(':');
  if (colon == std::string_view::npos) return false;
  auto a = std::from_chars(c.data(), c.data() + colon, *t);
  auto b = std::from_chars(c.data() + colon + 1, c.data() + c.size(), *id);
  return a.ec == std::errc() && a.ptr == c.data() + colon && b.ec == std::errc() && b.ptr == c.data() + c.size();
}

}  // namespace

Status LogStore::ScanPartition(Partition* p, const Query& q, const SelectOptions& o, bool use_cursor, int64_t cur_t,
                               int64_t cur_id, size_t want, SelectResult* out, bool* more) {
  Where w = BuildWhere(*p, q, o.start_ns, o.end_ns);
  if (w.empty_result) return Status::OK();
  if (use_cursor) {
    std::string a = w.Param(cur_t), b = w.Param(cur_id);
    w.Add("(t < " + a + " OR (t = " + a + " AND id < " + b + "))");
  }
  Stmt s(p->db, "SELECT id, t, stream, level, flags, message, fields FROM lines WHERE " + w.sql +
                    " ORDER BY t DESC, id DESC");
  w.BindTo(&s);
  bool post = q.HasPostFilters();
  while (s.Step()) {
    Record r;
    RETURN_IF_ERROR(DecodeRow(*p, s, 1, &r));
    if (post && !q.Matches(r, /*skip_text=*/true)) continue;
    if (out->lines.size() == want) {
      // One more than asked: there is a next page, starting after the last kept line.
      *more = true;
      return Status::OK();
    }
    out->lines.push_back(std::move(r));
    out->next_cursor = std::to_string(out->lines.back().time_ns) + ":" + std::to_string(s.Int(0));
  }
  return s.status();
}

Result<SelectResult> LogStore::Select(const Query& q, const SelectOptions& o) {
  int64_t cur_t = 0, cur_id = 0;
  bool has_cursor = !o.cursor.empty();
  if (has_cursor && !ParseCursor(o.cursor, &cur_t, &cur_id)) {
    return Status::InvalidArgument("invalid cursor \"" + o.cursor + "\"");
  }
  SelectResult out;
  if (o.limit == 0) return out;
  std::lock_guard<std::mutex> l(mu_);
  int64_t cursor_part = has_cursor ? PartitionStart(cur_t) : INT64_MAX;
  bool more = false;
  for (auto it = partitions_.rbegin(); it != partitions_.rend(); ++it) {
    Partition* p = it->second.get();
    int64_t pstart_ns = p->start_ms * 1000000, pend_ns = (p->start_ms + opts_.partition_ms) * 1000000 - 1;
    if (pstart_ns > o.end_ns || pend_ns < o.start_ns || p->start_ms > cursor_part) continue;
    RETURN_IF_ERROR(ScanPartition(p, q, o, has_cursor && p->start_ms == cursor_part, cur_t, cur_id, o.limit, &out,
                                  &more));
    if (more) break;
  }
  if (!more) out.next_cursor.clear();
  return out;
}

Result<std::vector<std::pair<int64_t, uint64_t>>> LogStore::Histogram(const Query& q, int64_t start_ns, int64_t end_ns,
                                                                      int64_t step_ns) {
  if (step_ns <= 0) return Status::InvalidArgument("step must be positive");
  if (end_ns < start_ns) return Status::InvalidArgument("end is before start");
  uint64_t nbuckets = static_cast<uint64_t>((end_ns - start_ns) / step_ns) + 1;
  if (nbuckets > 11000) return Status::InvalidArgument("too many buckets (" + std::to_string(nbuckets) + " > 11000); raise step");
  std::vector<uint64_t> counts(nbuckets, 0);
  std::lock_guard<std::mutex> l(mu_);
  bool post = q.HasPostFilters();
  for (auto& [pstart, up] : partitions_) {
    Partition* p = up.get();
    int64_t pstart_ns = p->start_ms * 1000000, pend_ns = (p->start_ms + opts_.partition_ms) * 1000000 - 1;
    if (pstart_ns > end_ns || pend_ns < start_ns) continue;
    Where w = BuildWhere(*p, q, start_ns, end_ns);
    if (w.empty_result) continue;
    if (!post) {
      std::string s0 = w.Param(start_ns), st = w.Param(step_ns);
      Stmt s(p->db, "SELECT (t - " + s0 + ") / " + st + ", count(*) FROM lines WHERE " + w.sql + " GROUP BY 1");
      w.BindTo(&s);
      while (s.Step()) {
        int64_t b = s.Int(0);
        if (b >= 0 && static_cast<uint64_t>(b) < nbuckets) counts[static_cast<size_t>(b)] += static_cast<uint64_t>(s.Int(1));
      }
      RETURN_IF_ERROR(s.status());
      continue;
    }
    Stmt s(p->db, "SELECT id, t, stream, level, flags, message, fields FROM lines WHERE " + w.sql);
    w.BindTo(&s);
    while (s.Step()) {
      Record r;
      RETURN_IF_ERROR(DecodeRow(*p, s, 1, &r));
      if (!q.Matches(r, true)) continue;
      counts[static_cast<size_t>((r.time_ns - start_ns) / step_ns)]++;
    }
    RETURN_IF_ERROR(s.status());
  }
  std::vector<std::pair<int64_t, uint64_t>> out;
  out.reserve(nbuckets);
  for (uint64_t i = 0; i < nbuckets; ++i) out.emplace_back(start_ns + static_cast<int64_t>(i) * step_ns, counts[i]);
  return out;
}

Result<std::vector<Record>> LogStore::ReadAfter(std::map<int64_t, int64_t>* after, size_t max) {
  std::vector<Record> out;
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [pstart, p] : partitions_) {
    if (out.size() >= max) break;
    int64_t& last = (*after)[pstart];
    Stmt s(p->db, "SELECT id, t, stream, level, flags, message, fields FROM lines WHERE id > ?1 ORDER BY id LIMIT ?2");
    s.Bind(1, last);
    s.Bind(2, static_cast<int64_t>(max - out.size()));
    while (s.Step()) {
      Record r;
      RETURN_IF_ERROR(DecodeRow(*p, s, 1, &r));
      out.push_back(std::move(r));
      last = s.Int(0);
    }
    RETURN_IF_ERROR(s.status());
  }
  // Partitions dropped by retention are forgotten.
  for (auto it = after->begin(); it != after->end();) {
    it = partitions_.count(it->first) ? std::next(it) : after->erase(it);
  }
  return out;
}

Result<std::vector<std::string>> LogStore::LabelNames(int64_t start_ns, int64_t end_ns) {
  std::set<std::string> names;
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [pstart, p] : partitions_) {
    if (pstart * 1000000 > end_ns || (pstart + opts_.partition_ms) * 1000000 <= start_ns) continue;
    for (auto& [id, labels] : p->streams) {
      for (const model::Label& lb : labels) names.insert(lb.name);
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

Result<std::vector<std::string>> LogStore::LabelValues(std::string_view name, int64_t start_ns, int64_t end_ns) {
  std::set<std::string> values;
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [pstart, p] : partitions_) {
    if (pstart * 1000000 > end_ns || (pstart + opts_.partition_ms) * 1000000 <= start_ns) continue;
    for (auto& [id, labels] : p->streams) {
      std::string_view v = labels.Get(name);
      if (!v.empty()) values.insert(std::string(v));
    }
  }
  return std::vector<std::string>(values.begin(), values.end());
}

}  // namespace trainwatch::logs
