// analyzer/trace/query_result: a table as SQL returned it, every value as text (`commtap query`'s
// answers, the report's table of call sites).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace commtap::analyzer {

struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<std::optional<std::string>>> rows;  // nullopt is SQL NULL
};

}  // namespace commtap::analyzer
