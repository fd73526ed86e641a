// What the analyzer's tests share: the options they analyze with, analyzing a job a fixture
// writes (anything with `std::string write(const std::filesystem::path&) const`), and checks on
// the findings that print them all when they fail.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "analyzer/health.hpp"
#include "tests/unit/temp_dir.hpp"

namespace commtap::testing {

// Short windows, so that jobs of a few seconds span several.
inline analyzer::HealthOptions test_options() {
  analyzer::HealthOptions options;
  options.window_s = 5;
  options.degradation_windows = 2;
  return options;
}

template <typename JobFixture>
analyzer::JobHealth analyze(const JobFixture& job,
                            analyzer::HealthOptions options = test_options()) {
  TempDir dir;
  EXPECT_EQ(job.write(dir.path()), "");
  analyzer::JobHealth health;
  std::string error;
  EXPECT_TRUE(analyzer::analyze_job(dir.path().string(), options, health, error)) << error;
  return health;
}

inline std::string describe(const analyzer::JobHealth& health) {
  std::string out;
  for (const analyzer::Finding& f : health.findings)
    out += "\n  " + f.kind + " | " + f.subject + " | " + f.summary;
  return out.empty() ? " none" : out;
}

// The findings, as (kind, subject) in order, are exactly `expected`.
inline void expect_exactly(const analyzer::JobHealth& health,
                           const std::vector<std::pair<std::string, std::string>>& expected) {
  std::vector<std::pair<std::string, std::string>> got;
  for (const analyzer::Finding& f : health.findings) got.emplace_back(f.kind, f.subject);
  EXPECT_EQ(got, expected) << "findings:" << describe(health);
}

}  // namespace commtap::testing
