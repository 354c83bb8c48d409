// RunStore's actions on alerts (issue 19, docs/runs-api.md "Actions"): kept
// in runs.db's actions table; the ones some rank has yet to acknowledge are
// also held in memory, since every batch and heartbeat asks for them.

#include <algorithm>

#include "base/mutex.h"
#include "runs/store.h"
#include "runs/store_internal.h"

namespace trainwatch::runs {
namespace {

constexpr size_t kMaxPendingActions = 64;  // per run: the oldest go once more are queued

// An action from the columns seq, action, alert, labels, time_ms, acks at `col`...
RunAction ReadAction(Stmt& q, int col) {
  RunAction a;
  a.id = q.Int(col);
  a.action = q.Text(col + 1);
  a.alert = q.Text(col + 2);
  a.labels = ParseStored(q.Text(col + 3), Json::object());
  a.time_ms = q.Int(col + 4);
  a.acks = ParseStored(q.Text(col + 5), Json::object());
  return a;
}

// Every rank has acknowledged it (a run of unknown size: rank 0 has).
bool Done(const RunAction& a, const Run& r) {
  const int64_t world = r.world_size.value_or(1);
  for (int64_t rank = 0; rank < std::max<int64_t>(world, 1); rank++) {
    if (!a.acks.contains(std::to_string(rank))) return false;
  }
  return true;
}

}  // namespace

Status RunStore::LoadPendingActions() {
  pending_actions_.clear();
  Stmt q(db_, "SELECT run_id, seq, action, alert, labels, time_ms, acks FROM actions WHERE done=0 ORDER BY seq");
  while (q.Step()) pending_actions_[q.Text(0)].push_back(ReadAction(q, 1));
  return q.status();
}

Result<int64_t> RunStore::QueueAction(std::string_view project, std::string_view run, RunAction a,
                                      std::string_view dedupe) {
  return RetryOnDamage([&]() -> Result<int64_t> {
    base::MutexLock l(&mu_);
    auto it = std::find_if(runs_.begin(), runs_.end(),
                           [&](const auto& kv) { return kv.second.project == project && kv.second.name == run; });
    if (it == runs_.end()) {
      return Status::NotFound("run \"" + std::string(run) + "\" of project \"" + std::string(project) + "\" not found");
    }
    const std::string& id = it->first;
    {
      Stmt dup(db_, "SELECT seq FROM actions WHERE run_id=?1 AND dedupe=?2");
      dup.Bind(1, id).Bind(2, dedupe);
      if (dup.Step()) return dup.Int(0);
      RETURN_IF_ERROR(dup.status());
    }
    a.time_ms = Now();
    a.acks = Json::object();
    Stmt ins(db_, "INSERT INTO actions(run_id, action, alert, labels, dedupe, time_ms, acks) VALUES(?1,?2,?3,?4,?5,?6,'{}')");
    ins.Bind(1, id).Bind(2, a.action).Bind(3, a.alert).Bind(4, DumpJson(a.labels)).Bind(5, dedupe).Bind(6, a.time_ms);
    RETURN_IF_ERROR(ins.Run());
    a.id = sqlite3_last_insert_rowid(db_);
    std::vector<RunAction>& pending = pending_actions_[id];
    pending.push_back(a);
    if (pending.size() > kMaxPendingActions) {
      // Given up on: kept in the table, marked done, no longer sent.
      Stmt old(db_, "UPDATE actions SET done=1 WHERE seq=?1");
      old.Bind(1, pending.front().id);
      RETURN_IF_ERROR(old.Run());
      pending.erase(pending.begin());
    }
    return a.id;
  });
}

std::vector<RunAction> RunStore::PendingActions(std::string_view id, int64_t rank) const {
  base::MutexLock l(&mu_);
  std::vector<RunAction> out;
  auto p = pending_actions_.find(std::string(id));
  if (p == pending_actions_.end()) return out;
  auto r = runs_.find(std::string(id));
  if (r == runs_.end() || r->second.status != kRunning) return out;
  const std::string key = std::to_string(rank);
  for (const RunAction& a : p->second) {
    if (!a.acks.contains(key)) out.push_back(a);
  }
  return out;
}

Status RunStore::AckAction(std::string_view id, int64_t action_id, int64_t rank, const std::string& status,
                           const std::string& result) {
  return RetryOnDamage([&]() -> Status {
    base::MutexLock l(&mu_);
    auto r = runs_.find(std::string(id));
    if (r == runs_.end()) return Status::NotFound("run \"" + std::string(id) + "\" not found");
    Stmt q(db_, "SELECT acks FROM actions WHERE seq=?1 AND run_id=?2");
    q.Bind(1, action_id).Bind(2, id);
    if (!q.Step()) {
      RETURN_IF_ERROR(q.status());
      // Not NotFound: a client takes 404 for a run the server does not know.
      return Status::InvalidArgument("run \"" + std::string(id) + "\" has no action " + std::to_string(action_id));
    }
    Json acks = ParseStored(q.Text(0), Json::object());
    const std::string key = std::to_string(rank);
    if (acks.contains(key)) return Status::OK();  // a retried acknowledgement: the first one stands
    acks[key] = {{"status", status}, {"result", result}, {"time", static_cast<double>(Now()) / 1000.0}};
    RunAction probe;
    probe.acks = acks;
    const bool done = Done(probe, r->second);
    Stmt up(db_, "UPDATE actions SET acks=?1, done=?2 WHERE seq=?3");
    up.Bind(1, DumpJson(acks)).Bind(2, static_cast<int64_t>(done ? 1 : 0)).Bind(3, action_id);
    RETURN_IF_ERROR(up.Run());
    auto p = pending_actions_.find(std::string(id));
    if (p != pending_actions_.end()) {
      auto& v = p->second;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (it->id != action_id) continue;
        it->acks = acks;
        if (done) v.erase(it);
        break;
      }
      if (v.empty()) pending_actions_.erase(p);
    }
    return Status::OK();
  });
}

Result<std::vector<RunAction>> RunStore::Actions(std::string_view id) const {
  return RetryOnDamage([&]() -> Result<std::vector<RunAction>> {
    base::MutexLock l(&mu_);
    if (!runs_.contains(std::string(id))) return Status::NotFound("run \"" + std::string(id) + "\" not found");
    std::vector<RunAction> out;
    Stmt q(db_, "SELECT seq, action, alert, labels, time_ms, acks FROM actions WHERE run_id=?1 ORDER BY seq");
    q.Bind(1, id);
    while (q.Step()) out.push_back(ReadAction(q, 0));
    RETURN_IF_ERROR(q.status());
    return out;
  });
}

}  // namespace trainwatch::runs
