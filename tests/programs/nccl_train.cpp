// A data-parallel training loop over NCCL alone (no MPI), started as torchrun or srun start a
// job: each step computes, all-reduces the "gradient", passes a block around the ring with
// grouped sends and receives, now and then broadcasts the "parameters" from rank 0, and with
// --split all-reduces on a communicator of the even or of the odd ranks. Every value depends on
// the rank and the step, so results are checked exactly. --constructors first makes and uses a
// communicator with each of the other constructors (InitRankConfig, InitRankScalable, Shrink
// without the last rank), then finalizes and destroys them (the fake NCCL only). --ddp gives
// the world communicator 4 collectives a step as PyTorch DDP does (the gradient in 3 buckets,
// then an AllGather), a period that sampling must not alias with.
//
// Built also as a shared library (nccl_train_lib, `main` named nccl_train_main) that Python
// loads with ctypes RTLD_LOCAL, as PyTorch's extension loads its libnccl.
//
//   launch_ranks -n 4 -- nccl_train [--steps N | --seconds S] [--split] [--constructors] [--ddp]
//                                   [--compute-us U] [--sleep] [--slow-rank R --slow-us U]
//                                   [--bytes B] [--p2p-bytes B] [--check-every K]
//                                   [--no-abort-on-error]
//
// Ranks come from RANK/WORLD_SIZE (or SLURM_PROCID/SLURM_NTASKS); rank 0 hands the NCCL unique
// id to the others on MASTER_ADDR:MASTER_PORT, as torch's TCP store does. Against the fake
// libnccl.so.2 buffers are host memory and fakeStreamSynchronize waits for the stream; built
// with -DNCCL_TRAIN_CUDA against the real library, they are device memory and
// cudaStreamSynchronize waits. An error from the stream or ncclCommGetAsyncError aborts the
// communicators (like torch's watchdog) and exits 4; a wrong result exits 3.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nccl.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#ifdef NCCL_TRAIN_CUDA
#include <cuda_runtime.h>
#else
extern "C" int fakeStreamSynchronize(void* stream);
#endif

namespace {

struct Options {
  int steps = 200;
  double seconds = 0;  // > 0: run this long instead of a fixed number of steps
  bool split = false;
  bool ddp = false;  // PyTorch DDP's shape: 3 gradient buckets and an AllGather a step
  bool constructors = false;
  bool sleep = false;  // compute by sleeping, as a host thread that waits for its GPU
  int slow_rank = -1;  // this rank computes slow_us longer every step (a straggler)
  long slow_us = 0;
  long compute_us = 2000;
  std::size_t bytes = 1 << 20;
  std::size_t p2p_bytes = 64 << 10;
  int check_every = 10;
  bool abort_on_error = true;
};

[[noreturn]] void usage(const char* problem) {
  std::fprintf(stderr,
               "nccl_train: %s\nusage: nccl_train [--steps N | --seconds S] [--split] "
               "[--constructors] [--ddp] [--sleep] [--slow-rank R --slow-us U] "
               "[--compute-us U] [--bytes B] [--p2p-bytes B] [--check-every K] "
               "[--no-abort-on-error]\n",
               problem);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view name = argv[i];
    auto number = [&]() -> double {
      if (i + 1 >= argc) usage((std::string(name) + " needs a value").c_str());
      char* end = nullptr;
      const double value = std::strtod(argv[++i], &end);
      if (*end || value < 0) usage((std::string("bad value for ") + std::string(name)).c_str());
      return value;
    };
    if (name == "--steps") {
      options.steps = static_cast<int>(number());
    } else if (name == "--seconds") {
      options.seconds = number();
    } else if (name == "--split") {
      options.split = true;
    } else if (name == "--ddp") {
      options.ddp = true;
    } else if (name == "--constructors") {
      options.constructors = true;
    } else if (name == "--sleep") {
      options.sleep = true;
    } else if (name == "--slow-rank") {
      options.slow_rank = static_cast<int>(number());
    } else if (name == "--slow-us") {
      options.slow_us = static_cast<long>(number());
    } else if (name == "--compute-us") {
      options.compute_us = static_cast<long>(number());
    } else if (name == "--bytes") {
      options.bytes = static_cast<std::size_t>(number());
    } else if (name == "--p2p-bytes") {
      options.p2p_bytes = static_cast<std::size_t>(number());
    } else if (name == "--check-every") {
      options.check_every = static_cast<int>(number());
    } else if (name == "--abort-on-error") {
      options.abort_on_error = true;
    } else if (name == "--no-abort-on-error") {
      options.abort_on_error = false;
    } else {
      usage((std::string("unknown option ") + std::string(name)).c_str());
    }
  }
  if (options.check_every < 1) options.check_every = 1;
  return options;
}

