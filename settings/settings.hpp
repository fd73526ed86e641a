// settings: the COMMTAP_* settings. Each module declares its own (<module>/settings.def),
// settings/all.def gathers them; parsed once at MPI_Init by the library, read as they are by the
// `commtap` command (which needs neither MPI nor the library for it). A leaf: no MPI.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace commtap {

enum class SettingKind { flag, integer, text };

struct SettingSpec {
  const char* variable;  // e.g. "COMMTAP_YIELD"
  const char* field;     // e.g. "yield"
  SettingKind kind;
  const char* default_text;
  long min;
  long max;
  const char* description;
};

namespace setting_type {
using flag = bool;
using integer = long;
using text = std::string;
}  // namespace setting_type

struct Settings {
#define COMMTAP_SETTING(field, kind, default_text, min, max, description) \
  setting_type::kind field{};
#include "settings/all.def"
#undef COMMTAP_SETTING
};

struct ParsedSettings {
  Settings settings;
  // One line per rejected value, naming the variable, the value and what is accepted.
  std::vector<std::string> problems;
};

std::span<const SettingSpec> setting_specs();

// Reads every setting through `lookup` (getenv in production, a map in tests). Unset or empty
// variables take the default; invalid ones take the default and add a problem line.
ParsedSettings parse_settings(const std::function<const char*(const char*)>& lookup);

// The values in force, as (variable, text) pairs, for the trace database.
std::vector<std::pair<std::string, std::string>> describe(const Settings& settings);

// The declarations as a JSON array (for `commtap run` and `commtap settings`).
std::string settings_json();

}  // namespace commtap
