#include "cli/launch.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

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

// `name` as execvp finds it: itself if it has a slash, else the first executable on PATH.
std::string on_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// The program the loader starts for `file`: itself if it is ELF, the interpreter of a script
// ("#!/usr/bin/env python3" -> python3 on PATH), at most a few levels deep. Empty if neither.
std::string loaded_program(std::string file) {
  for (int depth = 0; depth < 4 && !file.empty(); ++depth) {
    std::ifstream in(file, std::ios::binary);
    char head[4] = {};
    if (!in.read(head, sizeof head)) return "";
    if (std::memcmp(head, ELFMAG, SELFMAG) == 0) return file;
    if (head[0] != '#' || head[1] != '!') return "";
    in.seekg(2);
    std::string line;
    std::getline(in, line);
    std::istringstream words(line);
    std::string interpreter, argument;
    words >> interpreter >> argument;
    file = fs::path(interpreter).filename() == "env" && !argument.empty() ? on_path(argument)
                                                                          : interpreter;
  }
  return "";
}

// The ELF file's PT_INTERP (its dynamic loader), "" for a static program, nullopt if unreadable.
std::optional<std::string> interpreter_of(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  unsigned char ident[EI_NIDENT] = {};
  if (!in.read(reinterpret_cast<char*>(ident), EI_NIDENT)) return std::nullopt;
  auto read_interp = [&](auto header, auto program) -> std::optional<std::string> {
    in.seekg(0);
    if (!in.read(reinterpret_cast<char*>(&header), sizeof header)) return std::nullopt;
    for (unsigned k = 0; k < header.e_phnum && k < 256; ++k) {
      in.seekg(static_cast<std::streamoff>(header.e_phoff + k * header.e_phentsize));
      if (!in.read(reinterpret_cast<char*>(&program), sizeof program)) return std::nullopt;
      if (program.p_type != PT_INTERP || program.p_filesz == 0 || program.p_filesz > 4096) continue;
      std::string path(program.p_filesz, '\0');
      in.seekg(static_cast<std::streamoff>(program.p_offset));
      if (!in.read(path.data(), static_cast<std::streamsize>(path.size()))) return std::nullopt;
      return std::string(path.c_str());
    }
    return std::string();
  };
  if (ident[EI_CLASS] == ELFCLASS64) return read_interp(Elf64_Ehdr{}, Elf64_Phdr{});
  if (ident[EI_CLASS] == ELFCLASS32) return read_interp(Elf32_Ehdr{}, Elf32_Phdr{});
  return std::nullopt;
}

// Runs `argv` with its output (both streams) captured, at most `timeout_ms`; nullopt if it could
// not run or did not finish in time (it is killed then).
std::optional<std::string> captured_output(const std::vector<std::string>& argv, int timeout_ms) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return std::nullopt;
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(out[1], 2);
    unsetenv("LD_PRELOAD");
    std::vector<char*> words;
    for (const std::string& word : argv) words.push_back(const_cast<char*>(word.c_str()));
    words.push_back(nullptr);
    execv(words[0], words.data());
    _exit(127);
  }
  close(out[1]);
  std::string text;
  bool finished = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd readable{out[0], POLLIN, 0};
    const int ready = poll(&readable, 1, 100);
    if (ready <= 0) continue;
    char buffer[4096];
    const ssize_t got = read(out[0], buffer, sizeof buffer);
    if (got <= 0) {
      finished = got == 0;
      if (got < 0 && errno == EINTR) continue;
      break;
    }
    if (text.size() < 65536) text.append(buffer, static_cast<std::size_t>(got));
  }
  close(out[0]);
  if (!finished) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!finished) return std::nullopt;
  return text;
}

}  // namespace

PreloadCheck check_preload(const std::string& library, const std::vector<std::string>& command) {
  PreloadCheck check;
  if (library.empty() || command.empty()) return check;
  check.program = loaded_program(on_path(command.front()));
  if (check.program.empty()) return check;
  const std::optional<std::string> loader = interpreter_of(check.program);
  if (!loader) return check;
  if (loader->empty()) {
    check.outcome = PreloadCheck::Outcome::static_program;
    return check;
  }
  const std::optional<std::string> listed =
      captured_output({*loader, "--list", "--preload", library, check.program}, 10000);
  if (!listed) return check;
  // The loader lists the preloaded library by the path it was given, with its load address.
  if (listed->find(library + " (0x") != std::string::npos) return check;
  std::istringstream lines(*listed);
  for (std::string line; std::getline(lines, line);) {
    const bool fatal = line.find("error while loading shared libraries") != std::string::npos;
    if (!fatal && line.find("cannot be preloaded") == std::string::npos) continue;
    check.said += (check.said.empty() ? "" : "; ") + line.substr(line.find_first_not_of(" \t"));
    if (fatal)
      check.outcome = PreloadCheck::Outcome::fatal;
    else if (check.outcome == PreloadCheck::Outcome::loads)
      check.outcome = PreloadCheck::Outcome::ignored;
  }
  return check;  // nothing recognised: a loader too old for --preload, or another listing
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