int environment_int(const char* name, const char* fallback, int otherwise) {
  const char* value = std::getenv(name);
  if (!value) value = fallback ? std::getenv(fallback) : nullptr;
  return value ? std::atoi(value) : otherwise;
}

double now_seconds() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// The "forward and backward pass": the core stays busy, as it would launching kernels; or,
// with --sleep, the host thread waits for its GPU (what most of a training step is on the host,
// and what lets several ranks share a few cores without taking turns on them).
void compute(long microseconds, bool sleep) {
  if (sleep) {
    const timespec pause{microseconds / 1000000, (microseconds % 1000000) * 1000};
    nanosleep(&pause, nullptr);
    return;
  }
  const double until = now_seconds() + static_cast<double>(microseconds) * 1e-6;
  while (now_seconds() < until) {
  }
}

// ---- Rendezvous: the unique id from rank 0, over MASTER_ADDR:MASTER_PORT -------------------
constexpr double kRendezvousSeconds = 120;

bool full_io(int fd, void* data, std::size_t bytes, bool write) {
  char* next = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t done = write ? send(fd, next, bytes, MSG_NOSIGNAL) : recv(fd, next, bytes, 0);
    if (done <= 0) {
      if (done < 0 && errno == EINTR) continue;
      return false;
    }
    next += done;
    bytes -= static_cast<std::size_t>(done);
  }
  return true;
}

[[noreturn]] void rendezvous_failed(const char* what) {
  std::fprintf(stderr, "nccl_train: rendezvous: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

void serve_unique_id(const ncclUniqueId& id, int port, int peers) {
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int on = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(listener, 128) != 0)
    rendezvous_failed("listen on MASTER_PORT");
  const double deadline = now_seconds() + kRendezvousSeconds;
  for (int served = 0; served < peers;) {
    pollfd waiting{listener, POLLIN, 0};
    const int left_ms = static_cast<int>((deadline - now_seconds()) * 1000);
    if (left_ms <= 0 || poll(&waiting, 1, left_ms) == 0) {
      errno = ETIMEDOUT;
      rendezvous_failed("waiting for the other ranks");
    }
    const int fd = accept(listener, nullptr, nullptr);
    if (fd < 0) continue;
    if (full_io(fd, const_cast<ncclUniqueId*>(&id), sizeof id, true)) ++served;
    close(fd);
  }
  close(listener);
}

ncclUniqueId fetch_unique_id(const char* host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host, service.c_str(), &hints, &found) != 0 || !found)
    rendezvous_failed("resolving MASTER_ADDR");
  sockaddr_in address;
  std::memcpy(&address, found->ai_addr, sizeof address);
  freeaddrinfo(found);
  // Rank 0 may not listen yet: try again until the deadline.
  const double deadline = now_seconds() + kRendezvousSeconds;
  for (double pause = 0.01;; pause = std::min(pause * 2, 0.5)) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ncclUniqueId id;
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
        full_io(fd, &id, sizeof id, false)) {
      close(fd);
      return id;
    }
    close(fd);
    if (now_seconds() > deadline) rendezvous_failed("connecting to MASTER_ADDR:MASTER_PORT");
    const timespec nap{0, static_cast<long>(pause * 1e9)};
    nanosleep(&nap, nullptr);
  }
}

// ---- Buffers: host memory for the fake, device memory with a host mirror for CUDA -----------
template <class T>
struct Buffer {
  std::vector<T> host;
  T* device = nullptr;

