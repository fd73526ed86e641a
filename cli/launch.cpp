#include "cli/launch.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace commtap::cli {

namespace fs = std::filesystem;

std::string find_library(const std::string& explicit_path) {
  if (!explicit_path.empty()) return fs::exists(explicit_path) ? explicit_path : "";
  if (const char* variable = std::getenv("COMMTAP_LIBRARY"); variable && *variable)
    return fs::exists(variable) ? variable : "";
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  // Installed: <prefix>/bin/commtap and <prefix>/<libdir>/libcommtap.so.
  // Build tree: <build>/cli/commtap and <build>/interpose/libcommtap.so.
  for (const fs::path& candidate :
       {self.parent_path().parent_path() / COMMTAP_INSTALL_LIBDIR / "libcommtap.so",
        self.parent_path().parent_path() / "interpose" / "libcommtap.so"}) {
    if (fs::exists(candidate, ec)) return fs::canonical(candidate, ec).string();
  }
  return "";
}

std::string find_calibrate_program() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const fs::path& candidate :
       {self.parent_path() / "commtap-calibrate",
        self.parent_path().parent_path() / "collectives" / "commtap-calibrate"}) {
    if (fs::exists(candidate, ec)) return fs::canonical(candidate, ec).string();
  }
  return "";
}

namespace {
pid_t child_pid = -1;
void forward_signal(int signal) {
  if (child_pid > 0) kill(child_pid, signal);
}
}  // namespace

int run_preloaded(const std::string& library, const std::map<std::string, std::string>& variables,
                  const std::vector<std::string>& command, bool* started) {
  std::string preload = library;
  if (const char* existing = std::getenv("LD_PRELOAD"); existing && *existing)
    preload += std::string(":") + existing;

  if (started) *started = false;
  // The child reports a failed exec through this pipe (closed unread by a successful one), so
  // that a command that could not start is told apart from one that exits 127.
  int exec_failed[2] = {-1, -1};
  if (pipe2(exec_failed, O_CLOEXEC) != 0) exec_failed[0] = exec_failed[1] = -1;
  child_pid = fork();
  if (child_pid < 0) {
    std::fprintf(stderr, "commtap: cannot fork: %s\n", std::strerror(errno));
    for (int fd : exec_failed)
      if (fd >= 0) close(fd);
    return 127;
  }
  if (child_pid == 0) {
    if (!library.empty()) setenv("LD_PRELOAD", preload.c_str(), 1);
    for (const auto& [name, value] : variables) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> argv;
    for (const std::string& word : command) argv.push_back(const_cast<char*>(word.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    const int error = errno;
    std::fprintf(stderr, "commtap: cannot run %s: %s\n", argv[0], std::strerror(error));
    if (exec_failed[1] >= 0 && write(exec_failed[1], &error, sizeof error) < 0) _exit(127);
    _exit(127);
  }
  if (exec_failed[1] >= 0) close(exec_failed[1]);
  bool exec_ok = true;
  if (exec_failed[0] >= 0) {
    int error = 0;
    ssize_t got;
    while ((got = read(exec_failed[0], &error, sizeof error)) < 0 && errno == EINTR) {
    }
    exec_ok = got <= 0;
    close(exec_failed[0]);
  }
  if (started) *started = exec_ok;
  struct sigaction action {};
  action.sa_handler = forward_signal;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal, &action, nullptr);

  int status = 0;
  while (waitpid(child_pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace commtap::cli
