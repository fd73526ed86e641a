/* Calls commtap's public C API (interpose/include/commtap.h) from a program that does not link
 * commtap: found with dlsym, so the program also runs without it ("no commtap"). Each rank prints
 * commtap_active() before MPI_Init, after it and after MPI_Finalize; rank 0 writes
 * commtap_settings_json() to the file named by its argument.
 *
 *   mpiexec -n 2 -genv LD_PRELOAD libcommtap.so ./public_api settings.json */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

typedef int (*ActiveFn)(void);
typedef const char* (*TextFn)(void);

/* dlsym's object pointer copied into a function pointer (ISO C has no cast between the two). */
static void find(const char* name, void* function, size_t size) {
  void* address = dlsym(RTLD_DEFAULT, name);
  memcpy(function, &address, size);
}

int main(int argc, char** argv) {
  ActiveFn active;
  TextFn settings_json, version;
  find("commtap_active", &active, sizeof active);
  find("commtap_settings_json", &settings_json, sizeof settings_json);
  find("commtap_version", &version, sizeof version);
  const int before = active ? active() : -1;
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int during = active ? active() : -1;
  MPI_Finalize();
  const int after = active ? active() : -1;
  if (active == NULL || settings_json == NULL || version == NULL) {
    printf("rank %d: no commtap\n", rank);
    return 0;
  }
  printf("rank %d: commtap %s, active %d before MPI_Init, %d after it, %d after MPI_Finalize\n",
         rank, version(), before, during, after);
  if (rank == 0 && argc > 1) {
    FILE* out = fopen(argv[1], "w");
    if (out == NULL || fprintf(out, "%s\n", settings_json()) < 0 || fclose(out) != 0) return 1;
  }
  return 0;
}
