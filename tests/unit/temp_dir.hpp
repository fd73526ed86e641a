// A directory of the unit tests' own, removed with everything in it when the test is done.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace commtap::testing {

class TempDir {
 public:
  // Unique per process and per directory made: tests of one binary may run in parallel
  // processes (ctest runs each discovered test on its own).
  explicit TempDir(const std::string& prefix = "commtap-test") {
    path_ = std::filesystem::temp_directory_path() /
            (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

}  // namespace commtap::testing
