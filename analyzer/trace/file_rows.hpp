// analyzer/trace/file_rows: the rows of a job's files, read on several threads and handed to one
// consumer in the order a serial read would hand them (file by file, each file's rows in the
// order SQLite returns them), so that every result is the same whatever the thread count. Memory
// stays bounded: each reading thread keeps at most a few chunks of rows ahead of the consumer.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace commtap::analyzer {

class ReaderPool;
class TraceReader;

// A chunk of result rows, copied out of SQLite: each value as SQLite's sqlite3_column_int64
// reads it, and text (cleaned: clean_text) where the value is text, a blob or a real.
class RowChunk {
 public:
  struct Cell {
    std::int64_t value = 0;
    std::int32_t text = -1;  // index into texts_, or -1
    std::int32_t type = SQLITE_NULL;
  };
  void add(sqlite3_stmt* stmt);
  // Empties it, keeping its memory for the next rows.
  void clear() {
    columns_ = 0;
    cells_.clear();
    texts_.clear();
  }
  std::size_t rows() const { return columns_ == 0 ? 0 : cells_.size() / columns_; }
  int query = 0;  // which of the worker's statements these rows are of
  std::size_t file = 0;

 private:
  friend class ResultRow;
  std::size_t columns_ = 0;
  std::vector<Cell> cells_;
  std::vector<std::string> texts_;
};

// One row: of a chunk (a parallel read), or the current row of a statement (a serial read, which
// copies nothing). The same accessors as a statement's (column_i64, column_text, is_null).
class ResultRow {
 public:
  ResultRow(const RowChunk& chunk, std::size_t row)
      : chunk_(&chunk), first_(row * chunk.columns_), query_(chunk.query), file_(chunk.file) {}
  ResultRow(sqlite3_stmt* statement, int query, std::size_t file)
      : statement_(statement), query_(query), file_(file) {}
  std::int64_t i64(int column) const {
    return chunk_ ? cell(column).value : sqlite3_column_int64(statement_, column);
  }
  bool is_null(int column) const {
    return chunk_ ? cell(column).type == SQLITE_NULL
                  : sqlite3_column_type(statement_, column) == SQLITE_NULL;
  }
  std::string text(int column) const;
  int query() const { return query_; }
  std::size_t file() const { return file_; }

 private:
  const RowChunk::Cell& cell(int column) const {
    return chunk_->cells_[first_ + static_cast<std::size_t>(column)];
  }
  const RowChunk* chunk_ = nullptr;
  sqlite3_stmt* statement_ = nullptr;
  std::size_t first_ = 0;
  int query_ = 0;
  std::size_t file_ = 0;
};

inline std::int64_t column_i64(const ResultRow& row, int i) {
  return row.i64(i);
}
inline std::string column_text(const ResultRow& row, int i) {
  return row.text(i);
}
inline bool column_is_null(const ResultRow& row, int i) {
  return row.is_null(i);
}

// Where a worker puts the rows of one file.
class RowSink {
 public:
  virtual ~RowSink() = default;
  // The rows that follow are of statement `query` (0 until called).
  virtual void begin_query(int query) = 0;
  virtual void add(sqlite3_stmt* stmt) = 0;
};

// What a worker does with one file, opened: runs its statements into `sink`. False with `error`
// on failure (the file's rows then end there, and the read fails with this error once the
// consumer reaches the file).
using FileWork = std::function<bool(TraceReader& reader, RowSink& sink, std::string& error)>;

// SQLite counts the memory it uses under one process-wide mutex, which reading threads then take
// at every allocation: on 2 cores that contention cost more CPU than a second thread saved
// (docs/benchmarks.md). This turns the count off for the process; call it before SQLite is
// first used (false where it was: nothing changes). Not in a process that sets a heap limit
// (`commtap query`'s memory limit needs the count).
bool without_memory_statistics();

// The threads a read uses: `threads`, or all cores where it is 0.
int reading_threads(int threads);

// Opens each of `files` (TraceReader::open) on up to reading_threads(threads) threads, runs
// `work` on it, and calls `row` on the calling thread for every row, in file order. Stops at the
// first file (in file order) that fails to open or to be read, with its error. The calling
// thread's Deadline applies to every reading thread. `rows_read`, where given, counts the rows.
// `readers`, where given, is the analysis's pool of the same `files` (reader_pool.hpp): each file
// is leased from it instead of opened.
bool read_files_in_order(const std::vector<std::string>& files, int threads, const FileWork& work,
                         const std::function<void(const ResultRow&)>& row, std::string& error,
                         std::uint64_t* rows_read = nullptr, ReaderPool* readers = nullptr);

// What one file's rows made, on the thread that read them: a detector's per-file partial result
// (observe_files_in_order).
class FileObservation {
 public:
  virtual ~FileObservation() = default;
  virtual void row(const ResultRow& row) = 0;
  std::uint64_t rows = 0;  // rows observed
};

// Opens each of `files` on up to reading_threads(threads) threads and runs `work` on it, each row
// going to that file's observation (made by `start`) on the thread that read it; then calls
// `merge` on the calling thread with every file's observation in file order. So the work per
// row is spread over the threads, and whatever `merge` makes of the partials is the same at any
// thread count. Stops at the first file (in file order) that fails, with its error (`readers`:
// as read_files_in_order's). Reading
// threads run at most a few files ahead of the merge (the partials' memory stays bounded).
bool observe_files_in_order(
    const std::vector<std::string>& files, int threads, const FileWork& work,
    const std::function<std::unique_ptr<FileObservation>(std::size_t file)>& start,
    const std::function<void(std::size_t file, FileObservation& observed)>& merge,
    std::string& error, std::uint64_t* rows_read = nullptr, ReaderPool* readers = nullptr);

// The same with a partial of type Partial: `observe(partial, row)` on the reading thread,
// `merge(std::move(partial))` on the calling thread in file order.
template <class Partial, class Observe, class Merge>
bool observe_files_in_order(const std::vector<std::string>& files, int threads,
                            const FileWork& work, const Observe& observe, const Merge& merge,
                            std::string& error, std::uint64_t* rows_read = nullptr,
                            ReaderPool* readers = nullptr) {
  struct Holder : FileObservation {
    explicit Holder(const Observe& o) : observe(o) {}
    void row(const ResultRow& r) override { observe(partial, r); }
    const Observe& observe;
    Partial partial;
  };
  return observe_files_in_order(
      files, threads, work, [&](std::size_t) { return std::make_unique<Holder>(observe); },
      [&](std::size_t, FileObservation& observed) {
        merge(std::move(static_cast<Holder&>(observed).partial));
      },
      error, rows_read, readers);
}

}  // namespace commtap::analyzer
