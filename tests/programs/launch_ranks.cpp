// A small torchrun: starts the ranks of a job on this node as children with the environment a
// torchrun or srun job gets, and no MPI.
//
//   launch_ranks [-n N | --nproc-per-node N] [--nnodes M --node-rank I --master-addr A
//                --master-port P] [--run-id ID] -- program args...
//
// Each child gets RANK (node rank * N + local rank), WORLD_SIZE (M * N), LOCAL_RANK,
// LOCAL_WORLD_SIZE, GROUP_RANK (the node rank), MASTER_ADDR (default 127.0.0.1), MASTER_PORT
// (on a single node, default a free port; several nodes must name one) and TORCHELASTIC_RUN_ID
// (default "none", like torchrun), plus torchrun's other role and restart variables.
// SIGTERM, SIGINT and SIGHUP are forwarded to the children. When a child fails, the others get
// SIGTERM and, after a grace period, SIGKILL, so that a crashed rank does not leave its peers
// waiting forever. The exit status is the first failed child's (128 + signal if killed), else 0.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr int kGraceSeconds = 5;

struct Options {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: choose one (single node only)
  std::string run_id = "none";
  std::vector<char*> command;
};

[[noreturn]] void usage(const char* problem) {
  std::fprintf(stderr,
               "launch_ranks: %s\n"
               "usage: launch_ranks [-n N | --nproc-per-node N] [--nnodes M --node-rank I "
               "--master-addr A --master-port P] [--run-id ID] -- program args...\n",
               problem);
  std::exit(2);
}

int parse_count(const char* text, const char* option, int minimum) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (!*text || *end || value < minimum || value > 1 << 20)
    usage((std::string("bad value for ") + option + ": " + text).c_str());
  return static_cast<int>(value);
}

Options parse(int argc, char** argv) {
  Options options;
  bool port_given = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view argument = argv[i];
    if (argument == "--") {
      ++i;
      break;
    }
    // --option value and --option=value alike.
    std::string_view name = argument;
    const char* value = nullptr;
    if (const std::size_t equals = argument.find('=');
        argument.starts_with("--") && equals != std::string_view::npos) {
      name = argument.substr(0, equals);
      value = argv[i] + equals + 1;
    }
    auto take = [&]() -> const char* {
      if (value) return value;
      if (i + 1 >= argc) usage((std::string(name) + " needs a value").c_str());
      return argv[++i];
    };
    if (name == "-n" || name == "--nproc-per-node" || name == "--nproc_per_node") {
      options.nproc_per_node = parse_count(take(), "--nproc-per-node", 1);
    } else if (name == "--nnodes") {
      options.nnodes = parse_count(take(), "--nnodes", 1);
    } else if (name == "--node-rank" || name == "--node_rank") {
      options.node_rank = parse_count(take(), "--node-rank", 0);
    } else if (name == "--master-addr" || name == "--master_addr") {
      options.master_addr = take();
    } else if (name == "--master-port" || name == "--master_port") {
      options.master_port = parse_count(take(), "--master-port", 1);
      port_given = true;
    } else if (name == "--run-id" || name == "--run_id") {
      options.run_id = take();
    } else {
      usage((std::string("unknown option ") + std::string(argument)).c_str());
    }
  }
  for (; i < argc; ++i) options.command.push_back(argv[i]);
  options.command.push_back(nullptr);
  if (options.command.size() == 1) usage("no program to run");
  if (options.node_rank >= options.nnodes) usage("--node-rank must be below --nnodes");
  if (options.nnodes > 1 && !port_given) usage("several nodes need --master-port");
  return options;
}

// A port nobody listens on now, for rank 0 to listen on shortly (as torchrun's standalone mode
// picks one).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  socklen_t length = sizeof address;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    std::perror("launch_ranks: choosing a port");
    std::exit(1);
  }
  close(fd);
  return ntohs(address.sin_port);
}

struct Child {
  pid_t pid = 0;
  int rank = 0;
  bool running = false;
};

