// analyzer/trace/reader_pool: each file of a job opened once per analysis. Opening a file is
// checking untrusted input (ReaderFile: its descriptor, journals, maybe a private copy), opening
// SQLite on a hardened connection, reading its schema version and parsing its schema: about a
// fifth of an analysis when every pass opened every file again (docs/benchmarks.md). The pool
// keeps each file's reader from its first opening to the end of the analysis and lends it to one
// thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace commtap::analyzer {

class ReaderFile;
class TraceReader;

// The descriptors a pool's readers may hold together: half the process's soft limit on file
// descriptors, less a margin for everything else. A kept reader holds one (SQLite's of the file)
// or, reading a private copy, three (the copy, its -wal and -shm); files past the budget are
// opened by each pass, as before pools.
std::size_t pooled_descriptors_budget();

class ReaderPool;

// One thread's use of a file's reader: the pool's (handed back when the lease ends) or one of
// its own (a file beyond the pool's budget, or one that another lease holds), closed when it
// ends. Empty where the file cannot be opened.
class ReaderLease {
 public:
  ReaderLease() = default;
  ReaderLease(ReaderLease&& other) noexcept;
  ReaderLease& operator=(ReaderLease&& other) noexcept;
  ReaderLease(const ReaderLease&) = delete;
  ReaderLease& operator=(const ReaderLease&) = delete;
  ~ReaderLease();
  explicit operator bool() const { return reader_ != nullptr; }
  TraceReader& operator*() const { return *reader_; }
  TraceReader* operator->() const { return reader_; }

 private:
  friend class ReaderPool;
  void release();
  TraceReader* reader_ = nullptr;
  std::unique_ptr<TraceReader> own_;  // a reader of this lease alone
  ReaderPool* pool_ = nullptr;        // where a pooled reader goes back to
  std::size_t index_ = 0;
};

// The readers of one analysis's files (JobFiles::readers), keyed by the file's index in
// JobFiles::files. A file's first opening decides for the whole analysis: a file refused then is
// refused with the same error by every later pass, without opening it again. A file read from a
// private copy (ReaderFile: a live or killed rank's side files) is kept with its copy while the
// kept copies take no more than half the free space left where they are made; beyond that each
// lease opens (copies) it again. A live job's files are so copied once per analysis, not once
// per pass (an analysis reads each file in 17 passes), and every pass reads the same rows.
class ReaderPool {
 public:
  // Keeps at most `most_files` files (the first leased) and `descriptors` descriptors.
  explicit ReaderPool(std::vector<std::string> files, std::size_t most_files = SIZE_MAX,
                      std::size_t descriptors = pooled_descriptors_budget());
  ~ReaderPool();
  ReaderPool(const ReaderPool&) = delete;
  ReaderPool& operator=(const ReaderPool&) = delete;

  // A reader of file `index`, whose path is `path` (opened for this lease alone where the pool
  // does not keep that file). Empty with `error` where it cannot be opened.
  ReaderLease lease(std::size_t index, const std::string& path, std::string& error);
  // Files opened so far (a pooled file counts once; one opened per lease at every lease).
  std::size_t openings() const;

 private:
  friend class ReaderLease;
  struct Entry;
  void hand_back(std::size_t index);
  bool copies_fit(const ReaderFile& copy);
  const std::vector<std::string> files_;
  const std::size_t most_files_, descriptors_;
  std::size_t kept_files_ = 0;        // entries kept (or being opened to keep), refused ones too
  std::size_t kept_descriptors_ = 0;  // what they hold (the most a reader may, while it opens)
  mutable std::mutex mutex_;          // guards entries_' state; a lent reader is its lease's alone
  std::vector<Entry> entries_;
  std::size_t openings_ = 0;
  std::uint64_t kept_copy_bytes_ = 0;  // the private copies of the readers kept
};

// A reader of `files[index]` from `pool`, or opened for this use alone where `pool` is null.
ReaderLease lease_reader(ReaderPool* pool, std::size_t index, const std::string& path,
                         std::string& error);

}  // namespace commtap::analyzer
