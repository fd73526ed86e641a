// analyzer/trace/reader_pool: each file of a job opened once per analysis (reader_pool.hpp).
#include "analyzer/trace/reader_pool.hpp"

#include <sqlite3.h>
#include <sys/resource.h>

#include <algorithm>
#include <utility>

#include "analyzer/trace/trace_files.hpp"

namespace commtap::analyzer {

namespace {

// The most descriptors a kept reader holds (TraceReader::descriptors), counted for it while it
// opens: a private copy, its -wal and its -shm.
constexpr std::size_t kMostDescriptorsPerReader = 3;
// Descriptors left to everything else: the standard streams, the reading threads' readers of
// files not kept (a file and its directory and SQLite's while they open, a copy's -wal and
// -shm), the output's files, a temporary copy, the job directory's listing.
constexpr std::size_t kDescriptorMargin = 64;
// Where the soft limit is infinite: as many as a limit of 2^16 would allow.
constexpr std::size_t kUnlimitedDescriptors = 65536;

}  // namespace

std::size_t pooled_descriptors_budget() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  const std::size_t half =
      (limit.rlim_cur == RLIM_INFINITY ? kUnlimitedDescriptors
                                       : static_cast<std::size_t>(limit.rlim_cur)) /
      2;
  return half > kDescriptorMargin ? half - kDescriptorMargin : 0;
}

struct ReaderPool::Entry {
  bool tried = false;  // opened once (reader or error holds the outcome)
  bool lent = false;   // a lease holds it, or it is being opened
  // Read from a private copy that the pool could not keep (copies_fit): each pass copies, reads
  // and removes it, as without a pool.
  bool unpooled = false;
  std::unique_ptr<TraceReader> reader;
  std::string error;
};

ReaderPool::ReaderPool(std::vector<std::string> files, std::size_t most_files,
                       std::size_t descriptors)
    : files_(std::move(files)),
      most_files_(most_files),
      descriptors_(descriptors),
      entries_(files_.size()) {}

ReaderPool::~ReaderPool() = default;

std::size_t ReaderPool::openings() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return openings_;
}

ReaderLease ReaderPool::lease(std::size_t index, const std::string& path, std::string& error) {
  ReaderLease lease;
  bool open_for_pool = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++openings_;
    if (index < files_.size() && files_[index] == path && !entries_[index].unpooled) {
      Entry& entry = entries_[index];
      if (entry.tried && !entry.reader) {  // refused at its first opening
        --openings_;
        error = entry.error;
        return lease;
      }
      // A file first leased once the pool is full is opened by every lease from then on (kept
      // readers stay to the end: the pool never has room again).
      if (!entry.tried && !entry.lent &&
          (kept_files_ >= most_files_ ||
           kept_descriptors_ + kMostDescriptorsPerReader > descriptors_))
        entry.unpooled = true;
      if (!entry.lent && !entry.unpooled) {
        entry.lent = true;
        lease.pool_ = this;
        lease.index_ = index;
        if (entry.tried) {
          --openings_;
          lease.reader_ = entry.reader.get();
          return lease;
        }
        ++kept_files_;
        kept_descriptors_ += kMostDescriptorsPerReader;
        open_for_pool = true;
      }
    }
  }
  // Opened outside the mutex, so that threads open their files at once.
  std::unique_ptr<TraceReader> reader = TraceReader::open(path, error);
  if (!open_for_pool) {
    lease.own_ = std::move(reader);
    lease.reader_ = lease.own_.get();
    return lease;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& entry = entries_[index];
  entry.tried = true;
  // What the reader holds, counted instead of the most it might have (none where refused).
  kept_descriptors_ -= kMostDescriptorsPerReader - (reader ? reader->descriptors() : 0);
  if (reader && reader->reads_copy() && !copies_fit(*reader->copy())) {
    kept_descriptors_ -= reader->descriptors();
    --kept_files_;
    entry.unpooled = true;
    entry.lent = false;
    lease.pool_ = nullptr;
    lease.own_ = std::move(reader);
    lease.reader_ = lease.own_.get();
    return lease;
  }
  entry.reader = std::move(reader);
  if (!entry.reader) {
    entry.error = error;
    entry.lent = false;
    lease.pool_ = nullptr;
    return lease;
  }
  lease.reader_ = entry.reader.get();
  return lease;
}

bool ReaderPool::copies_fit(const ReaderFile& copy) {
  // Called under mutex_. Kept copies never take more than half of what is left free where they
  // are made, so that the analysis of a big live job leaves room for everyone else's files
  // (and for the copies of the files it cannot keep, made and removed pass by pass).
  if (kept_copy_bytes_ + copy.copy_bytes() > copy.free_after_copy() / 2) return false;
  kept_copy_bytes_ += copy.copy_bytes();
  return true;
}

void ReaderPool::hand_back(std::size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_[index].lent = false;
}

ReaderLease::ReaderLease(ReaderLease&& other) noexcept {
  *this = std::move(other);
}

ReaderLease& ReaderLease::operator=(ReaderLease&& other) noexcept {
  if (this != &other) {
    release();
    reader_ = std::exchange(other.reader_, nullptr);
    own_ = std::move(other.own_);
    pool_ = std::exchange(other.pool_, nullptr);
    index_ = other.index_;
  }
  return *this;
}

ReaderLease::~ReaderLease() {
  release();
}

void ReaderLease::release() {
  if (pool_ != nullptr && reader_ != nullptr) {
    // The pages read stay with the operating system's cache, not with each of a few thousand
    // idle connections: what a pooled file keeps between passes is its parsed schema.
    reader_->release_memory();
    pool_->hand_back(index_);
  }
  reader_ = nullptr;
  own_.reset();
  pool_ = nullptr;
}

ReaderLease lease_reader(ReaderPool* pool, std::size_t index, const std::string& path,
                         std::string& error) {
  if (pool != nullptr) return pool->lease(index, path, error);
  ReaderPool unpooled({}, 0);
  return unpooled.lease(index, path, error);
}

}  // namespace commtap::analyzer
