// The findings store of `commtap analyze --store`: one row per (job, kind, subject).
#include <sqlite3.h>

#include "analyzer/health.hpp"

namespace commtap::analyzer {

bool store_findings(const std::string& store, const std::vector<JobHealth>& jobs,
                    std::string& error) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(store.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    error = store + ": " + (db ? sqlite3_errmsg(db) : "cannot open");
    sqlite3_close(db);
    return false;
  }
  sqlite3_busy_timeout(db, 5000);
  auto exec = [&](const std::string& sql) {
    char* message = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
      error = store + ": " + (message ? message : sqlite3_errmsg(db));
      sqlite3_free(message);
      return false;
    }
    return true;
  };
  bool ok = exec(
      "CREATE TABLE IF NOT EXISTS findings (job_id TEXT NOT NULL, path TEXT NOT NULL, "
      "kind TEXT NOT NULL, subject TEXT NOT NULL, severity TEXT NOT NULL, summary TEXT NOT NULL, "
      "evidence TEXT NOT NULL, first_seen_ns INTEGER NOT NULL, last_seen_ns INTEGER NOT NULL, "
      "active INTEGER NOT NULL, PRIMARY KEY (job_id, kind, subject));"
      "BEGIN IMMEDIATE;");
  sqlite3_stmt* upsert = nullptr;
  if (ok && sqlite3_prepare_v2(
                db,
                "INSERT INTO findings VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 1) "
                "ON CONFLICT (job_id, kind, subject) DO UPDATE SET severity = excluded.severity, "
                "summary = excluded.summary, evidence = excluded.evidence, path = excluded.path, "
                "first_seen_ns = min(first_seen_ns, excluded.first_seen_ns), "
                "last_seen_ns = max(last_seen_ns, excluded.last_seen_ns), active = 1",
                -1, &upsert, nullptr) != SQLITE_OK) {
    error = store + ": " + sqlite3_errmsg(db);
    ok = false;
  }
  for (const JobHealth& job : jobs) {
    if (!ok) break;
    ok = exec("UPDATE findings SET active = 0 WHERE job_id = '" + [&] {
      std::string q;
      for (char c : job.job_id) q += c == '\'' ? std::string("''") : std::string(1, c);
      return q;
    }() + "'");
    for (const Finding& f : job.findings) {
      if (!ok) break;
      const std::string evidence = f.evidence.dump();
      const std::string severity = severity_name(f.severity);
      const std::string* texts[] = {&job.job_id, &job.path,  &f.kind,  &f.subject,
                                    &severity,   &f.summary, &evidence};
      for (int i = 0; i < 7; ++i)
        sqlite3_bind_text(upsert, i + 1, texts[i]->c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(upsert, 8, static_cast<sqlite3_int64>(f.first_seen_ns));
      sqlite3_bind_int64(upsert, 9, static_cast<sqlite3_int64>(f.last_seen_ns));
      if (sqlite3_step(upsert) != SQLITE_DONE) {
        error = store + ": " + sqlite3_errmsg(db);
        ok = false;
      }
      sqlite3_reset(upsert);
    }
  }
  sqlite3_finalize(upsert);
  ok = ok && exec("COMMIT");
  if (!ok) {
    const std::string first = error;
    exec("ROLLBACK");
    error = first;
  }
  sqlite3_close(db);
  return ok;
}

}  // namespace commtap::analyzer
