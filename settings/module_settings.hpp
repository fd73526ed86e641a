// Each module's COMMTAP_* settings as a struct of its own, generated from its settings.def, so
// that a module is given only what it declared. settings/settings.hpp composes them into the one
// Settings the parser fills. Plain data: no parsing, no MPI.
#pragma once

#include <string>

// collectives/settings.def builds a description from the algorithm list: included here, outside
// any struct, so that its inclusion inside CollectivesSettings below adds nothing.
#include "collectives/algorithm_list.hpp"

namespace commtap {

// A flag the library may also decide itself where it can measure what the choice depends on
// ("auto": COMMTAP_YIELD, from how many ranks share a machine's CPUs).
enum class FlagOrAuto { off, on, automatic };

// The C++ type of each kind of setting (the `kind` column).
namespace setting_type {
using flag = bool;
using flag_or_auto = FlagOrAuto;
using integer = long;
using text = std::string;
}  // namespace setting_type

#define COMMTAP_SETTING(field, kind, default_text, min, max, scope, description) \
  setting_type::kind field{};

struct InterposeSettings {
#include "interpose/settings.def"
};

struct MonitorSettings {
#include "monitor/settings.def"
};

struct DatatypeSettings {
#include "datatypes/settings.def"
};

struct CollectivesSettings {
#include "collectives/settings.def"
};

struct ProbeSettings {
#include "probes/settings.def"
};

#undef COMMTAP_SETTING

}  // namespace commtap
