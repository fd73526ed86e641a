// The settings parser: defaults, accepted spellings, rejected values, the values in force and
// the JSON declarations.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "settings/settings.hpp"

using commtap::parse_settings;
using commtap::ParsedSettings;

namespace {
ParsedSettings parse(const std::map<std::string, std::string>& environment) {
  return parse_settings([&](const char* name) -> const char* {
    auto it = environment.find(name);
    return it == environment.end() ? nullptr : it->second.c_str();
  });
}
}  // namespace

TEST(Settings, DefaultsWhenNothingIsSet) {
  const ParsedSettings parsed = parse({});
  EXPECT_TRUE(parsed.problems.empty());
  EXPECT_FALSE(parsed.settings.disable);
  EXPECT_EQ(parsed.settings.yield, commtap::FlagOrAuto::automatic);
  EXPECT_EQ(parsed.settings.verbose, 0);
  EXPECT_EQ(parsed.settings.interval, 1000);
  EXPECT_EQ(parsed.settings.sample, 16);
  EXPECT_EQ(parsed.settings.dir, "");
  EXPECT_EQ(parsed.settings.job_id, "");
}

TEST(Settings, AcceptsEverySpellingOfAFlag) {
  for (const char* yes : {"1", "true", "yes", "on", "TRUE", "On"})
    EXPECT_EQ(parse({{"COMMTAP_YIELD", yes}}).settings.yield, commtap::FlagOrAuto::on) << yes;
  for (const char* no : {"0", "false", "no", "off", "OFF"}) {
    EXPECT_FALSE(parse({{"COMMTAP_DISABLE", no}}).settings.disable) << no;
    EXPECT_EQ(parse({{"COMMTAP_YIELD", no}}).settings.yield, commtap::FlagOrAuto::off) << no;
  }
  // A flag that may be left to the library takes "auto" too; a plain flag does not.
  EXPECT_EQ(parse({{"COMMTAP_YIELD", "auto"}}).settings.yield, commtap::FlagOrAuto::automatic);
  EXPECT_EQ(parse({{"COMMTAP_DISABLE", "auto"}}).problems.size(), 1u);
}

TEST(Settings, ReadsIntegersAndTexts) {
  const ParsedSettings parsed =
      parse({{"COMMTAP_VERBOSE", "2"}, {"COMMTAP_DIR", "/tmp/x y"}, {"COMMTAP_JOB_ID", "j7"}});
  EXPECT_TRUE(parsed.problems.empty());
  EXPECT_EQ(parsed.settings.verbose, 2);
  EXPECT_EQ(parsed.settings.dir, "/tmp/x y");
  EXPECT_EQ(parsed.settings.job_id, "j7");
}

TEST(Settings, EmptyValueMeansDefaultWithoutComplaint) {
  const ParsedSettings parsed = parse({{"COMMTAP_VERBOSE", ""}, {"COMMTAP_YIELD", ""}});
  EXPECT_TRUE(parsed.problems.empty());
  EXPECT_EQ(parsed.settings.verbose, 0);
}

TEST(Settings, BadValuesFallBackToTheDefaultWithOneClearLineEach) {
  const ParsedSettings parsed =
      parse({{"COMMTAP_YIELD", "maybe"}, {"COMMTAP_VERBOSE", "9"}, {"COMMTAP_DISABLE", "1x"}});
  EXPECT_EQ(parsed.settings.yield, commtap::FlagOrAuto::automatic);
  EXPECT_EQ(parsed.settings.verbose, 0);
  EXPECT_FALSE(parsed.settings.disable);
  ASSERT_EQ(parsed.problems.size(), 3u);
  EXPECT_EQ(parsed.problems[0],
            "commtap: ignoring COMMTAP_DISABLE='1x': expected 0 or 1; using 0.");
  EXPECT_EQ(parsed.problems[1],
            "commtap: ignoring COMMTAP_YIELD='maybe': expected 0, 1 or auto; using auto.");
  EXPECT_EQ(parsed.problems[2],
            "commtap: ignoring COMMTAP_VERBOSE='9': expected an integer from 0 to 2; using 0.");
}

TEST(Settings, IntegersRejectTrailingGarbageAndOverflow) {
  EXPECT_EQ(parse({{"COMMTAP_VERBOSE", "1 "}}).problems.size(), 1u);
  EXPECT_EQ(parse({{"COMMTAP_VERBOSE", "-1"}}).problems.size(), 1u);
  EXPECT_EQ(parse({{"COMMTAP_VERBOSE", "99999999999999999999999"}}).problems.size(), 1u);
}

TEST(Settings, DescribeNamesEveryVariableWithTheValueInForce) {
  const auto parsed = parse({{"COMMTAP_YIELD", "on"}, {"COMMTAP_VERBOSE", "1"}});
  const auto described = commtap::describe(parsed.settings);
  ASSERT_EQ(described.size(), commtap::setting_specs().size());
  std::map<std::string, std::string> values(described.begin(), described.end());
  EXPECT_EQ(values.at("COMMTAP_YIELD"), "1");
  EXPECT_EQ(values.at("COMMTAP_VERBOSE"), "1");
  EXPECT_EQ(values.at("COMMTAP_DISABLE"), "0");
}

TEST(Settings, JsonListsEverySpecWithItsRange) {
  const auto json = nlohmann::json::parse(commtap::settings_json());
  ASSERT_EQ(json.size(), commtap::setting_specs().size());
  for (const auto& item : json) {
    const std::string variable = item.at("variable");
    EXPECT_EQ(variable.rfind("COMMTAP_", 0), 0u);
    EXPECT_FALSE(item.at("description").get<std::string>().empty());
    if (item.at("kind") == "integer") {
      EXPECT_LE(item.at("min").get<long>(), item.at("max").get<long>());
    }
  }
}
