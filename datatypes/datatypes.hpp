// datatypes: where a buffer lives and, later, canonical strided plans and packers for derived
// datatypes on host and CUDA device memory.
#pragma once

namespace commtap::datatypes {

enum class MemoryKind { host, device };

// True when this build has CUDA support and the process can see at least one GPU. Answered
// once (the first call asks the CUDA runtime); "no driver" and "no device" both mean false.
bool gpu_available() noexcept;

// Where `pointer` lives. Without CUDA support or a GPU every pointer is host memory.
MemoryKind memory_kind(const void* pointer) noexcept;

// Whether this build was compiled with the CUDA parts.
bool built_with_cuda() noexcept;

}  // namespace commtap::datatypes
