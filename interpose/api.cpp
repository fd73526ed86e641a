#include <string>

#include "commtap.h"
#include "interpose/export.hpp"
#include "interpose/runtime.hpp"
#include "interpose/settings.hpp"

extern "C" {

COMMTAP_EXPORT const char* commtap_version(void) {
  return commtap::monitor::kCommtapVersion;
}

COMMTAP_EXPORT const char* commtap_settings_json(void) {
  static const std::string json = commtap::interpose::settings_json();
  return json.c_str();
}

COMMTAP_EXPORT int commtap_active(void) {
  return commtap::interpose::g_runtime.active.load(std::memory_order_relaxed) ? 1 : 0;
}

}  // extern "C"
