#include "analyzer/trace/symbols.hpp"

#include <cxxabi.h>
#include <sqlite3.h>

#include <cstdlib>
#include <memory>

namespace commtap::analyzer {

std::string demangle(const std::string& symbol) {
  // Only Itanium-ABI names: __cxa_demangle also "demangles" plain words that happen to parse as
  // a type ("i" -> "int"), which would rename C and Fortran functions.
  if (symbol.rfind("_Z", 0) != 0) return symbol;
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> text(
      abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && text ? std::string(text.get()) : symbol;
}

namespace {

void demangle_sql(sqlite3_context* context, int, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
    sqlite3_result_null(context);
    return;
  }
  const auto* text = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  const std::string out = demangle(text ? text : "");
  sqlite3_result_text(context, out.c_str(), static_cast<int>(out.size()), SQLITE_TRANSIENT);
}

}  // namespace

bool register_sql_functions(sqlite3* db) {
  return sqlite3_create_function(db, "demangle", 1,
                                 SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, nullptr,
                                 demangle_sql, nullptr, nullptr) == SQLITE_OK;
}

}  // namespace commtap::analyzer