  explicit Buffer(std::size_t count) : host(count) {
#ifdef NCCL_TRAIN_CUDA
    if (cudaMalloc(reinterpret_cast<void**>(&device), count * sizeof(T)) != cudaSuccess) {
      std::fprintf(stderr, "nccl_train: cudaMalloc failed\n");
      std::exit(1);
    }
#else
    device = host.data();
#endif
  }
  ~Buffer() {
#ifdef NCCL_TRAIN_CUDA
    cudaFree(device);
#endif
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  std::size_t size() const {
    return host.size();
  }
  void upload() {
#ifdef NCCL_TRAIN_CUDA
    cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
#endif
  }
  void download() {
#ifdef NCCL_TRAIN_CUDA
    cudaMemcpy(host.data(), device, host.size() * sizeof(T), cudaMemcpyDeviceToHost);
#endif
  }
};

// Small integers, so every sum of them is exact in float32.
float pattern(std::size_t i, int step) {
  return static_cast<float>((i + static_cast<std::size_t>(step)) % 13 + 1);
}
float block_value(int rank, int step, std::size_t i) {
  return static_cast<float>(rank % 1000 * 1000 + step % 100 + static_cast<int>(i % 7));
}
float parameter_value(int step, std::size_t i) {
  return static_cast<float>((i + static_cast<std::size_t>(step)) % 11);
}

struct Job {
  Options options;
  int rank = 0;
  int size = 1;
  ncclComm_t world = nullptr;
  ncclComm_t half = nullptr;      // --split: the even or the odd ranks
  float half_rank_sum = 0;        // the sum of (rank + 1) over the ranks of this rank's half
  cudaStream_t stream = nullptr;  // the fake's default stream unless CUDA makes one
};

// Torch's watchdog on an NCCL error: abort the communicators so nothing stays blocked on them.
[[noreturn]] void fail_with(Job& job, const char* what, int step) {
  std::fprintf(stderr, "nccl_train: rank %d: %s at step %d%s\n", job.rank, what, step,
               job.options.abort_on_error ? "; aborting the communicators" : "");
  if (job.options.abort_on_error) {
    if (job.half) ncclCommAbort(job.half);
    ncclCommAbort(job.world);
  }
  std::exit(4);
}

void check_nccl(Job& job, ncclResult_t result, const char* call, int step) {
  if (result == ncclSuccess) return;
  const std::string what = std::string(call) + ": " + ncclGetErrorString(result) + " (" +
                           ncclGetLastError(job.world) + ")";
  fail_with(job, what.c_str(), step);
}

void synchronize(Job& job, int step) {
#ifdef NCCL_TRAIN_CUDA
  const bool failed = cudaStreamSynchronize(job.stream) != cudaSuccess;
#else
  const bool failed = fakeStreamSynchronize(job.stream) != 0;
#endif
  for (ncclComm_t comm : {job.world, job.half}) {
    ncclResult_t error = ncclSuccess;
    if (comm && ncclCommGetAsyncError(comm, &error) == ncclSuccess && error != ncclSuccess)
      check_nccl(job, error, "ncclCommGetAsyncError", step);
  }
  if (failed) fail_with(job, "the stream's work failed", step);
}

template <class Expected>
void expect(const Job& job, const char* what, const Buffer<float>& buffer, int step,
            Expected expected) {
  for (std::size_t i = 0; i < buffer.size(); ++i) {
    const float want = expected(i);
    if (buffer.host[i] != want) {
      std::fprintf(stderr, "nccl_train: rank %d step %d: %s element %zu is %g, expected %g\n",
                   job.rank, step, what, i, static_cast<double>(buffer.host[i]),
                   static_cast<double>(want));
      std::exit(3);
    }
  }
}

// --constructors: one communicator from each other constructor, an all-reduce of (rank + 1) on
// each, checked, then ncclCommFinalize and ncclCommDestroy. Each new unique id reaches the other
// ranks by a broadcast on the world communicator.
void use_every_constructor(Job& job) {
#ifdef NCCL_TRAIN_CUDA
  usage("--constructors runs on the fake NCCL only");
#else
  auto new_unique_id = [&] {
    ncclUniqueId id{};
    if (job.rank == 0) check_nccl(job, ncclGetUniqueId(&id), "ncclGetUniqueId", -1);
    check_nccl(job, ncclBroadcast(&id, &id, sizeof id, ncclInt8, 0, job.world, job.stream),
               "ncclBroadcast", -1);
    synchronize(job, -1);
    return id;
  };
  std::vector<std::pair<ncclComm_t, const char*> > made;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclComm_t comm = nullptr;
  ncclUniqueId id = new_unique_id();
  check_nccl(job, ncclCommInitRankConfig(&comm, job.size, id, job.rank, &config),
             "ncclCommInitRankConfig", -1);
  made.emplace_back(comm, "InitRankConfig");
  id = new_unique_id();
  check_nccl(job, ncclCommInitRankScalable(&comm, job.size, job.rank, 1, &id, nullptr),
             "ncclCommInitRankScalable", -1);
  made.emplace_back(comm, "InitRankScalable");
  // Shrink: the last rank is left out and does not call it (NCCL's contract).
  int excluded = job.size - 1;
  if (job.size > 1 && job.rank != excluded) {
    check_nccl(job, ncclCommShrink(job.world, &excluded, 1, &comm, nullptr, NCCL_SHRINK_DEFAULT),
               "ncclCommShrink", -1);
    made.emplace_back(comm, "Shrink");
  }
  for (auto [made_comm, name] : made) {
    int size = 0;
    ncclCommCount(made_comm, &size);
    float value = static_cast<float>(job.rank + 1);
    check_nccl(job, ncclAllReduce(&value, &value, 1, ncclFloat32, ncclSum, made_comm, job.stream),
               "ncclAllReduce", -1);
    synchronize(job, -1);
    if (value != static_cast<float>(size * (size + 1) / 2)) {
      std::fprintf(stderr, "nccl_train: rank %d: all-reduce on the %s communicator gave %g\n",
                   job.rank, name, static_cast<double>(value));
      std::exit(3);
    }
  }
  for (auto [made_comm, name] : made) {
    check_nccl(job, ncclCommFinalize(made_comm), "ncclCommFinalize", -1);
    check_nccl(job, ncclCommDestroy(made_comm), "ncclCommDestroy", -1);
  }
#endif
}

}  // namespace

