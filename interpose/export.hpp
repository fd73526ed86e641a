#pragma once
// Symbols that must be visible from libcommtap.so: the interposed MPI/NCCL entry points and
// the small C API of include/commtap.h. Everything else is hidden by default.
#define COMMTAP_EXPORT __attribute__((visibility("default")))
