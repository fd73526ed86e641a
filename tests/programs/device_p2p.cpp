// Point-to-point on "device" buffers, for mpi.device_staging: every send and receive buffer is
// registered as device memory with commtap's test hook (commtap_test_device_memory, found with
// dlsym: without commtap it does nothing and the buffers are plain host memory). Under
// COMMTAP_TEST_FAKE_DEVICE=1 registered memory is inaccessible to the MPI library, so the run
// only succeeds if commtap stages every transfer; its output must equal a native run's.
//
//   mpiexec -n 2 ./device_p2p <output prefix> [cuda]    writes <prefix>.<rank>
//
// With `cuda` (a build with CUDA, on a GPU) the "device" buffers are real cudaMalloc memory:
// scripts/gpu-check compares that run, preloaded, with the native run on host buffers.
//
// Each line is one observable result: return codes (as error classes), every status field MPI
// defines (source, tag, error where defined, counts in the user's type, cancelled), flags,
// indices, and a checksum of each whole receive allocation (gaps included). Cases: blocking,
// nonblocking with every Wait/Test form, send-receive and its replace form, matched receives,
// wildcards, MPI_PROC_NULL, zero counts, truncation, a partial last element, cancellation,
// MPI_Request_free, device to host and host to device, large-count forms; over contiguous,
// strided, irregular, struct, subarray, resized, darray and hole-y named types.
#include <dlfcn.h>
#include <mpi.h>
#include <sys/mman.h>
#if DEVICE_P2P_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using MarkFn = void (*)(const void*, unsigned long, int);
MarkFn mark_device = nullptr;
bool use_cuda = false;
FILE* out = nullptr;
int rank = 0;

constexpr std::size_t kRegion = 64 << 10;  // whole pages
constexpr std::size_t kOrigin = 32 << 10;  // types reach up to 32 KiB either side