#ifdef NCCL_TRAIN_LIBRARY
extern "C" __attribute__((visibility("default"))) int nccl_train_main(int argc, char** argv);
#endif

int main(int argc, char** argv) {
  Job job;
  job.options = parse(argc, argv);
  const Options& options = job.options;
  job.rank = environment_int("RANK", "SLURM_PROCID", 0);
  job.size = environment_int("WORLD_SIZE", "SLURM_NTASKS", 1);
  if (job.size < 1 || job.rank < 0 || job.rank >= job.size) usage("bad RANK/WORLD_SIZE");
  const char* master = std::getenv("MASTER_ADDR");
  const int port = environment_int("MASTER_PORT", nullptr, 29500);

#ifdef NCCL_TRAIN_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "nccl_train: no GPU\n");
    return 1;
  }
  cudaSetDevice(environment_int("LOCAL_RANK", nullptr, 0) % devices);
  cudaStreamCreate(&job.stream);
#endif

  ncclUniqueId id;
  if (job.rank == 0) {
    check_nccl(job, ncclGetUniqueId(&id), "ncclGetUniqueId", -1);
    serve_unique_id(id, port, job.size - 1);
  } else {
    id = fetch_unique_id(master ? master : "127.0.0.1", port);
  }
  check_nccl(job, ncclCommInitRank(&job.world, job.size, id, job.rank), "ncclCommInitRank", -1);
  if (options.split) {
    check_nccl(job, ncclCommSplit(job.world, job.rank % 2, job.rank, &job.half, nullptr),
               "ncclCommSplit", -1);
    int members = 0;
    for (int r = job.rank % 2; r < job.size; r += 2, ++members)
      job.half_rank_sum += static_cast<float>(r + 1);
    int half_size = 0;
    ncclCommCount(job.half, &half_size);
    if (half_size != members) {
      std::fprintf(stderr, "nccl_train: rank %d: split communicator of %d ranks, expected %d\n",
                   job.rank, half_size, members);
      return 3;
    }
  }
  if (options.constructors) use_every_constructor(job);

  const std::size_t elements = options.bytes / sizeof(float);
  const std::size_t block = options.p2p_bytes / sizeof(float);
  Buffer<float> gradient(elements), sum(elements), parameters(elements);
  Buffer<float> gathered(block * static_cast<std::size_t>(job.size));
  Buffer<float> outgoing(block), incoming(block), half_in(block), half_out(block);
  Buffer<int> stop_flag(1);
  const int next = (job.rank + 1) % job.size, prev = (job.rank + job.size - 1) % job.size;
  const float rank_sum = static_cast<float>(job.size) * static_cast<float>(job.size + 1) / 2;
  const double started = now_seconds();

  int step = 0;
  for (bool more = true; more; ++step) {
    const bool check = step % options.check_every == 0;
    const bool broadcast = step % 20 == 0 && !options.ddp;
    compute(options.compute_us + (job.rank == options.slow_rank ? options.slow_us : 0),
            options.sleep);
    for (std::size_t i = 0; i < elements; ++i)
      gradient.host[i] = static_cast<float>(job.rank + 1) * pattern(i, step);
    gradient.upload();
    for (std::size_t i = 0; i < block; ++i) outgoing.host[i] = block_value(job.rank, step, i);
    outgoing.upload();

    check_nccl(job,
               ncclAllReduce(gradient.device, sum.device, elements, ncclFloat32, ncclSum, job.world,
                             job.stream),
               "ncclAllReduce", step);
    if (options.ddp) {
      // The other two buckets (the same sums again: the result checked is unchanged), then the
      // AllGather of the blocks.
      for (int bucket = 2; bucket <= 3; ++bucket)
        check_nccl(job,
                   ncclAllReduce(gradient.device, sum.device, elements, ncclFloat32, ncclSum,
                                 job.world, job.stream),
                   "ncclAllReduce (bucket)", step);
      check_nccl(job,
                 ncclAllGather(outgoing.device, gathered.device, block, ncclFloat32, job.world,
                               job.stream),
                 "ncclAllGather", step);
    }
    check_nccl(job, ncclGroupStart(), "ncclGroupStart", step);
    check_nccl(job, ncclSend(outgoing.device, block, ncclFloat32, next, job.world, job.stream),
               "ncclSend", step);
    check_nccl(job, ncclRecv(incoming.device, block, ncclFloat32, prev, job.world, job.stream),
               "ncclRecv", step);
    check_nccl(job, ncclGroupEnd(), "ncclGroupEnd", step);
    if (broadcast) {
      if (job.rank == 0) {
        for (std::size_t i = 0; i < elements; ++i) parameters.host[i] = parameter_value(step, i);
        parameters.upload();
      }
      check_nccl(job,
                 ncclBroadcast(parameters.device, parameters.device, elements, ncclFloat32, 0,
                               job.world, job.stream),
                 "ncclBroadcast", step);
    }
    if (job.half) {
      for (std::size_t i = 0; i < block; ++i)
        half_out.host[i] = static_cast<float>(job.rank + 1) * pattern(i, step);
      half_out.upload();
      check_nccl(job,
                 ncclAllReduce(half_out.device, half_in.device, block, ncclFloat32, ncclSum,
                               job.half, job.stream),
                 "ncclAllReduce (split)", step);
    }
    // With --seconds the ranks agree on when to stop: whoever's clock says so, all stop together.
    if (options.seconds > 0) {
      stop_flag.host[0] = now_seconds() - started >= options.seconds ? 1 : 0;
      stop_flag.upload();
      check_nccl(job,
                 ncclAllReduce(stop_flag.device, stop_flag.device, 1, ncclInt32, ncclMax, job.world,
                               job.stream),
                 "ncclAllReduce (stop flag)", step);
    }
    synchronize(job, step);

    if (options.seconds > 0) {
      stop_flag.download();
      more = stop_flag.host[0] == 0;
    } else {
      more = step + 1 < options.steps;
    }
    if (check || !more) {
      sum.download();
      expect(job, "all-reduce", sum, step,
             [&](std::size_t i) { return rank_sum * pattern(i, step); });
      incoming.download();
      expect(job, "ring receive", incoming, step,
             [&](std::size_t i) { return block_value(prev, step, i); });
      if (job.half) {
        half_in.download();
        expect(job, "split all-reduce", half_in, step,
               [&](std::size_t i) { return job.half_rank_sum * pattern(i, step); });
      }
    }
    if (broadcast) {
      parameters.download();
      expect(job, "broadcast", parameters, step,
             [&](std::size_t i) { return parameter_value(step, i); });
    }
  }

  if (job.half) check_nccl(job, ncclCommDestroy(job.half), "ncclCommDestroy", step);
  check_nccl(job, ncclCommDestroy(job.world), "ncclCommDestroy", step);
#ifdef NCCL_TRAIN_CUDA
  cudaStreamDestroy(job.stream);
#endif
  if (job.rank == 0) std::printf("nccl_train: %d steps, result checks passed\n", step);
  return 0;
}
