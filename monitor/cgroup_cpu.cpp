#include "monitor/cgroup_cpu.hpp"

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

namespace commtap::monitor {
namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool has_token(const std::string& list, const std::string& token) {
  std::istringstream items(list);
  std::string item;
  while (std::getline(items, item, ','))
    if (item == token) return true;
  return false;
}

// Where this process's group may be counted: per hierarchy line of /proc/self/cgroup
// ("id:controllers:path"), the mount folders to look under and the group's path. v1's cpu
// hierarchy first: where it exists, v2's cpu.stat (hybrid layout) has no throttling counts.
std::vector<std::pair<std::string, std::string>> candidates(const std::string& sys_root,
                                                            const std::string& groups) {
  std::vector<std::pair<std::string, std::string>> v1, v2;
  std::istringstream lines(groups);
  std::string line;
  while (std::getline(lines, line)) {
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (path.empty() || path[0] != '/') continue;
    if (controllers.empty() && line.compare(0, first, "0") == 0) {
      v2.emplace_back(sys_root, path);
      v2.emplace_back(sys_root + "/unified", path);
    } else if (has_token(controllers, "cpu")) {
      v1.emplace_back(sys_root + "/" + controllers, path);
      v1.emplace_back(sys_root + "/cpu", path);
      v1.emplace_back(sys_root + "/cpu,cpuacct", path);
    }
  }
  v1.insert(v1.end(), v2.begin(), v2.end());
  return v1;
}

}  // namespace

std::optional<std::uint64_t> parse_throttled_ns(const std::string& cpu_stat) {
  std::istringstream lines(cpu_stat);
  std::string key;
  std::uint64_t value = 0;
  while (lines >> key >> value) {
    if (key == "throttled_usec") return value * 1000;
    if (key == "throttled_time") return value;
  }
  return std::nullopt;
}

CgroupCpuLimit::CgroupCpuLimit(std::string sys_root, std::string proc_cgroup)
    : sys_root_(std::move(sys_root)), proc_cgroup_(std::move(proc_cgroup)) {}

void CgroupCpuLimit::find_stat() {
  stat_path_.clear();
  last_.reset();
  for (const auto& [mount, group] : candidates(sys_root_, groups_)) {
    // The group's folder, then each ancestor up to the mount's root: a group without the CPU
    // controller enabled has no throttling counts of its own, and is held by its parent's limit.
    // A group path from outside this process's cgroup namespace does not exist under the mount:
    // the walk ends at the mount's root, which is then the process's own group.
    std::string path = group;
    for (;;) {
      const std::string stat = mount + (path == "/" ? "" : path) + "/cpu.stat";
      if (const auto text = read_text(stat); text && parse_throttled_ns(*text)) {
        stat_path_ = stat;
        return;
      }
      if (path == "/") break;
      const auto slash = path.rfind('/');
      path = slash == 0 ? "/" : path.substr(0, slash);
    }
  }
}

std::optional<std::uint64_t> CgroupCpuLimit::throttled_ns() {
  if (std::string groups = read_text(proc_cgroup_).value_or(""); groups != groups_) {
    groups_ = std::move(groups);
    find_stat();
  }
  const auto text = stat_path_.empty() ? std::nullopt : read_text(stat_path_);
  const auto now = text ? parse_throttled_ns(*text) : std::nullopt;
  if (now) {
    if (last_ && *now >= *last_) total_ += *now - *last_;
    last_ = now;
    counted_ = true;
  }
  return counted_ ? std::optional<std::uint64_t>(total_) : std::nullopt;
}

}  // namespace commtap::monitor
