// analyzer/trace/file_rows: the ordered parallel read of file_rows.hpp.
#include "analyzer/trace/file_rows.hpp"

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "analyzer/trace/reader_pool.hpp"
#include "analyzer/trace/trace_files.hpp"
#include "analyzer/trace/untrusted_input.hpp"

namespace commtap::analyzer {

namespace {

// Rows per chunk, and chunks a reading thread may keep ahead of the consumer per file: a few
// MiB per thread at most.
constexpr std::size_t kChunkRows = 16384;
constexpr std::size_t kChunksAhead = 4;
// Rows a fresh chunk has room for before it grows.
constexpr std::size_t kFirstRows = 64;
// Files per reading thread whose observations may wait for the merge.
constexpr std::size_t kFilesAhead = 4;

}  // namespace

void RowChunk::add(sqlite3_stmt* stmt) {
  const auto columns = static_cast<std::size_t>(sqlite3_column_count(stmt));
  if (cells_.empty()) {
    columns_ = columns;
    // Room for a few rows at first: most passes hand over a few rows per file (the newest
    // heartbeat, a setting), and a whole chunk's room for each would be megabytes per file
    // and thread. A recycled chunk keeps what it grew to.
    cells_.reserve(kFirstRows * columns);
  }
  if (columns != columns_) return;  // one chunk holds one statement's rows
  for (std::size_t i = 0; i < columns; ++i) {
    const int c = static_cast<int>(i);
    Cell cell;
    cell.type = sqlite3_column_type(stmt, c);
    // Read as the statement would be: the integer first (it may convert the value's text).
    cell.value = sqlite3_column_int64(stmt, c);
    if (cell.type != SQLITE_NULL && cell.type != SQLITE_INTEGER) {
      cell.text = static_cast<std::int32_t>(texts_.size());
      texts_.push_back(analyzer::column_text(stmt, c));
    }
    cells_.push_back(cell);
  }
}

std::string ResultRow::text(int column) const {
  if (!chunk_) return analyzer::column_text(statement_, column);
  const RowChunk::Cell& c = cell(column);
  if (c.type == SQLITE_NULL) return "";
  if (c.text < 0) return std::to_string(c.value);
  return chunk_->texts_[static_cast<std::size_t>(c.text)];
}

bool without_memory_statistics() {
  return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
}

int reading_threads(int threads) {
  if (threads > 0) return threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

namespace {

// Fills chunks of one file and passes each full one on; its chunks come from `fresh` (recycled
// ones: a chunk's memory is reused rather than allocated and faulted in again).
class ChunkingSink : public RowSink {
 public:
  ChunkingSink(std::size_t file, std::function<void(RowChunk&&)> flush,
               std::function<RowChunk()> fresh)
      : file_(file), flush_(std::move(flush)), fresh_(std::move(fresh)) {
    start();
  }
  void begin_query(int query) override {
    finish();
    query_ = query;
    chunk_.query = query_;
  }
  void add(sqlite3_stmt* stmt) override {
    chunk_.add(stmt);
    if (chunk_.rows() >= kChunkRows) finish();
  }
  void finish() {
    if (chunk_.rows() == 0) return;
    flush_(std::move(chunk_));
    start();
  }

 private:
  void start() {
    chunk_ = fresh_();
    chunk_.file = file_;
    chunk_.query = query_;
  }
  std::size_t file_;
  int query_ = 0;
  RowChunk chunk_;
  std::function<void(RowChunk&&)> flush_;
  std::function<RowChunk()> fresh_;
};

// Hands each row to the consumer as it is read (a serial read).
class DirectSink : public RowSink {
 public:
  DirectSink(std::size_t file, const std::function<void(const ResultRow&)>& row,
             std::uint64_t* rows_read)
      : file_(file), row_(row), rows_read_(rows_read) {}
  void begin_query(int query) override { query_ = query; }
  void add(sqlite3_stmt* stmt) override {
    row_(ResultRow(stmt, query_, file_));
    if (rows_read_) ++*rows_read_;
  }

 private:
  std::size_t file_;
  int query_ = 0;
  const std::function<void(const ResultRow&)>& row_;
  std::uint64_t* rows_read_;
};

// Runs `work` on file `index` of `files`, leased from `readers` (or opened here where null).
bool read_one(ReaderPool* readers, const std::vector<std::string>& files, std::size_t index,
              const FileWork& work, RowSink& sink, std::string& error) {
  ReaderLease reader = lease_reader(readers, index, files[index], error);
  return reader && work(*reader, sink, error);
}

void consume(const RowChunk& chunk, const std::function<void(const ResultRow&)>& row,
             std::uint64_t* rows_read) {
  const std::size_t rows = chunk.rows();
  for (std::size_t i = 0; i < rows; ++i) row(ResultRow(chunk, i));
  if (rows_read) *rows_read += rows;
}

// The files being read ahead of the consumer, and who waits for whom.
class OrderedReads {
 public:
  OrderedReads(const std::vector<std::string>& files, ReaderPool* readers, const FileWork& work)
      : files_(files), readers_(readers), work_(work), slots_(files.size()) {}

  void run_worker(Deadline::At deadline) {
    const Deadline inherited(deadline);
    for (;;) {
      std::size_t file;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (cancelled_ || next_ >= files_.size()) return;
        file = next_++;
      }
      ChunkingSink sink(
          file, [&](RowChunk&& chunk) { push(file, std::move(chunk)); },
          [&] { return recycled(); });
      std::string error;
      bool ok = false;
      try {
        ok = read_one(readers_, files_, file, work_, sink, error);
        sink.finish();
      } catch (const std::exception& e) {
        error = files_[file] + ": cannot be read: " + e.what();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      Slot& slot = slots_[file];
      slot.done = true;
      slot.failed = !ok;
      slot.error = std::move(error);
      if (file == consuming_) consumer_wakes_.notify_one();
    }
  }

  // Hands every file's rows to `row` in order; false with the first failing file's error.
  bool consume_all(const std::function<void(const ResultRow&)>& row, std::string& error,
                   std::uint64_t* rows_read) {
    for (std::size_t file = 0; file < files_.size(); ++file) {
      for (;;) {
        RowChunk chunk;
        {
          std::unique_lock<std::mutex> lock(mutex_);
          Slot& slot = slots_[file];
          consuming_ = file;
          consumer_wakes_.wait(lock, [&] { return !slot.chunks.empty() || slot.done; });
          if (slot.chunks.empty()) {
            if (slot.failed) {
              error = slot.error;
              return false;
            }
            break;
          }
          chunk = std::move(slot.chunks.front());
          // A reader waits only for room in its file's queue.
          if (slot.chunks.size() == kChunksAhead) workers_wake_.notify_all();
          slot.chunks.pop_front();
        }
        consume(chunk, row, rows_read);
        chunk.clear();
        std::lock_guard<std::mutex> lock(mutex_);
        if (spare_.size() < kChunksAhead * 2) spare_.push_back(std::move(chunk));
      }
    }
    return true;
  }

  void cancel() {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled_ = true;
    workers_wake_.notify_all();
  }

 private:
  struct Slot {
    std::deque<RowChunk> chunks;
    bool done = false, failed = false;
    std::string error;
  };

  RowChunk recycled() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (spare_.empty()) return RowChunk();
    RowChunk chunk = std::move(spare_.back());
    spare_.pop_back();
    return chunk;
  }

  void push(std::size_t file, RowChunk&& chunk) {
    std::unique_lock<std::mutex> lock(mutex_);
    Slot& slot = slots_[file];
    workers_wake_.wait(lock, [&] { return cancelled_ || slot.chunks.size() < kChunksAhead; });
    if (cancelled_) return;
    slot.chunks.push_back(std::move(chunk));
    if (file == consuming_) consumer_wakes_.notify_one();
  }

  const std::vector<std::string>& files_;
  ReaderPool* readers_;
  const FileWork& work_;
  std::mutex mutex_;
  std::condition_variable consumer_wakes_, workers_wake_;
  std::size_t consuming_ = 0;  // the file the consumer takes rows of
  std::vector<Slot> slots_;
  std::vector<RowChunk> spare_;
  std::size_t next_ = 0;
  bool cancelled_ = false;
};

}  // namespace

bool read_files_in_order(const std::vector<std::string>& files, int threads, const FileWork& work,
                         const std::function<void(const ResultRow&)>& row, std::string& error,
                         std::uint64_t* rows_read, ReaderPool* readers) {
  const auto workers = static_cast<std::size_t>(
      std::min<std::size_t>(static_cast<std::size_t>(reading_threads(threads)), files.size()));
  if (workers <= 1) {
    // Serial: each row is handed on as SQLite returns it.
    for (std::size_t file = 0; file < files.size(); ++file) {
      DirectSink sink(file, row, rows_read);
      if (!read_one(readers, files, file, work, sink, error)) return false;
    }
    return true;
  }
  OrderedReads reads(files, readers, work);
  std::vector<std::thread> pool;
  // Joins the readers however the consumer leaves (an error, or an exception of its callback).
  struct Joiner {
    OrderedReads& reads;
    std::vector<std::thread>& pool;
    ~Joiner() {
      reads.cancel();
      for (std::thread& t : pool) t.join();
    }
  } joiner{reads, pool};
  const Deadline::At deadline = Deadline::current();
  for (std::size_t i = 0; i < workers; ++i)
    pool.emplace_back([&reads, deadline] { reads.run_worker(deadline); });
  return reads.consume_all(row, error, rows_read);
}

namespace {

// Hands each row of one file to its observation, on the reading thread.
class ObservingSink : public RowSink {
 public:
  ObservingSink(std::size_t file, FileObservation& observation)
      : file_(file), observation_(observation) {}
  void begin_query(int query) override { query_ = query; }
  void add(sqlite3_stmt* stmt) override {
    observation_.row(ResultRow(stmt, query_, file_));
    ++observation_.rows;
  }

