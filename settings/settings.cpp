// The settings table made usable: the specs, the parser, the values in force, the JSON, and the
// two halves of agreeing on rank 0's values.
#include "settings/settings.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>

namespace commtap {

namespace {

constexpr const char* kind_name(SettingKind kind) {
  switch (kind) {
    case SettingKind::flag:
      return "flag";
    case SettingKind::flag_or_auto:
      return "flag_or_auto";
    case SettingKind::integer:
      return "integer";
    case SettingKind::text:
      return "text";
  }
  return "?";
}

// "COMMTAP_" + the field name in upper case, computed at compile time.
template <std::size_t N>
struct VariableName {
  char text[N + 8]{};
  constexpr explicit VariableName(const char (&field)[N]) {
    constexpr std::string_view prefix = "COMMTAP_";
    for (std::size_t i = 0; i < prefix.size(); ++i) text[i] = prefix[i];
    for (std::size_t i = 0; i + 1 < N; ++i)
      text[prefix.size() + i] = field[i] >= 'a' && field[i] <= 'z' ? field[i] - 32 : field[i];
  }
};

#define COMMTAP_SETTING(field, kind, default_text, min, max, scope, description) \
  constexpr VariableName variable_##field{#field};
#include "settings/all.def"
#undef COMMTAP_SETTING

// The `scope` column's two values.
enum class SettingScope { local, agreed };

constexpr SettingSpec kSpecs[] = {
#define COMMTAP_SETTING(field, kind, default_text, min, max, scope, description) \
  {variable_##field.text,                                                        \
   #field,                                                                       \
   SettingKind::kind,                                                            \
   default_text,                                                                 \
   min,                                                                          \
   max,                                                                          \
   SettingScope::scope == SettingScope::agreed,                                  \
   description},
#include "settings/all.def"
#undef COMMTAP_SETTING
};

bool parse_value(std::string_view text, const SettingSpec&, bool& out) {
  for (auto yes : {"1", "true", "yes", "on", "TRUE", "YES", "ON", "True", "Yes", "On"})
    if (text == yes) return out = true, true;
  for (auto no : {"0", "false", "no", "off", "FALSE", "NO", "OFF", "False", "No", "Off"})
    if (text == no) return out = false, true;
  return false;
}

bool parse_value(std::string_view text, const SettingSpec& spec, FlagOrAuto& out) {
  if (text == "auto" || text == "AUTO" || text == "Auto") return out = FlagOrAuto::automatic, true;
  bool flag = false;
  if (!parse_value(text, spec, flag)) return false;
  out = flag ? FlagOrAuto::on : FlagOrAuto::off;
  return true;
}

bool parse_value(std::string_view text, const SettingSpec& spec, long& out) {
  const std::string copy(text);
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(copy.c_str(), &end, 10);
  if (errno != 0 || end == copy.c_str() || *end != '\0') return false;
  if (value < spec.min || value > spec.max) return false;
  out = value;
  return true;
}

bool parse_value(std::string_view text, const SettingSpec&, std::string& out) {
  out = std::string(text);
  return true;
}

std::string accepted(const SettingSpec& spec) {
  switch (spec.kind) {
    case SettingKind::flag:
      return "0 or 1";
    case SettingKind::flag_or_auto:
      return "0, 1 or auto";
    case SettingKind::integer:
      return "an integer from " + std::to_string(spec.min) + " to " + std::to_string(spec.max);
    case SettingKind::text:
      return "any text";
  }
  return "";
}

std::string as_text(bool value) {
  return value ? "1" : "0";
}
std::string as_text(FlagOrAuto value) {
  return value == FlagOrAuto::automatic ? "auto" : value == FlagOrAuto::on ? "1" : "0";
}
std::string as_text(long value) {
  return std::to_string(value);
}
std::string as_text(const std::string& value) {
  return value;
}

template <typename Value>
void parse_one(const SettingSpec& spec, Value& field,
               const std::function<const char*(const char*)>& lookup,
               std::vector<std::string>& problems) {
  parse_value(spec.default_text, spec, field);
  const char* value = lookup(spec.variable);
  if (value == nullptr || *value == '\0' || parse_value(value, spec, field)) return;
  parse_value(spec.default_text, spec, field);
  problems.push_back(std::string("commtap: ignoring ") + spec.variable + "='" + shown_value(value) +
                     "': expected " + accepted(spec) + "; using " +
                     (*spec.default_text ? spec.default_text : "the default") + ".");
}

// Rank 0's values travel as their texts, each ended by a NUL (which no environment variable can
// hold).
template <typename Value>
void append_agreed(const SettingSpec& spec, const Value& field, std::string& out) {
  if (!spec.agreed) return;
  out += as_text(field);
  out += '\0';
}

template <typename Value>
void adopt_one(const SettingSpec& spec, Value& field, std::string_view rank_0,
               std::size_t& position, std::vector<std::string>& differences) {
  if (!spec.agreed) return;
  const std::size_t end = rank_0.find('\0', position);
  if (end == std::string_view::npos) return;  // not rank 0's encoding: keep this rank's value
  const std::string_view text = rank_0.substr(position, end - position);
  position = end + 1;
  const std::string mine = as_text(field);
  Value theirs{};
  if (text == mine || !parse_value(text, spec, theirs)) return;
  differences.push_back(std::string(spec.variable) + "=" + shown_value(mine) +
                        " (rank 0: " + shown_value(text) + ")");
  field = std::move(theirs);
}

}  // namespace

std::string shown_value(std::string_view value) {
  constexpr std::size_t kShown = 80;
  std::string out(value.substr(0, kShown));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  if (value.size() > kShown) out += "...(" + std::to_string(value.size()) + " bytes)";
  return out;
}

std::span<const SettingSpec> setting_specs() {
  return kSpecs;
}

ParsedSettings parse_settings(const std::function<const char*(const char*)>& lookup) {
  ParsedSettings parsed;
  std::size_t index = 0;
// The spec's default is re-parsed from kSpecs (not the macro argument) so that one text is used.
#define COMMTAP_SETTING(field, kind_, default_, min_, max_, scope_, description_) \
  parse_one(kSpecs[index++], parsed.settings.field, lookup, parsed.problems);
#include "settings/all.def"
#undef COMMTAP_SETTING
  return parsed;
}

std::vector<std::pair<std::string, std::string>> describe(const Settings& settings) {
  std::vector<std::pair<std::string, std::string>> out;
#define COMMTAP_SETTING(field, kind, default_text, min, max, scope, description) \
  out.emplace_back(variable_##field.text, as_text(settings.field));
#include "settings/all.def"
#undef COMMTAP_SETTING
  return out;
}

std::string settings_json() {
  nlohmann::json list = nlohmann::json::array();
  for (const SettingSpec& spec : kSpecs) {
    nlohmann::json item = {{"variable", spec.variable},
                           {"field", spec.field},
                           {"kind", kind_name(spec.kind)},
                           {"default", spec.default_text},
                           {"description", spec.description}};
    if (spec.kind == SettingKind::integer) {
      item["min"] = spec.min;
      item["max"] = spec.max;
    }
    list.push_back(std::move(item));
  }
  return list.dump();
}

std::string agreed_values(const Settings& settings) {
  std::string out;
  std::size_t index = 0;
#define COMMTAP_SETTING(field, kind_, default_, min_, max_, scope_, description_) \
  append_agreed(kSpecs[index++], settings.field, out);
#include "settings/all.def"
#undef COMMTAP_SETTING
  return out;
}

std::vector<std::string> adopt_agreed_values(Settings& settings, std::string_view rank_0) {
  std::vector<std::string> differences;
  std::size_t index = 0, position = 0;
#define COMMTAP_SETTING(field, kind_, default_, min_, max_, scope_, description_) \
  adopt_one(kSpecs[index++], settings.field, rank_0, position, differences);
#include "settings/all.def"
#undef COMMTAP_SETTING
  return differences;
}

}  // namespace commtap
