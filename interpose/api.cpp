// The public C API (include/commtap.h): the few symbols libcommtap.so exports besides the MPI
// and NCCL entry points it interposes.
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "commtap.h"
#include "datatypes/fake_device.hpp"
#include "interpose/export.hpp"
#include "interpose/runtime.hpp"
#include "settings/settings.hpp"

extern "C" {

COMMTAP_EXPORT const char* commtap_version(void) {
  return commtap::monitor::kCommtapVersion;
}

COMMTAP_EXPORT const char* commtap_settings_json(void) {
  static const auto* json = new std::string(commtap::settings_json());  // never freed
  return json->c_str();
}

COMMTAP_EXPORT int commtap_active(void) {
  return commtap::interpose::runtime().active.load(std::memory_order_relaxed) ? 1 : 0;
}

COMMTAP_EXPORT int commtap_datatype_plan(const void* datatype, char* description, int length) {
  auto& runtime = commtap::interpose::runtime();
  std::shared_ptr<const commtap::datatypes::PackPlan> plan;
  if (runtime.active.load(std::memory_order_relaxed) && runtime.settings.datatypes)
    plan = runtime.plans.find(*static_cast<const MPI_Datatype*>(datatype));
  if (description != nullptr && length > 0) {
    const std::string text = plan ? commtap::datatypes::describe(plan->element()) : "";
    const std::size_t n = std::min(text.size(), static_cast<std::size_t>(length - 1));
    std::memcpy(description, text.data(), n);
    description[n] = '\0';
  }
  if (!plan) return 0;
  return plan->strided() ? 1 : 2;
}

COMMTAP_EXPORT int commtap_allreduce_algorithm(const char* name) {
  commtap::collectives::Algorithm algorithm{};
  if (name == nullptr || !commtap::collectives::parse_algorithm(name, algorithm)) return -1;
  commtap::interpose::runtime().collectives.allreduce = algorithm;
  return 0;
}

COMMTAP_EXPORT void commtap_test_device_memory(const void* pointer, unsigned long bytes,
                                               int device) {
  commtap::datatypes::fake_device().mark(pointer, bytes, device != 0);
}

COMMTAP_EXPORT void commtap_test_device_counts(unsigned long* copies, unsigned long* kernels) {
  *copies = commtap::datatypes::fake_device().copies();
  *kernels = commtap::datatypes::fake_device().kernels();
}

}  // extern "C"
