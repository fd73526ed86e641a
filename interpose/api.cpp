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
  static const auto* json = new std::string(commtap::interpose::settings_json());  // never freed
  return json->c_str();
}

COMMTAP_EXPORT int commtap_active(void) {
  return commtap::interpose::runtime().active.load(std::memory_order_relaxed) ? 1 : 0;
}

}  // extern "C"
