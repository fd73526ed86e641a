#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include "monitor/trace_schema.hpp"

namespace commtap::monitor {

const char* const kCommtapVersion = "0.1.0";

std::string choose_job_id(const std::string& explicit_id) {
  std::string id = explicit_id;
  for (const char* variable : {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID"}) {
    if (!id.empty()) break;
    if (const char* value = std::getenv(variable); value && *value) id = value;
  }
  if (id.empty()) {
    char stamp[32] = {};
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
    id = std::string(stamp) + "-" + std::to_string(::getpid());
  }
  for (char& c : id)
    if (c == '/' || c == ' ') c = '_';
  return id;
}

}  // namespace commtap::monitor
