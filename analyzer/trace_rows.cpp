// analyzer/trace_rows: the readers of trace_rows.hpp.
#include "analyzer/trace_rows.hpp"

#include "analyzer/trace_files.hpp"

namespace commtap::analyzer {

namespace {

std::optional<std::int64_t> column_optional(const ResultRow& s, int i) {
  if (column_is_null(s, i)) return std::nullopt;
  return column_i64(s, i);
}

bool each_transfer(const Job& job, const char* sql,
                   const std::function<void(const TransferRow&)>& row, std::string& error) {
  TransferRow t;
  return each_row(
      job, sql,
      [&](const ResultRow& s) {
        t.rank = static_cast<int>(column_i64(s, 0));
        t.peer = static_cast<int>(column_i64(s, 1));
        t.comm_id = column_i64(s, 2);
        t.tag = column_i64(s, 3);
        t.msg = column_i64(s, 4);
        t.bytes = column_i64(s, 5);
        t.start_ns = static_cast<std::uint64_t>(column_i64(s, 6));
        t.end_ns = static_cast<std::uint64_t>(column_i64(s, 7));
        row(t);
      },
      error);
}

}  // namespace

bool each_probe(const Job& job, const std::function<void(const ProbeRow&)>& row,
                std::string& error) {
  ProbeRow p;
  return each_row(
      job,
      "SELECT rank, at_ns, from_node, to_node, from_host, to_host, bytes, ns, slowest_ns, "
      "slowest_oneway_ns, sent_ns, peer_received_ns, peer_replied_ns, received_ns FROM probes "
      "ORDER BY at_ns",
      [&](const ResultRow& s) {
        p.rank = static_cast<int>(column_i64(s, 0));
        p.at_ns = static_cast<std::uint64_t>(column_i64(s, 1));
        p.from_node = static_cast<int>(column_i64(s, 2));
        p.to_node = static_cast<int>(column_i64(s, 3));
        p.from_host = column_text(s, 4);
        p.to_host = column_text(s, 5);
        p.bytes = column_i64(s, 6);
        p.ns = column_i64(s, 7);
        p.slowest_ns = column_i64(s, 8);
        p.slowest_oneway_ns = column_optional(s, 9);
        p.sent_ns = column_optional(s, 10);
        p.peer_received_ns = column_i64(s, 11);
        p.peer_replied_ns = column_i64(s, 12);
        p.received_ns = column_i64(s, 13);
        row(p);
      },
      error);
}

bool each_send(const Job& job, const std::function<void(const TransferRow&)>& row,
               std::string& error) {
  return each_transfer(job,
                       "SELECT rank, peer, comm_id, tag, msg, bytes, start_ns, end_ns FROM "
                       "transfers WHERE direction = 'send'",
                       row, error);
}

bool each_receive(const Job& job, const std::function<void(const TransferRow&)>& row,
                  std::string& error) {
  return each_transfer(job,
                       "SELECT rank, peer, comm_id, tag, msg, bytes, start_ns, end_ns FROM "
                       "transfers WHERE direction = 'recv'",
                       row, error);
}

}  // namespace commtap::analyzer
