#pragma once
// NCCL's datatypes, the one table of them in commtap: the numeric codes of ncclDataType_t (stable
// since NCCL 2.0, the 8-bit floats added in 2.24 as 10 and 11), the names NCCL's profiler
// descriptors carry since v4 ("ncclFloat32"), and their sizes in bytes. No nccl.h needed: the
// wrappers, the profiler plugin and the fake NCCL all read sizes and names from here.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace commtap::nccl {

struct DatatypeInfo {
  std::string_view name;  // as NCCL's ncclDatatypeToString gives it
  std::uint8_t bytes;
};

inline constexpr DatatypeInfo kDatatypes[] = {
    {"ncclInt8", 1},    {"ncclUint8", 1},    {"ncclInt32", 4},      {"ncclUint32", 4},
    {"ncclInt64", 8},   {"ncclUint64", 8},   {"ncclFloat16", 2},    {"ncclFloat32", 4},
    {"ncclFloat64", 8}, {"ncclBfloat16", 2}, {"ncclFloat8e4m3", 1}, {"ncclFloat8e5m2", 1},
};
inline constexpr int kDatatypeCount = static_cast<int>(std::size(kDatatypes));  // ncclNumTypes

// Bytes per element of datatype `code`; 0 for a code this table does not know (a newer NCCL's
// type: the payload is then unknown, not guessed).
constexpr std::uint32_t datatype_bytes(int code) noexcept {
  return code >= 0 && code < kDatatypeCount ? kDatatypes[code].bytes : 0;
}

// Bytes per element of a datatype by NCCL's name for it; 0 when unknown.
inline std::uint32_t datatype_bytes(const char* name) noexcept {
  if (name == nullptr) return 0;
  const std::string_view wanted(name, std::strlen(name));
  for (const DatatypeInfo& type : kDatatypes)
    if (type.name == wanted) return type.bytes;
  return 0;
}

}  // namespace commtap::nccl
