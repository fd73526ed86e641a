// nccl/functions: NCCL's functions as commtap knows them, expanded from nccl/functions.def (the
// one table of them: the wrappers, the profiler events and the function table of interpose/ all
// read it). Without nccl.h: only the names are expanded here.
#pragma once

#include <cstdint>
#include <iterator>

namespace commtap::nccl {

enum class Function : std::uint16_t {
#define COMMTAP_NCCL(name, family, params, args, count, datatype) name,
#include "nccl/functions.def"
#undef COMMTAP_NCCL
};

// The names without the "nccl" prefix ("AllReduce"): what NCCL's profiler descriptors carry
// (v2+) for the collectives and point-to-point operations they report.
inline constexpr const char* kFunctionName[] = {
#define COMMTAP_NCCL(name, family, params, args, count, datatype) #name,
#include "nccl/functions.def"
#undef COMMTAP_NCCL
};
inline constexpr std::uint32_t kFunctionCount = std::size(kFunctionName);

constexpr std::uint32_t index_of(Function function) noexcept {
  return static_cast<std::uint32_t>(function);
}

}  // namespace commtap::nccl
