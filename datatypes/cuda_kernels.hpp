// The CUDA pack kernels' launchers (cuda_kernels.cu), kept apart from MPI and the rest of the
// module so that nvcc compiles only device_index.hpp and this.
#pragma once

#include <cstdint>

#include "datatypes/device_index.hpp"

namespace commtap::datatypes::device {

// Queue one pack (typed to packed) or unpack kernel on `stream` (a cudaStream_t). `items` of a
// list shape must be device memory. Returns the launch's cudaError_t (0: queued).
int launch_strided(const StridedShape& shape, char* typed, char* packed, bool pack, void* stream);
int launch_list(const ListShape& shape, int word, char* typed, char* packed, bool pack,
                void* stream);

}  // namespace commtap::datatypes::device