// 128 + signal for a child killed by a signal, as a shell reports it.
int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void signal_children(const std::vector<Child>& children, int signal) {
  for (const Child& child : children)
    if (child.running) kill(child.pid, signal);
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const int port = options.master_port ? options.master_port : free_port();
  const int world_size = options.nnodes * options.nproc_per_node;

  // The signals this process waits for arrive through sigtimedwait, never a handler; children
  // get the original mask back before exec.
  sigset_t waited, original;
  sigemptyset(&waited);
  for (int signal : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&waited, signal);
  sigprocmask(SIG_BLOCK, &waited, &original);

  std::vector<Child> children(static_cast<std::size_t>(options.nproc_per_node));
  for (int local = 0; local < options.nproc_per_node; ++local) {
    const int rank = options.node_rank * options.nproc_per_node + local;
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("launch_ranks: fork");
      signal_children(children, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      const auto set = [](const char* name, const std::string& value) {
        setenv(name, value.c_str(), 1);
      };
      set("RANK", std::to_string(rank));
      set("WORLD_SIZE", std::to_string(world_size));
      set("LOCAL_RANK", std::to_string(local));
      set("LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node));
      set("GROUP_RANK", std::to_string(options.node_rank));
      set("GROUP_WORLD_SIZE", std::to_string(options.nnodes));
      set("ROLE_RANK", std::to_string(rank));
      set("ROLE_WORLD_SIZE", std::to_string(world_size));
      set("ROLE_NAME", "default");
      set("MASTER_ADDR", options.master_addr);
      set("MASTER_PORT", std::to_string(port));
      set("TORCHELASTIC_RUN_ID", options.run_id);
      set("TORCHELASTIC_RESTART_COUNT", "0");
      set("TORCHELASTIC_MAX_RESTARTS", "0");
      sigprocmask(SIG_SETMASK, &original, nullptr);
      execvp(options.command[0], options.command.data());
      std::fprintf(stderr, "launch_ranks: cannot run %s: %s\n", options.command[0],
                   std::strerror(errno));
      _exit(127);
    }
    children[static_cast<std::size_t>(local)] = Child{pid, rank, true};
  }

  int running = options.nproc_per_node;
  int first_failure = 0;
  int received_signal = 0;
  timespec kill_at{};  // once the others are told to stop: when SIGKILL follows
  bool stopping = false;
  auto start_stopping = [&](int signal) {
    signal_children(children, signal);
    if (stopping) return;
    stopping = true;
    clock_gettime(CLOCK_MONOTONIC, &kill_at);
    kill_at.tv_sec += kGraceSeconds;
  };

  while (running > 0) {
    siginfo_t info{};
    int signal;
    if (stopping) {
      timespec now{};
      clock_gettime(CLOCK_MONOTONIC, &now);
      std::int64_t left_ns =
          (kill_at.tv_sec - now.tv_sec) * 1'000'000'000LL + (kill_at.tv_nsec - now.tv_nsec);
      if (left_ns <= 0) {
        std::fprintf(stderr, "launch_ranks: %d rank(s) still running after %d s: killing them\n",
                     running, kGraceSeconds);
        signal_children(children, SIGKILL);
        left_ns = 1'000'000'000LL;  // they are gone soon; wait for their SIGCHLD
        kill_at.tv_sec += 3600;
      }
      const timespec timeout{static_cast<time_t>(left_ns / 1'000'000'000LL),
                             static_cast<long>(left_ns % 1'000'000'000LL)};
      signal = sigtimedwait(&waited, &info, &timeout);
    } else {
      signal = sigwaitinfo(&waited, &info);
    }
    if (signal < 0) continue;  // timeout or EINTR: the loop looks at the deadline again
    if (signal != SIGCHLD) {
      received_signal = signal;
      start_stopping(signal);  // forwarded as is: a torchrun job sees the signal it was sent
      continue;
    }
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      for (Child& child : children) {
        if (child.pid != pid || !child.running) continue;
        child.running = false;
        --running;
        const int code = exit_code(status);
        if (code != 0 && first_failure == 0) {
          first_failure = code;
          if (running > 0)
            std::fprintf(stderr,
                         "launch_ranks: rank %d (pid %d) failed with status %d; stopping the "
                         "other ranks\n",
                         child.rank, static_cast<int>(pid), code);
          start_stopping(SIGTERM);
        }
      }
    }
  }
  if (first_failure != 0) return first_failure;
  return received_signal ? 128 + received_signal : 0;
}
