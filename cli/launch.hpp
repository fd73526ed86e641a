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

// Runs `command` with LD_PRELOAD=library (prepended to any existing preload; nothing preloaded
// if `library` is empty) and the given COMMTAP_* variables, forwards SIGINT/SIGTERM/SIGHUP to
// it, and returns its exit status (128 + signal if it was killed). Returns 127 if it could not
// be started, and then sets *started (if given) to false.
int run_preloaded(const std::string& library, const std::map<std::string, std::string>& variables,
                  const std::vector<std::string>& command, bool* started = nullptr);

}  // namespace commtap::cli
