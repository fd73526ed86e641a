// The findings store of `commtap analyze --store`: one row per (job, kind, subject), and the
// avoid list of the active findings (avoid_list/).
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <tuple>

#include "analyzer/store/evidence_json.hpp"
#include "analyzer/store/findings_store.hpp"
#include "analyzer/store/output_files.hpp"
#include "analyzer/trace/untrusted_input.hpp"

namespace commtap::analyzer {

namespace {

// A slow_rank or slow_host finding of an earlier job: whom it named.
struct PastLateness {
  std::string job_id, host, program;
  std::vector<int> ranks;
};

// Each slow_rank and slow_host finding's host, program and ranks, one row per rank, in the
// `late_ranks` table; a store's findings written before that table have them in their evidence
// only, read there (SQLite's JSON functions) where the table has none of theirs.
constexpr char kCreateLateRanks[] =
    "CREATE TABLE IF NOT EXISTS late_ranks (job_id TEXT NOT NULL, kind TEXT NOT NULL, "
    "subject TEXT NOT NULL, host TEXT NOT NULL, program TEXT NOT NULL, rank INTEGER NOT NULL, "
    "PRIMARY KEY (job_id, kind, subject, rank));";
constexpr char kSelectLateRanks[] =
    "SELECT job_id, kind, subject, host, program, rank FROM late_ranks";
constexpr char kSelectOlderLateRanks[] =
    "SELECT f.job_id, f.kind, f.subject, json_extract(f.evidence, '$.host'), "
    "json_extract(f.evidence, '$.program'), r.value FROM findings f, "
    "json_each(f.evidence, '$.ranks') r WHERE f.kind IN ('slow_rank', 'slow_host') AND "
    "json_valid(f.evidence) AND r.type = 'integer'";
constexpr char kNotInLateRanks[] =
    " AND NOT EXISTS (SELECT 1 FROM late_ranks l WHERE l.job_id = f.job_id AND "
    "l.kind = f.kind AND l.subject = f.subject)";

// The earlier jobs' late ranks in `db`, with a program named (what the weighing compares).
std::vector<PastLateness> read_past_lateness(sqlite3* db) {
  sqlite3_stmt* probe = nullptr;
  const bool has_table = sqlite3_prepare_v2(db, kSelectLateRanks, -1, &probe, nullptr) == SQLITE_OK;
  sqlite3_finalize(probe);
  std::map<std::tuple<std::string, std::string, std::string>, PastLateness> by_finding;
  auto read = [&](const std::string& sql) {
    sqlite3_stmt* select = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &select, nullptr) == SQLITE_OK)
      while (sqlite3_step(select) == SQLITE_ROW) {
        auto text = [&](int column) {
          const auto* value = reinterpret_cast<const char*>(sqlite3_column_text(select, column));
          return std::string(value ? value : "");
        };
        PastLateness& p = by_finding[{text(0), text(1), text(2)}];
        p.job_id = text(0);
        p.host = text(3);
        p.program = text(4);
        p.ranks.push_back(sqlite3_column_int(select, 5));
      }
    sqlite3_finalize(select);
  };
  if (has_table) read(kSelectLateRanks);
  read(std::string(kSelectOlderLateRanks) + (has_table ? kNotInLateRanks : ""));
  std::vector<PastLateness> past;
  for (auto& [key, p] : by_finding)
    if (!p.program.empty()) past.push_back(std::move(p));
  return past;
}

// The names an avoid list's entries are witnessed by: a host, or a link's two ends in order
// (either direction is the same link).
std::string witness_name(const std::string& host) {
  return host;
}
std::string witness_name(const avoid_list::Link& link) {
  return std::min(link.from, link.to) + "<>" + std::max(link.from, link.to);
}

// Replaces a slow_rank or slow_host finding's rows in `late_ranks` (nothing for other kinds).
bool store_late_ranks(sqlite3* db, const std::string& job_id, const Finding& f) {
  const SlowComputeSubject* who = slow_compute_subject(f.evidence);
  if (!who) return true;
  sqlite3_stmt* remove = nullptr;
  sqlite3_stmt* insert = nullptr;
  bool ok =
      sqlite3_prepare_v2(db,
                         "DELETE FROM late_ranks WHERE job_id = ?1 AND kind = ?2 AND "
                         "subject = ?3",
                         -1, &remove, nullptr) == SQLITE_OK &&
      sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO late_ranks VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                         -1, &insert, nullptr) == SQLITE_OK;
  const std::string* keys[] = {&job_id, &f.kind, &f.subject, &who->host, &who->program};
  for (int i = 0; ok && i < 3; ++i)
    sqlite3_bind_text(remove, i + 1, keys[i]->c_str(), -1, SQLITE_TRANSIENT);
  ok = ok && sqlite3_step(remove) == SQLITE_DONE;
  for (int rank : who->ranks) {
    if (!ok) break;
    for (int i = 0; i < 5; ++i)
      sqlite3_bind_text(insert, i + 1, keys[i]->c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(insert, 6, rank);
    ok = sqlite3_step(insert) == SQLITE_DONE;
    sqlite3_reset(insert);
  }
  sqlite3_finalize(remove);
  sqlite3_finalize(insert);
  return ok;
}

