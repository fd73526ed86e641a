// `commtap run`: launching a job with the library preloaded.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace commtap::cli {

// libcommtap.so for this CLI: `explicit_path` if given, else $COMMTAP_LIBRARY, else the
// installed layout next to this executable, else the build tree's. Empty if none exists.
std::string find_library(const std::string& explicit_path);

// commtap-calibrate for this CLI: next to this executable (installed) or in the build tree.
// Empty if none exists.
std::string find_calibrate_program();

// Whether this machine's dynamic loader would preload `library` into `command`'s program (the
// interpreter of a script: torchrun is Python), asked of the loader itself (`ld.so --list
// --preload`) without running the program. Other nodes of a job may still differ: the loader's
// own message in the job's output says so there.
struct PreloadCheck {
  enum class Outcome {
    loads,    // or it cannot be told (no loader with --preload, an unreadable program)
    ignored,  // the loader skips it ("cannot be preloaded ... ignored"): the job runs unrecorded
    fatal,    // the program cannot start with it (a library it needs is missing)
    static_program,  // no loader at all: only the dynamically linked programs it starts load it
  };
  Outcome outcome = Outcome::loads;
  std::string program;  // what the loader starts: the command's program or script interpreter
  std::string said;     // the loader's words
};
PreloadCheck check_preload(const std::string& library, const std::vector<std::string>& command);

// Runs `command` with LD_PRELOAD=library (prepended to any existing preload; nothing preloaded
// if `library` is empty) and the given COMMTAP_* variables, forwards SIGINT/SIGTERM/SIGHUP to
// it, and returns its exit status (128 + signal if it was killed). Returns 127 if it could not
// be started, and then sets *started (if given) to false.
int run_preloaded(const std::string& library, const std::map<std::string, std::string>& variables,
                  const std::vector<std::string>& command, bool* started = nullptr);

}  // namespace commtap::cli