 private:
  std::size_t file_;
  int query_ = 0;
  FileObservation& observation_;
};

// The files being observed ahead of the merge, and who waits for whom. The merging thread
// observes files too while the one it merges next is not done: `threads` threads in all.
class OrderedObservations {
 public:
  OrderedObservations(const std::vector<std::string>& files, ReaderPool* readers,
                      const FileWork& work,
                      const std::function<std::unique_ptr<FileObservation>(std::size_t)>& start,
                      std::size_t ahead)
      : files_(files),
        readers_(readers),
        work_(work),
        start_(start),
        ahead_(ahead),
        slots_(files.size()) {}

  void run_worker(Deadline::At deadline) {
    const Deadline inherited(deadline);
    for (;;) {
      std::size_t file;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        workers_wake_.wait(
            lock, [&] { return cancelled_ || next_ >= files_.size() || next_ < merged_ + ahead_; });
        if (!claim(file)) return;
      }
      observe(file);
    }
  }

  // Merges every file's observation in order; false with the first failing file's error.
  bool merge_all(const std::function<void(std::size_t, FileObservation&)>& merge,
                 std::string& error, std::uint64_t* rows_read) {
    for (std::size_t file = 0; file < files_.size(); ++file) {
      std::unique_ptr<FileObservation> observation;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        Slot& slot = slots_[file];
        while (!slot.done) {
          std::size_t next;
          if (claim(next)) {
            lock.unlock();
            observe(next);
            lock.lock();
          } else {
            merge_wakes_.wait(lock);
          }
        }
        if (slot.thrown) std::rethrow_exception(slot.thrown);
        if (slot.failed) {
          error = slot.error;
          return false;
        }
        observation = std::move(slot.observation);
      }
      merge(file, *observation);
      if (rows_read) *rows_read += observation->rows;
      observation.reset();
      std::lock_guard<std::mutex> lock(mutex_);
      merged_ = file + 1;
      workers_wake_.notify_all();
    }
    return true;
  }

