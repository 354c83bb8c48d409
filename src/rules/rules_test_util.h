#pragma once
// Test storage for rule evaluation: promqltest's in-memory series behind
// both storage seams (Appendable for rule results, Queryable for queries).

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "promql/engine.h"
#include "promql/promqltest/test_storage.h"
#include "rules/rule.h"
#include "storage/storage.h"

namespace trainwatch::rules::testing {

class TestDb : public storage::Appendable, public storage::Queryable {
 public:
  class App : public storage::Appender {
   public:
    explicit App(TestDb* db) : db_(db) {}
    Result<storage::SeriesRef> Append(storage::SeriesRef, const model::Labels& l, int64_t t, double v) override {
      pending_.push_back({l, t, v});
      return storage::SeriesRef{1};
    }
    Status Commit() override {
      std::lock_guard lk(db_->mu_);
      for (auto& p : pending_) db_->store_.Add(p.labels, p.t, p.v);
      pending_.clear();
      return Status::OK();
    }
    void Rollback() override { pending_.clear(); }

   private:
    TestDb* db_;
    std::vector<promql::VectorSample> pending_;
  };

  std::unique_ptr<storage::Appender> NewAppender() override { return std::make_unique<App>(this); }
  Result<std::unique_ptr<storage::Querier>> NewQuerier(int64_t mint, int64_t maxt) override {
    std::lock_guard lk(mu_);
    return store_.NewQuerier(mint, maxt);
  }
  void Add(const model::Labels& l, int64_t t, double v) {
    std::lock_guard lk(mu_);
    store_.Add(l, t, v);
  }
  // The samples stored for exactly `l` (empty when none).
  std::vector<model::Sample> Samples(const model::Labels& l) {
    std::lock_guard lk(mu_);
    auto it = store_.series().find(l);
    return it == store_.series().end() ? std::vector<model::Sample>{} : it->second.samples;
  }

 private:
  std::mutex mu_;
  promql::promqltest::TestStorage store_;
};

// A QueryFunc over `db` with `engine`.
inline QueryFunc MakeQueryFunc(promql::Engine* engine, storage::Queryable* db) {
  return [engine, db](std::string_view expr, int64_t t) -> Result<std::vector<promql::VectorSample>> {
    ASSIGN_OR_RETURN(promql::QueryResult r, engine->Instant(*db, expr, t));
    if (r.type == promql::ValueType::kScalar) return std::vector<promql::VectorSample>{{model::Labels(), t, r.scalar.v}};
    return std::move(r.vector);
  };
}

}  // namespace trainwatch::rules::testing