bool trusted_owner(long uid) {
  return uid < 0 || uid == 0 || uid == static_cast<long>(::geteuid());
}

}  // namespace

void weigh_against_other_jobs(const std::string& store, std::vector<JobHealth>& jobs) {
  // Called per job as each is analyzed (its alert waits for it): the store is read only where a
  // finding may be weighed.
  const bool weighable = std::any_of(jobs.begin(), jobs.end(), [](const JobHealth& job) {
    return std::any_of(job.findings.begin(), job.findings.end(), [](const Finding& f) {
      return f.kind == finding_kind::slow_rank || f.kind == finding_kind::slow_host;
    });
  });
  if (!weighable) return;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(store.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW, nullptr) !=
      SQLITE_OK) {
    sqlite3_close(db);  // a new store: no other jobs yet (a bad one is reported when stored)
    return;
  }
  harden_connection(db, /*allow_views=*/false);
  sqlite3_busy_timeout(db, 5000);
  const std::vector<PastLateness> past = read_past_lateness(db);
  sqlite3_close(db);
  for (JobHealth& job : jobs)
    for (Finding& f : job.findings) {
      SlowComputeSubject* who = slow_compute_subject(f.evidence);
      if (!who) continue;
      const std::string &host = who->host, &program = who->program;
      const std::vector<int>& ranks = who->ranks;
      if (program.empty() || ranks.empty()) continue;
      // Other jobs (each counted once) where the same rank was late elsewhere, or the same host
      // late with other ranks.
      std::set<std::string> rank_elsewhere, host_with_others;
      for (const PastLateness& p : past) {
        if (p.job_id == job.job_id || p.program != program) continue;
        const bool same_rank = std::any_of(ranks.begin(), ranks.end(), [&](int r) {
          return std::find(p.ranks.begin(), p.ranks.end(), r) != p.ranks.end();
        });
        if (same_rank && p.host != host) rank_elsewhere.insert(p.job_id);
        if (!same_rank && p.host == host) host_with_others.insert(p.job_id);
      }
      if (rank_elsewhere.empty() && host_with_others.empty()) continue;
      who->across_jobs = AcrossJobs{rank_elsewhere.size(), host_with_others.size()};
      if (rank_elsewhere.size() > host_with_others.size()) {
        f.severity = std::min(f.severity, Severity::warning);
        f.summary += "; in " + std::to_string(rank_elsewhere.size()) + " other run(s) of " +
                     program +
                     " the same rank was late on other hosts: the program's own imbalance, "
                     "not this machine";
      } else if (!host_with_others.empty()) {
        f.summary += "; in " + std::to_string(host_with_others.size()) + " other run(s) of " +
                     program + " this host was late with other ranks: the machine";
        // A rank 0 or call-site finding held at a warning as possibly the program's own: the
        // machine after all, with the severity its evidence and cost give.
        if (const auto* lateness = std::get_if<LatenessEvidence>(&f.evidence.rule);
            lateness && lateness->suspected)
          f.severity = std::max(f.severity, lateness->severity_if_the_machine);
      }
    }
  for (JobHealth& job : jobs)  // most severe first again
    std::stable_sort(job.findings.begin(), job.findings.end(),
                     [](const Finding& a, const Finding& b) { return a.severity > b.severity; });
}

