// avoid_list: the contract between the analyzer and collectives/. `commtap analyze --store`
// writes, next to its findings, the hosts and directed links a job found slow with what crossing
// them costs; a later job's all-reduce (COMMTAP_AVOID_HOSTS=@STORE) reads them and routes around.
// Versioned like NCCL's plugin structs: a reader takes only the rows of the format it knows, so
// an older library and a newer analyzer (or the reverse) share one store safely. A leaf: SQLite
// only, no MPI, nothing of the analyzer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct sqlite3;

namespace commtap::avoid_list {

// The store's rows carry it; bump it when a column changes meaning, and keep reading the old.
inline constexpr int kFormatVersion = 1;

// A directed link and what crossing it costs over a healthy one (0: unmeasured, avoid anyway).
struct Link {
  std::string from, to;
  double extra_latency_s = 0;   // per message
  double extra_s_per_byte = 0;  // per byte
  bool operator==(const Link&) const = default;
};

struct AvoidList {
  std::vector<std::string> hosts;  // hosts to keep out of every leader and relay role
  std::vector<Link> links;
  bool empty() const { return hosts.empty() && links.empty(); }
  bool operator==(const AvoidList&) const = default;
};

// Bounds on what a reader takes from a store: its size, its rows, a host name's length (host
// names are also only letters, digits, '-', '.' and '_'; others are left out, here and in encode).
constexpr std::uint64_t kMaxStoreBytes = 64ull << 20;
constexpr int kMaxRows = 4096;
constexpr std::size_t kMaxHostName = 255;

// One line of text, as rank 0 sends the list to the other ranks: comma-separated entries, a
// host name or "FROM>TO>EXTRA_LATENCY_S>EXTRA_S_PER_BYTE" (host names hold neither ',' nor '>').
std::string encode(const AvoidList& list);
// The inverse of encode; malformed entries are skipped.
AvoidList decode(const std::string& text);

// One finding's share of the list, as the analyzer stores it: the finding it comes from (job,
// kind, subject), when it was last seen, and the hosts or links it names.
struct StoredEntry {
  std::string job_id, finding_kind, subject;
  std::uint64_t last_seen_ns = 0;  // wall clock
  AvoidList avoid;
};

// Replaces `job_id`'s rows in `db` (an open findings store, inside the caller's transaction)
// by `entries`, creating the table if needed. False with `error` on an SQLite error.
bool replace_job_entries(sqlite3* db, const std::string& job_id,
                         const std::vector<StoredEntry>& entries, std::string& error);

// The hosts and links of the rows of this format seen after `since_ns` in the store at `path`
// (opened read-only; the path is the job owner's own setting), in a stable order. A store without
// the table (none written yet) gives an empty list; false with `error` when the file cannot be
// read.
bool read_recent(const std::string& path, std::uint64_t since_ns, AvoidList& list,
                 std::string& error);

}  // namespace commtap::avoid_list
