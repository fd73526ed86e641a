/* commtap's public C API: the few symbols libcommtap.so exports besides the MPI and NCCL
 * entry points it interposes. */
#ifndef COMMTAP_H
#define COMMTAP_H

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, e.g. "0.1.0". */
const char* commtap_version(void);

/* Every COMMTAP_* setting this library understands, as a JSON array of objects with
 * variable, field, kind (flag, integer, text), default, description, and min/max for
 * integers. The string lives as long as the library. */
const char* commtap_settings_json(void);

/* Nonzero while the library is intercepting (after MPI_Init, before MPI_Finalize, unless
 * COMMTAP_DISABLE=1). */
int commtap_active(void);

/* How commtap packs the MPI datatype that `datatype` points to (an MPI_Datatype*, so that this
 * header needs no mpi.h): 1 with its own N-D strided plan, 2 with its own tree plan, 0 not at
 * all (the MPI library packs it; also while commtap is inactive or with COMMTAP_DATATYPES=0).
 * If `description` is not NULL, the canonical layout of one
 * element is written there, cut to `length` bytes with a terminating NUL. */
int commtap_datatype_plan(const void* datatype, char* description, int length);

/* Switches the algorithm MPI_Allreduce uses from now on, as COMMTAP_ALLREDUCE does at start (any
 * name that setting takes: `commtap settings` lists them). For benchmarks and experiments:
 * every rank must switch at the same point of the program. Returns 0, or -1 for an unknown
 * name (nothing changes). */
int commtap_allreduce_algorithm(const char* name);

/* For tests of device staging without a GPU (COMMTAP_TEST_FAKE_DEVICE=1): `bytes` of host
 * memory at `pointer` count as CUDA device memory while `device` is nonzero, and are
 * inaccessible (PROT_NONE) to everything but commtap's fake copies and kernels where they are
 * whole pages; 0 gives them back. Programs find it with dlsym, so that they also run without
 * commtap. */
void commtap_test_device_memory(const void* pointer, unsigned long bytes, int device);
/* The fake device's copies and kernel launches so far (tests check which methods ran). */
void commtap_test_device_counts(unsigned long* copies, unsigned long* kernels);

#ifdef __cplusplus
}
#endif

#endif /* COMMTAP_H */