  void cancel() {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled_ = true;
    workers_wake_.notify_all();
  }

 private:
  struct Slot {
    std::unique_ptr<FileObservation> observation;
    bool done = false, failed = false;
    std::string error;
    std::exception_ptr thrown;
  };

  // With the lock held: the next file to observe, if any is within reach of the merge.
  bool claim(std::size_t& file) {
    if (cancelled_ || next_ >= files_.size() || next_ >= merged_ + ahead_) return false;
    file = next_++;
    return true;
  }

  void observe(std::size_t file) {
    std::unique_ptr<FileObservation> observation;
    std::string error;
    bool ok = false;
    std::exception_ptr thrown;
    try {
      observation = start_(file);
      ObservingSink sink(file, *observation);
      ok = read_one(readers_, files_, file, work_, sink, error);
    } catch (...) {
      // Thrown again on the merging thread, at this file's turn: as a serial read throws.
      thrown = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    Slot& slot = slots_[file];
    slot.observation = std::move(observation);
    slot.done = true;
    slot.failed = !ok;
    slot.error = std::move(error);
    slot.thrown = thrown;
    if (file == merged_) merge_wakes_.notify_one();
  }

  const std::vector<std::string>& files_;
  ReaderPool* readers_;
  const FileWork& work_;
  const std::function<std::unique_ptr<FileObservation>(std::size_t)>& start_;
  const std::size_t ahead_;
  std::mutex mutex_;
  std::condition_variable merge_wakes_, workers_wake_;
  std::vector<Slot> slots_;
  std::size_t next_ = 0, merged_ = 0;
  bool cancelled_ = false;
};

}  // namespace

bool observe_files_in_order(
    const std::vector<std::string>& files, int threads, const FileWork& work,
    const std::function<std::unique_ptr<FileObservation>(std::size_t file)>& start,
    const std::function<void(std::size_t file, FileObservation& observed)>& merge,
    std::string& error, std::uint64_t* rows_read, ReaderPool* readers) {
  const auto observers = static_cast<std::size_t>(
      std::min<std::size_t>(static_cast<std::size_t>(reading_threads(threads)), files.size()));
  if (observers <= 1) {
    for (std::size_t file = 0; file < files.size(); ++file) {
      std::unique_ptr<FileObservation> observation = start(file);
      ObservingSink sink(file, *observation);
      if (!read_one(readers, files, file, work, sink, error)) return false;
      merge(file, *observation);
      if (rows_read) *rows_read += observation->rows;
    }
    return true;
  }
  OrderedObservations observations(files, readers, work, start, kFilesAhead * observers);
  std::vector<std::thread> pool;
  struct Joiner {
    OrderedObservations& observations;
    std::vector<std::thread>& pool;
    ~Joiner() {
      observations.cancel();
      for (std::thread& t : pool) t.join();
    }
  } joiner{observations, pool};
  const Deadline::At deadline = Deadline::current();
  // The calling thread is one of the observers.
  for (std::size_t i = 1; i < observers; ++i)
    pool.emplace_back([&observations, deadline] { observations.run_worker(deadline); });
  return observations.merge_all(merge, error, rows_read);
}

}  // namespace commtap::analyzer