bool store_findings(const std::string& store, const std::vector<JobHealth>& jobs,
                    std::string& error) {
  // Findings quote trace strings (hosts, paths, command lines): the store is the operator's alone.
  if (!create_private_database(store, 0600, error)) return false;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(store.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, nullptr) !=
      SQLITE_OK) {
    error = store + ": " + (db ? sqlite3_errmsg(db) : "cannot open");
    sqlite3_close(db);
    return false;
  }
  sqlite3_busy_timeout(db, 5000);
  harden_connection(db, /*allow_views=*/false);
  auto exec = [&](const std::string& sql) {
    char* message = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
      const bool full = (sqlite3_extended_errcode(db) & 0xff) == SQLITE_FULL;
      error = store + ": " + (message && !full ? message : sqlite_write_failure(store, db));
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
      "CREATE TABLE IF NOT EXISTS avoid_witnesses (name TEXT NOT NULL, owner INTEGER NOT NULL, "
      "job_id TEXT NOT NULL, seen_ns INTEGER NOT NULL, PRIMARY KEY (name, owner, job_id));" +
      std::string(kCreateLateRanks) + "BEGIN IMMEDIATE;");
  // Who named which host or link, by the analysis' clock (a trace's times are its writer's to
  // forge), kept for a day as the readers' avoid list is; then which names a trusted trace or two
  // owners named.
  const auto now_ns =
      static_cast<sqlite3_int64>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
  constexpr sqlite3_int64 kDayNs = 86'400'000'000'000;
  std::set<std::string> confirmed;
  if (ok)
    ok = exec("DELETE FROM avoid_witnesses WHERE seen_ns < " + std::to_string(now_ns - kDayNs));
  sqlite3_stmt* witness = nullptr;
  if (ok && sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO avoid_witnesses VALUES (?1, ?2, ?3, ?4)",
                               -1, &witness, nullptr) != SQLITE_OK) {
    error = store + ": " + sqlite3_errmsg(db);
    ok = false;
  }
  for (const JobHealth& job : jobs)
    for (const Finding& f : job.findings) {
      std::vector<std::string> names;
      for (const std::string& host : f.avoid.hosts) names.push_back(witness_name(host));
      for (const avoid_list::Link& link : f.avoid.links) names.push_back(witness_name(link));
      for (const std::string& name : names) {
        if (!ok) break;
        sqlite3_bind_text(witness, 1, name.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(witness, 2, trusted_owner(job.owner_uid) ? 0 : job.owner_uid);
        sqlite3_bind_text(witness, 3, job.job_id.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(witness, 4, now_ns);
        ok = sqlite3_step(witness) == SQLITE_DONE;
        if (!ok) error = store + ": " + sqlite_write_failure(store, db);
        sqlite3_reset(witness);
      }
    }
  sqlite3_finalize(witness);
  sqlite3_stmt* trusted = nullptr;
  if (ok && sqlite3_prepare_v2(db,
                               "SELECT name FROM avoid_witnesses GROUP BY name "
                               "HAVING min(owner) = 0 OR count(DISTINCT owner) >= 2",
                               -1, &trusted, nullptr) == SQLITE_OK) {
    while (sqlite3_step(trusted) == SQLITE_ROW)
      confirmed.insert(reinterpret_cast<const char*>(sqlite3_column_text(trusted, 0)));
  }
  sqlite3_finalize(trusted);
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
    // The job's hosts and links to route around, replaced like its findings (collectives/ reads
    // them through avoid_list/).
    std::vector<avoid_list::StoredEntry> avoid;
    for (const Finding& f : job.findings) {
      avoid_list::AvoidList kept = f.avoid;
      if (!trusted_owner(job.owner_uid)) {
        std::erase_if(kept.hosts,
                      [&](const std::string& h) { return !confirmed.count(witness_name(h)); });
        std::erase_if(kept.links,
                      [&](const avoid_list::Link& l) { return !confirmed.count(witness_name(l)); });
      }
      if (!kept.empty()) avoid.push_back({job.job_id, f.kind, f.subject, f.last_seen_ns, kept});
    }
    if (ok && !avoid_list::replace_job_entries(db, job.job_id, avoid, error)) {
      error = store + ": " + error;
      ok = false;
    }
    for (const Finding& f : job.findings) {
      if (!ok) break;
      const std::string evidence = evidence_text(f.evidence);
      const std::string severity = severity_name(f.severity);
      const std::string* texts[] = {&job.job_id, &job.path,  &f.kind,  &f.subject,
                                    &severity,   &f.summary, &evidence};
      for (int i = 0; i < 7; ++i)
        sqlite3_bind_text(upsert, i + 1, texts[i]->c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(upsert, 8, static_cast<sqlite3_int64>(f.first_seen_ns));
      sqlite3_bind_int64(upsert, 9, static_cast<sqlite3_int64>(f.last_seen_ns));
      if (sqlite3_step(upsert) != SQLITE_DONE) {
        error = store + ": " + sqlite_write_failure(store, db);
        ok = false;
      }
      sqlite3_reset(upsert);
      if (ok && !store_late_ranks(db, job.job_id, f)) {
        error = store + ": " + sqlite_write_failure(store, db);
        ok = false;
      }
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
