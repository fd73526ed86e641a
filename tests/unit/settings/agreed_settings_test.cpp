// The agreed settings (scope `agreed` in the tables): rank 0's values, encoded on rank 0 and
// adopted on every rank, replace exactly those settings and name each one that differed.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "settings/settings.hpp"

namespace {

commtap::Settings parse(const std::map<std::string, std::string>& environment) {
  return commtap::parse_settings([&](const char* name) -> const char* {
           auto it = environment.find(name);
           return it == environment.end() ? nullptr : it->second.c_str();
         })
      .settings;
}

std::map<std::string, std::string> described(const commtap::Settings& settings) {
  const auto pairs = commtap::describe(settings);
  return {pairs.begin(), pairs.end()};
}

}  // namespace

TEST(AgreedSettings, AreTheOnesThatRanksMustShare) {
  std::set<std::string> agreed;
  for (const commtap::SettingSpec& spec : commtap::setting_specs())
    if (spec.agreed) agreed.insert(spec.variable);
  const std::set<std::string> expected = {
      "COMMTAP_JOB_ID",         "COMMTAP_SAMPLE",        "COMMTAP_CLOCK_SYNC",
      "COMMTAP_ALLREDUCE",      "COMMTAP_MODEL",         "COMMTAP_CALIBRATE",
      "COMMTAP_AVOID_HOSTS",    "COMMTAP_KNOMIAL_RADIX", "COMMTAP_TEST_NODES",
      "COMMTAP_PROBE_INTERVAL", "COMMTAP_PROBE_BYTES",   "COMMTAP_ALLREDUCE_TRIALS",
      "COMMTAP_YIELD"};
  EXPECT_EQ(agreed, expected);
}

TEST(AgreedSettings, SameValuesChangeNothing) {
  commtap::Settings mine = parse({{"COMMTAP_SAMPLE", "4"}, {"COMMTAP_ALLREDUCE", "ring"}});
  const commtap::Settings before = mine;
  EXPECT_TRUE(commtap::adopt_agreed_values(mine, commtap::agreed_values(mine)).empty());
  EXPECT_EQ(described(mine), described(before));
}

TEST(AgreedSettings, RankZerosValuesReplaceOnlyTheAgreedOnes) {
  const commtap::Settings rank_0 = parse({{"COMMTAP_CLOCK_SYNC", "10"},
                                          {"COMMTAP_CALIBRATE", "0"},
                                          {"COMMTAP_ALLREDUCE", "knomial"},
                                          {"COMMTAP_AVOID_HOSTS", "a->b,c"},
                                          {"COMMTAP_VERBOSE", "2"}});
  commtap::Settings mine = parse({{"COMMTAP_PROBE_INTERVAL", "0"}, {"COMMTAP_YIELD", "1"}});
  const std::vector<std::string> differences =
      commtap::adopt_agreed_values(mine, commtap::agreed_values(rank_0));
  const std::vector<std::string> expected = {
      "COMMTAP_YIELD=1 (rank 0: auto)",           "COMMTAP_CLOCK_SYNC=10000 (rank 0: 10)",
      "COMMTAP_ALLREDUCE=auto (rank 0: knomial)", "COMMTAP_CALIBRATE=1 (rank 0: 0)",
      "COMMTAP_AVOID_HOSTS= (rank 0: a->b,c)",    "COMMTAP_PROBE_INTERVAL=0 (rank 0: 5)"};
  EXPECT_EQ(differences, expected);
  EXPECT_EQ(mine.clock_sync, 10);
  EXPECT_FALSE(mine.calibrate);
  EXPECT_EQ(mine.allreduce, "knomial");
  EXPECT_EQ(mine.avoid_hosts, "a->b,c");
  EXPECT_EQ(mine.probe_interval, 5);
  // A blocking collective on one rank never matches its nonblocking form on another (MPICH
  // hangs), and yield mode turns one into the other: rank 0's choice holds.
  EXPECT_EQ(mine.yield, commtap::FlagOrAuto::automatic);
  // This rank's own settings stay its own.
  EXPECT_EQ(mine.verbose, 0);
}

TEST(AgreedSettings, ATextThatIsNotRankZerosEncodingKeepsThisRanksValues) {
  commtap::Settings mine = parse({{"COMMTAP_SAMPLE", "3"}});
  EXPECT_TRUE(commtap::adopt_agreed_values(mine, "").empty());
  EXPECT_EQ(mine.sample, 3);
}

TEST(ModuleSettings, EachModuleIsGivenItsOwnPart) {
  const commtap::Settings settings = parse({{"COMMTAP_PROBE_BYTES", "4096"},
                                            {"COMMTAP_INTERVAL", "250"},
                                            {"COMMTAP_DEVICE_METHOD", "host"},
                                            {"COMMTAP_KNOMIAL_RADIX", "4"},
                                            {"COMMTAP_VERBOSE", "1"}});
  const commtap::ProbeSettings& probes = settings;
  const commtap::MonitorSettings& monitor = settings;
  const commtap::DatatypeSettings& datatypes = settings;
  const commtap::CollectivesSettings& collectives = settings;
  const commtap::InterposeSettings& interpose = settings;
  EXPECT_EQ(probes.probe_bytes, 4096);
  EXPECT_EQ(monitor.interval, 250);
  EXPECT_EQ(datatypes.device_method, "host");
  EXPECT_EQ(collectives.knomial_radix, 4);
  EXPECT_EQ(interpose.verbose, 1);
}
