// The trace writer's SQLite connection (internal to monitor/): a small RAII layer and the
// binding helpers its statements use.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>

#include "monitor/shared_fs.hpp"

namespace commtap::monitor {

// A tiny RAII layer over the SQLite C API: the writer needs only exec and one prepared insert
// at a time, and every failure becomes a message instead of an exception or an exit.
class Db {
 public:
  // `name` as PrivateDirectory::sqlite_name gives it, or empty with `problem` saying why the
  // file could not be created.
  Db(const std::string& name, const std::string& problem) {
    if (name.empty()) {
      error_ = problem;
      return;
    }
    // Only the writer thread uses the connection: no per-call mutex (a sixth of the writer's
    // time in perf with it).
    if (sqlite3_open_v2(name.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                        literal_vfs()) != SQLITE_OK) {
      error_ = db_ ? sqlite3_errmsg(db_) : "out of memory";
    }
  }
  ~Db() { close(); }
  void close() {
    for (auto* kept : {&statements_, &batched_}) {
      for (auto& [sql, stmt] : *kept) sqlite3_finalize(stmt);
      kept->clear();
    }
    sqlite3_close(db_);
    db_ = nullptr;
  }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  bool ok() const { return error_.empty(); }
  void fail(const char* message) { error_ = with_cause(message); }
  const std::string& error() const { return error_; }
  sqlite3* handle() const { return db_; }

  void exec(const char* sql) {
    if (!ok() || db_ == nullptr) return;
    char* message = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &message) != SQLITE_OK) {
      error_ = with_cause(message ? message : sqlite3_errmsg(db_));
      sqlite3_free(message);
    }
  }

  // Inserts `rows` rows with `sql`, a one-row INSERT whose VALUES list has `columns`
  // parameters: `bind_row(stmt, row, offset)` binds row number `row` to parameters offset + 1 ..
  // offset + columns. Rows go kRowsPerStatement at a time through one statement made from
  // `sql`'s head (a third less time per row than one row per step), the rest one by one.
  template <typename BindRow>
  void insert_many(const char* sql, int columns, std::size_t rows, BindRow bind_row) {
    if (!ok() || db_ == nullptr) return;
    constexpr std::size_t kRowsPerStatement = 32;
    std::size_t row = 0;
    if (rows >= kRowsPerStatement) {
      sqlite3_stmt*& many = batched_[sql];
      if (many == nullptr) {
        const std::string one = sql;
        std::string text = one.substr(0, one.find("VALUES")) + "VALUES ";
        std::string tuple = "(";
        for (int c = 0; c < columns; ++c) tuple += c == 0 ? "?" : ", ?";
        tuple += ")";
        for (std::size_t r = 0; r < kRowsPerStatement; ++r) text += (r == 0 ? "" : ", ") + tuple;
        if (sqlite3_prepare_v3(db_, text.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &many, nullptr) !=
            SQLITE_OK) {
          error_ = with_cause(sqlite3_errmsg(db_));
          return;
        }
      }
      for (; ok() && row + kRowsPerStatement <= rows; row += kRowsPerStatement) {
        for (std::size_t r = 0; r < kRowsPerStatement; ++r)
          bind_row(many, row + r, static_cast<int>(r) * columns);
        if (sqlite3_step(many) != SQLITE_DONE) error_ = with_cause(sqlite3_errmsg(db_));
        sqlite3_reset(many);
        sqlite3_clear_bindings(many);
      }
    }
    insert_rows(sql, [&](sqlite3_stmt* stmt) {
      if (row == rows) return false;
      bind_row(stmt, row++, 0);
      return true;
    });
  }

  // Runs `sql` once per call of `bind_row(stmt)`, which binds and returns false when done.
  // `sql` is a string literal: its statement is prepared once and kept for the next window.
  template <typename BindRow>
  void insert_rows(const char* sql, BindRow bind_row) {
    if (!ok() || db_ == nullptr) return;
    sqlite3_stmt*& stmt = statements_[sql];
    if (stmt == nullptr &&
        sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK) {
      error_ = with_cause(sqlite3_errmsg(db_));
      return;
    }
    while (ok() && bind_row(stmt)) {
      if (sqlite3_step(stmt) != SQLITE_DONE) error_ = with_cause(sqlite3_errmsg(db_));
      sqlite3_reset(stmt);
      sqlite3_clear_bindings(stmt);
    }
  }

 private:
  // SQLite's message plus the system's reason when there is one ("disk I/O error (File too
  // large)" says more than the first half).
  std::string with_cause(const char* message) const {
    std::string text = message;
    const int code = db_ != nullptr ? sqlite3_system_errno(db_) : 0;
    if (code != 0) text += std::string(" (") + std::strerror(code) + ")";
    return text;
  }

  sqlite3* db_ = nullptr;
  std::string error_;
  std::unordered_map<const char*, sqlite3_stmt*> statements_;  // by their SQL's address
  std::unordered_map<const char*, sqlite3_stmt*> batched_;     // insert_many's, by one row's SQL
};

inline void bind_text(sqlite3_stmt* stmt, int index, const std::string& text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}
// For the per-record rows: the text is not copied, so it must outlive the row's step (string
// literals, the snapshot's name tables).
inline void bind_stable_text(sqlite3_stmt* stmt, int index, const std::string& text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
}
inline void bind_stable_text(sqlite3_stmt* stmt, int index, const char* text) {
  sqlite3_bind_text(stmt, index, text, -1, SQLITE_STATIC);
}
inline void bind_u64(sqlite3_stmt* stmt, int index, std::uint64_t value) {
  sqlite3_bind_int64(stmt, index, static_cast<sqlite3_int64>(value));
}

}  // namespace commtap::monitor
