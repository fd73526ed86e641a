// analyzer/trace/symbols: call-site symbols as people read them. The monitor stores the linker's
// symbol (cheap on the writer thread, exact for joins); C++ callers are demangled only here,
// when shown.
#pragma once

#include <string>

struct sqlite3;

namespace commtap::analyzer {

// "_Z8CommRecvR6Domainiiiiibb" -> "CommRecv(Domain&, int, int, int, int, int, bool, bool)";
// anything that is not a mangled C++ name (C and Fortran symbols, "?") comes back unchanged.
std::string demangle(const std::string& symbol);

// Registers demangle(text) as an SQL function on `db`, for canned and user queries alike.
bool register_sql_functions(sqlite3* db);

}  // namespace commtap::analyzer