// A page-aligned allocation whose buffer origin sits in the middle; registered as device memory
// while `device` is true.
class Region {
 public:
  Region(bool device, unsigned seed) : device_(device) {
    memory_ = static_cast<unsigned char*>(
        mmap(nullptr, kRegion, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    unsigned x = seed * 2654435761u + 12345;
    for (std::size_t i = 0; i < kRegion; ++i) {
      x = x * 1103515245u + 12345;
      memory_[i] = static_cast<unsigned char>(x >> 16);
    }
#if DEVICE_P2P_WITH_CUDA
    if (device_ && use_cuda) {
      cudaMalloc(reinterpret_cast<void**>(&gpu_), kRegion);
      cudaMemcpy(gpu_, memory_, kRegion, cudaMemcpyHostToDevice);
      return;
    }
#endif
    if (device_ && mark_device != nullptr) mark_device(memory_, kRegion, 1);
  }
  ~Region() {
    release();
    munmap(memory_, kRegion);
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  void* at() {
    return (gpu_ != nullptr ? gpu_ : memory_) + kOrigin;
  }
  // FNV-1a of the whole allocation (after giving it back as host memory).
  std::uint64_t checksum() {
    release();
    std::uint64_t h = 1469598103934665603ull;
    for (std::size_t i = 0; i < kRegion; ++i) h = (h ^ memory_[i]) * 1099511628211ull;
    return h;
  }

 private:
  void release() {
#if DEVICE_P2P_WITH_CUDA
    if (gpu_ != nullptr) {
      cudaMemcpy(memory_, gpu_, kRegion, cudaMemcpyDeviceToHost);
      cudaFree(gpu_);
      gpu_ = nullptr;
    }
#endif
    if (device_ && mark_device != nullptr) mark_device(memory_, kRegion, 0);
    device_ = false;
  }
  unsigned char* gpu_ = nullptr;
  unsigned char* memory_;
  bool device_;
};

int error_class(int rc) {
  int c = rc;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &c);
  return c;
}

void line(const std::string& text) {
  std::fprintf(out, "%s\n", text.c_str());
}

// A status as MPI defines it after a receive: `with_error` where the call sets MPI_ERROR.
std::string status_text(const MPI_Status& s, MPI_Datatype type, bool with_error) {
  int count = 0, elements = 0, cancelled = 0;
  MPI_Get_count(&s, type, &count);
  MPI_Get_elements(&s, type, &elements);
  MPI_Test_cancelled(&s, &cancelled);
  std::string text = "source " + std::to_string(s.MPI_SOURCE) + " tag " +
                     std::to_string(s.MPI_TAG) + " count " + std::to_string(count) + " elements " +
                     std::to_string(elements) + " cancelled " + std::to_string(cancelled);
  if (with_error) text += " error " + std::to_string(error_class(s.MPI_ERROR));
  return text;
}

struct Type {
  std::string name;
  MPI_Datatype type;
  // The one basic type it is made of (a partial element is sent as a few more of them than
  // one element holds), or MPI_DATATYPE_NULL for mixed types.
  MPI_Datatype basic = MPI_DATATYPE_NULL;
};

std::vector<Type> make_types() {
  std::vector<Type> types;
  types.push_back({"int", MPI_INT, MPI_INT});
  MPI_Datatype t;
  MPI_Type_vector(5, 2, 4, MPI_DOUBLE, &t);
  types.push_back({"vector", t, MPI_DOUBLE});
  MPI_Type_create_hvector(3, 1, -24, MPI_INT, &t);
  types.push_back({"hvector_negative", t, MPI_INT});
  const int lengths[] = {2, 1, 3}, displacements[] = {0, 5, 9};
  MPI_Type_indexed(3, lengths, displacements, MPI_SHORT, &t);
  types.push_back({"indexed", t, MPI_SHORT});
  {
    const int blocks[] = {1, 1, 3};
    const MPI_Aint at[] = {0, 8, 20};
    const MPI_Datatype members[] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    MPI_Type_create_struct(3, blocks, at, members, &t);
    types.push_back({"struct", t});
  }
  {
    const int sizes[] = {8, 6, 5}, sub[] = {8, 6, 1}, start[] = {0, 0, 2};
    MPI_Type_create_subarray(3, sizes, sub, start, MPI_ORDER_C, MPI_DOUBLE, &t);
    types.push_back({"subarray_face", t, MPI_DOUBLE});
  }
  {
    MPI_Datatype v;
    MPI_Type_vector(2, 1, 3, MPI_FLOAT, &v);
    MPI_Type_create_resized(v, -8, 32, &t);
    MPI_Type_free(&v);
    types.push_back({"resized_negative_lb", t, MPI_FLOAT});
  }
  {
    const int gsizes[] = {16}, distribs[] = {MPI_DISTRIBUTE_CYCLIC}, dargs[] = {2}, psizes[] = {2};
    MPI_Type_create_darray(2, 0, 1, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT, &t);
    types.push_back({"darray", t, MPI_INT});
  }
  types.push_back({"double_int", MPI_DOUBLE_INT});
  for (Type& type : types) {
    int ni, na, nt, combiner;
    MPI_Type_get_envelope(type.type, &ni, &na, &nt, &combiner);
    if (combiner != MPI_COMBINER_NAMED) MPI_Type_commit(&type.type);
  }
  return types;
}

int peer() {
  return 1 - rank;
}

// ---- The cases ------------------------------------------------------------------------------

void blocking(const Type& t, unsigned seed) {
  const int count = 3;
  Region send(true, seed), recv(true, seed + 1);
  if (rank == 0) {
    line("send rc " +
         std::to_string(error_class(MPI_Send(send.at(), count, t.type, 1, 1, MPI_COMM_WORLD))));
    line("ssend rc " +
         std::to_string(error_class(MPI_Ssend(send.at(), count, t.type, 1, 2, MPI_COMM_WORLD))));
    line("send_c rc " +
         std::to_string(error_class(MPI_Send_c(send.at(), count, t.type, 1, 3, MPI_COMM_WORLD))));
  } else {
    MPI_Status s;
    int rc = MPI_Recv(recv.at(), count, t.type, 0, 1, MPI_COMM_WORLD, &s);
    line("recv rc " + std::to_string(error_class(rc)) + " " + status_text(s, t.type, false));
    rc = MPI_Recv(recv.at(), count, t.type, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &s);
    line("recv any rc " + std::to_string(error_class(rc)) + " " + status_text(s, t.type, false));
    rc = MPI_Recv_c(recv.at(), count, t.type, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    line("recv_c ignore rc " + std::to_string(error_class(rc)));
  }
  line("blocking checksum " + std::to_string(recv.checksum()));
}

// Two messages each way per completion form.
void nonblocking(const Type& t, unsigned seed) {
  static const char* forms[] = {"wait",    "test",    "waitall",  "testall",
                                "waitany", "testany", "waitsome", "testsome"};
  for (int f = 0; f < 8; ++f) {
    Region send_a(true, seed + 10 * f), send_b(true, seed + 10 * f + 1);
    Region recv_a(true, seed + 10 * f + 2), recv_b(rank == 1, seed + 10 * f + 3);
    MPI_Request r[4];
    const int count = 3, tag = 100 + f;
    MPI_Irecv(recv_a.at(), count, t.type, peer(), tag, MPI_COMM_WORLD, &r[0]);
    MPI_Irecv_c(recv_b.at(), count, t.type, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r[1]);
    MPI_Isend(send_a.at(), count, t.type, peer(), tag, MPI_COMM_WORLD, &r[2]);
    MPI_Issend(send_b.at(), count, t.type, peer(), tag + 50, MPI_COMM_WORLD, &r[3]);
    const bool ignore = f % 2 == 1;  // odd forms ignore statuses
    MPI_Status s[4];
    std::string text = std::string(forms[f]);
    int rc = MPI_SUCCESS;
    switch (f) {
      case 0:
        for (int i = 0; i < 4; ++i) {
          rc = MPI_Wait(&r[i], &s[i]);
          text += " rc " + std::to_string(error_class(rc));
          if (i < 2) text += " [" + status_text(s[i], t.type, false) + "]";
        }
        break;
      case 1:
        for (int i = 0; i < 4; ++i) {
          int flag = 0;
          while (!flag) rc = MPI_Test(&r[i], &flag, MPI_STATUS_IGNORE);
          text += " rc " + std::to_string(error_class(rc)) + " flag " + std::to_string(flag);
        }
        break;
      case 2:
        rc = MPI_Waitall(4, r, s);
        text += " rc " + std::to_string(error_class(rc));
        for (int i = 0; i < 2; ++i) text += " [" + status_text(s[i], t.type, false) + "]";
        break;
      case 3: {
        int flag = 0;
        while (!flag) rc = MPI_Testall(4, r, &flag, MPI_STATUSES_IGNORE);
        text += " rc " + std::to_string(error_class(rc));
        break;
      }
      case 4:
      case 5:
        for (int done = 0; done < 4;) {
          int index = -1, flag = 1;
          MPI_Status one;
          if (f == 4)
            rc = MPI_Waitany(4, r, &index, ignore ? MPI_STATUS_IGNORE : &one);
          else
            rc = MPI_Testany(4, r, &index, &flag, ignore ? MPI_STATUS_IGNORE : &one);
          if (!flag || index == MPI_UNDEFINED) continue;
          ++done;
          if (!ignore && index < 2) s[index] = one;
        }
        text += " rc " + std::to_string(error_class(rc));
        if (!ignore)
          for (int i = 0; i < 2; ++i) text += " [" + status_text(s[i], t.type, false) + "]";
        break;
      default:
        for (int done = 0; done < 4;) {
          int n = 0, indices[4];
          MPI_Status some[4];
          if (f == 6)
            rc = MPI_Waitsome(4, r, &n, indices, some);
          else
            rc = MPI_Testsome(4, r, &n, indices, MPI_STATUSES_IGNORE);
          if (n == MPI_UNDEFINED) break;
          for (int k = 0; k < n; ++k)
            if (f == 6 && indices[k] < 2) s[indices[k]] = some[k];
          done += n;
        }
        text += " rc " + std::to_string(error_class(rc));
        if (f == 6)
          for (int i = 0; i < 2; ++i) text += " [" + status_text(s[i], t.type, false) + "]";
        break;
    }
    for (int i = 0; i < 4; ++i) text += r[i] == MPI_REQUEST_NULL ? " null" : " live";
    line(text);
    line(std::string(forms[f]) + " checksums " + std::to_string(recv_a.checksum()) + " " +
         std::to_string(recv_b.checksum()));
  }
}

void sendrecv(const Type& t, unsigned seed) {
  Region send(true, seed), recv(true, seed + 1), both(true, seed + 2);
  MPI_Status s;
  int rc = MPI_Sendrecv(send.at(), 3, t.type, peer(), 5, recv.at(), 3, t.type, peer(), 5,
                        MPI_COMM_WORLD, &s);
  line("sendrecv rc " + std::to_string(error_class(rc)) + " " + status_text(s, t.type, false));
  rc = MPI_Sendrecv_replace(both.at(), 2, t.type, peer(), 6, peer(), 6, MPI_COMM_WORLD, &s);
  line("replace rc " + std::to_string(error_class(rc)) + " " + status_text(s, t.type, false));
  // Host on one side, device on the other.
  Region host_send(false, seed + 3), mixed(rank == 0, seed + 4);
  rc = MPI_Sendrecv(rank == 0 ? host_send.at() : send.at(), 2, t.type, peer(), 7, mixed.at(), 2,
                    t.type, peer(), 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  line("sendrecv mixed rc " + std::to_string(error_class(rc)));
  line("sendrecv checksums " + std::to_string(recv.checksum()) + " " +
       std::to_string(both.checksum()) + " " + std::to_string(mixed.checksum()));
  // MPI_Isendrecv(_replace) on MPI_INT only (MPICH 4.0.2 corrupts its datatype pool with
  // derived types, and its native results with MPI_DOUBLE_INT change from run to run) and
  // without statuses (it returns broken ones): tests/mpich_defects/isendrecv_*.c.
  if (t.type == MPI_INT) {
    Region isend(true, seed + 5), irecv(true, seed + 6), ireplace(true, seed + 7);
    MPI_Request r[2];
    MPI_Isendrecv(isend.at(), 3, t.type, peer(), 8, irecv.at(), 3, t.type, peer(), 8,
                  MPI_COMM_WORLD, &r[0]);
    MPI_Isendrecv_replace(ireplace.at(), 3, t.type, peer(), 9, peer(), 9, MPI_COMM_WORLD, &r[1]);
    rc = MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    line("isendrecv rc " + std::to_string(error_class(rc)) + " checksums " +
         std::to_string(irecv.checksum()) + " " + std::to_string(ireplace.checksum()));
  }
}

void matched(const Type& t, unsigned seed) {
  Region send(true, seed), recv(true, seed + 1), irecv(true, seed + 2);
  if (rank == 0) {
    MPI_Send(send.at(), 3, t.type, 1, 8, MPI_COMM_WORLD);
    MPI_Send(send.at(), 2, t.type, 1, 9, MPI_COMM_WORLD);
  } else {
    MPI_Message m;
    MPI_Status s;
    MPI_Mprobe(0, 8, MPI_COMM_WORLD, &m, &s);
    int rc = MPI_Mrecv(recv.at(), 3, t.type, &m, &s);
    line("mrecv rc " + std::to_string(error_class(rc)) + " " + status_text(s, t.type, false));
    int flag = 0;
    while (!flag) MPI_Improbe(0, 9, MPI_COMM_WORLD, &flag, &m, MPI_STATUS_IGNORE);
    MPI_Request r;
    MPI_Imrecv(irecv.at(), 3, t.type, &m, &r);
    rc = MPI_Wait(&r, &s);
    line("imrecv rc " + std::to_string(error_class(rc)) + " " + status_text(s, t.type, false));
  }
  line("matched checksums " + std::to_string(recv.checksum()) + " " +
       std::to_string(irecv.checksum()));
}

void edges(const Type& t, unsigned seed) {
  Region send(true, seed), recv(true, seed + 1), small(true, seed + 2), part(true, seed + 3);
  MPI_Status s;
  MPI_Request r;
  // MPI_PROC_NULL and zero counts.
  int rc = MPI_Send(send.at(), 3, t.type, MPI_PROC_NULL, 1, MPI_COMM_WORLD);
  line("send proc_null rc " + std::to_string(error_class(rc)));
  rc = MPI_Recv(recv.at(), 3, t.type, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &s);
  line("recv proc_null rc " + std::to_string(error_class(rc)) + " " +
       status_text(s, t.type, false));
  rc = MPI_Irecv(recv.at(), 3, t.type, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r);
  rc = MPI_Wait(&r, &s);
  // Source and tag left out: MPICH 4.0.2 gets them wrong (tests/mpich_defects/
  // irecv_proc_null_status.c), and differently when the request was polled before the wait, as
  // COMMTAP_YIELD=1 does (-1/-1 here natively, 0/0 polled), with or without device staging.
  int null_count = 0, null_cancelled = 0;
  MPI_Get_count(&s, t.type, &null_count);
  MPI_Test_cancelled(&s, &null_cancelled);
  line("irecv proc_null rc " + std::to_string(error_class(rc)) + " count " +
       std::to_string(null_count) + " cancelled " + std::to_string(null_cancelled));
  rc = MPI_Sendrecv_replace(recv.at(), 3, t.type, MPI_PROC_NULL, 1, MPI_PROC_NULL, 1,
                            MPI_COMM_WORLD, &s);
  line("replace proc_null rc " + std::to_string(error_class(rc)) + " " +
       status_text(s, t.type, false));
  if (rank == 0) {
    MPI_Send(send.at(), 0, t.type, 1, 2, MPI_COMM_WORLD);
    // Truncation: three elements to a receive of two, blocking and nonblocking.
    MPI_Send(send.at(), 3, t.type, 1, 3, MPI_COMM_WORLD);
    MPI_Send(send.at(), 3, t.type, 1, 4, MPI_COMM_WORLD);
    // A part of an element: one element and three basic elements more (a message that ends
    // inside a basic element would be erroneous: the type signatures would differ).
    if (t.basic != MPI_DATATYPE_NULL) {
      int size = 0, basic = 0;
      MPI_Type_size(t.type, &size);
      MPI_Type_size(t.basic, &basic);
      MPI_Send(send.at(), size / basic + 3, t.basic, 1, 5, MPI_COMM_WORLD);
    }
  } else {
    rc = MPI_Recv(recv.at(), 0, t.type, 0, 2, MPI_COMM_WORLD, &s);
    line("recv zero rc " + std::to_string(error_class(rc)) + " " + status_text(s, t.type, false));
    rc = MPI_Recv(small.at(), 2, t.type, 0, 3, MPI_COMM_WORLD, &s);
    line("recv truncated rc " + std::to_string(error_class(rc)) + " " +
         status_text(s, t.type, false));
    MPI_Irecv(small.at(), 2, t.type, 0, 4, MPI_COMM_WORLD, &r);
    rc = MPI_Wait(&r, &s);
    line("irecv truncated rc " + std::to_string(error_class(rc)) + " " +
         status_text(s, t.type, true));
    if (t.basic != MPI_DATATYPE_NULL) {
      rc = MPI_Recv(part.at(), 3, t.type, 0, 5, MPI_COMM_WORLD, &s);
      line("recv partial rc " + std::to_string(error_class(rc)) + " " +
           status_text(s, t.type, false));
    }
  }
  // Cancelled receive: nothing arrives, nothing is written.
  Region never(true, seed + 4);
  MPI_Irecv(never.at(), 3, t.type, peer(), 999, MPI_COMM_WORLD, &r);
  MPI_Cancel(&r);
  rc = MPI_Wait(&r, &s);
  int cancelled = 0;
  MPI_Test_cancelled(&s, &cancelled);
  line("cancel rc " + std::to_string(error_class(rc)) + " cancelled " + std::to_string(cancelled));
  // A freed send request: the transfer still completes.
  if (rank == 0) {
    MPI_Isend(send.at(), 3, t.type, 1, 6, MPI_COMM_WORLD, &r);
    rc = MPI_Request_free(&r);
    line("request_free rc " + std::to_string(error_class(rc)) +
         (r == MPI_REQUEST_NULL ? " null" : " live"));
  } else {
    rc = MPI_Recv(recv.at(), 3, t.type, 0, 6, MPI_COMM_WORLD, &s);
    line("recv freed rc " + std::to_string(error_class(rc)) + " " + status_text(s, t.type, false));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  line("edges checksums " + std::to_string(recv.checksum()) + " " +
       std::to_string(small.checksum()) + " " + std::to_string(part.checksum()) + " " +
       std::to_string(never.checksum()));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc < 2) {
    std::fprintf(stderr, "usage: device_p2p <output prefix>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  use_cuda = argc > 2 && std::string(argv[2]) == "cuda";
#if !DEVICE_P2P_WITH_CUDA
  if (use_cuda) {
    std::fprintf(stderr, "device_p2p: built without CUDA\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
#endif
  if (!use_cuda)
    mark_device = reinterpret_cast<MarkFn>(dlsym(RTLD_DEFAULT, "commtap_test_device_memory"));
  out = std::fopen((std::string(argv[1]) + "." + std::to_string(rank)).c_str(), "w");
  setvbuf(out, nullptr, _IOLBF, 0);  // what was done before a crash stays
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::vector<Type> types = make_types();
  unsigned seed = 1;
  for (const Type& t : types) {
    line("== " + t.name);
    blocking(t, seed += 100);
    nonblocking(t, seed += 100);
    sendrecv(t, seed += 100);
    matched(t, seed += 100);
    edges(t, seed += 100);
  }
  for (Type& t : types) {
    int ni, na, nt, combiner;
    MPI_Type_get_envelope(t.type, &ni, &na, &nt, &combiner);
    if (combiner != MPI_COMBINER_NAMED) MPI_Type_free(&t.type);
  }
  std::fclose(out);
  // The fake device's counters, for the test to see which methods ran (stderr, rank 0).
  using CountsFn = void (*)(unsigned long*, unsigned long*);
  if (auto counts = reinterpret_cast<CountsFn>(dlsym(RTLD_DEFAULT, "commtap_test_device_counts"));
      counts != nullptr && rank == 0) {
    unsigned long copies = 0, kernels = 0;
    counts(&copies, &kernels);
    std::fprintf(stderr, "fake device: copies %lu kernels %lu\n", copies, kernels);
  }
  MPI_Finalize();
  return 0;
}
