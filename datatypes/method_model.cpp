// The method model: how a device buffer's bytes reach packed host memory, chosen by size and
// block length, built in, parsed from COMMTAP_DEVICE_MODEL or measured (device.hpp).
#include "datatypes/device.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <sstream>

namespace commtap::datatypes {

const char* method_name(Method method) {
  switch (method) {
    case Method::device:
      return "device";
    case Method::host:
      return "host";
    case Method::blocks:
      return "blocks";
  }
  return "?";
}

double MethodModel::cost_us(Method method, const DeviceShape& shape,
                            std::int64_t span_bytes) const {
  const double bytes = static_cast<double>(shape.bytes);
  const double copy = copy_us + bytes / (copy_gbs * 1e3);
  switch (method) {
    case Method::device: {
      // Memory moves in 32-byte sectors: smaller blocks waste the rest of theirs.
      const double efficiency =
          std::min(1.0, static_cast<double>(std::max<std::int64_t>(shape.smallest_block, 1)) / 32);
      return launch_us + bytes / (pack_gbs * 1e3 * efficiency) + copy;
    }
    case Method::host:
      return copy_us + static_cast<double>(span_bytes) / (copy_gbs * 1e3) +
             bytes / (host_pack_gbs * 1e3);
    case Method::blocks:
      return copy +
             static_cast<double>(std::max<std::int64_t>(shape.block_count - 1, 0)) * block_us;
  }
  return 0;
}

Method MethodModel::choose(const DeviceShape& shape, std::int64_t span_bytes,
                           bool receiving) const {
  Method best = Method::device;
  for (Method m : {Method::blocks, Method::host}) {
    if (m == Method::host && receiving) continue;
    if (cost_us(m, shape, span_bytes) < cost_us(best, shape, span_bytes)) best = m;
  }
  return best;
}

namespace {
struct Parameter {
  const char* name;
  double MethodModel::*field;
};
constexpr Parameter kParameters[] = {
    {"launch_us", &MethodModel::launch_us},         {"copy_us", &MethodModel::copy_us},
    {"copy_gbs", &MethodModel::copy_gbs},           {"pack_gbs", &MethodModel::pack_gbs},
    {"host_pack_gbs", &MethodModel::host_pack_gbs}, {"block_us", &MethodModel::block_us},
};
}  // namespace

std::string MethodModel::describe() const {
  std::ostringstream out;
  for (const Parameter& p : kParameters)
    out << (&p == kParameters ? "" : ",") << p.name << "=" << this->*p.field;
  return out.str();
}

bool MethodModel::parse(const std::string& text, std::string& problem) {
  MethodModel parsed = *this;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const Parameter* found = nullptr;
    for (const Parameter& p : kParameters)
      if (key == p.name) found = &p;
    char* end = nullptr;
    const double value = eq == std::string::npos ? 0 : std::strtod(item.c_str() + eq + 1, &end);
    if (found == nullptr || eq == std::string::npos || end == item.c_str() + eq + 1 ||
        *end != '\0' || !(value > 0)) {
      problem = "'" + item +
                "' is not name=positive number (names: launch_us, copy_us, "
                "copy_gbs, pack_gbs, host_pack_gbs, block_us)";
      return false;
    }
    parsed.*(found->field) = value;
  }
  *this = parsed;
  return true;
}

MethodModel measure_model(DeviceMemory& device) {
  using clock = std::chrono::steady_clock;
  auto us_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(clock::now() - t0).count();
  };
  MethodModel model;
  constexpr std::size_t kBig = 32 << 20;
  char* dev = static_cast<char*>(device.alloc_device(2 * kBig));
  char* host = static_cast<char*>(device.alloc_host(2 * kBig));
  if (dev == nullptr || host == nullptr) {
    if (dev != nullptr) device.free_device(dev);
    if (host != nullptr) device.free_host(host);
    return model;
  }
  auto best_of = [](int n, auto&& once) {
    double best = 1e300;
    for (int i = 0; i < n; ++i) best = std::min(best, once());
    return best;
  };
  // One small copy: its fixed cost.
  model.copy_us = best_of(20, [&] {
    const auto t0 = clock::now();
    device.copy(host, dev, 8);
    device.synchronize();
    return us_since(t0);
  });
  const double big = best_of(5, [&] {
    const auto t0 = clock::now();
    device.copy(host, dev, kBig);
    device.synchronize();
    return us_since(t0);
  });
  model.copy_gbs = static_cast<double>(kBig) / std::max(big - model.copy_us, 1.0) / 1e3;
  // Queued copies of 64 bytes: the cost of each further block.
  const double queued = best_of(5, [&] {
    const auto t0 = clock::now();
    for (int i = 0; i < 64; ++i) device.copy(host + i * 128, dev + i * 128, 64);
    device.synchronize();
    return us_since(t0);
  });
  model.block_us = std::max(0.1, (queued - model.copy_us) / 63);
  // A kernel on 32-byte blocks 64 bytes apart: launch cost, then bandwidth over 16 MiB packed.
  PackPlan row(Layout::stream(1, 64, Layout::dense(32)), 64);
  const auto tiny = make_shape(row, 1);
  if (tiny) {
    model.launch_us = best_of(20, [&] {
      const auto t0 = clock::now();
      device.pack(*tiny, dev, dev + kBig);
      device.synchronize();
      return us_since(t0);
    });
    // Packing from device to device memory within the device's half.
    PackPlan half(Layout::stream(1, 64, Layout::dense(32)), 64);
    const auto inside = make_shape(half, static_cast<std::int64_t>(kBig / 64));
    const double pack = best_of(5, [&] {
      const auto t0 = clock::now();
      device.pack(*inside, dev, dev + kBig);
      device.synchronize();
      return us_since(t0);
    });
    model.pack_gbs =
        static_cast<double>(inside->bytes) / std::max(pack - model.launch_us, 1.0) / 1e3;
    std::vector<char> typed(kBig), packed(kBig / 2);
    const double host_pack = best_of(3, [&] {
      const auto t0 = clock::now();
      half.pack(typed.data(), static_cast<std::int64_t>(kBig / 64), packed.data());
      return us_since(t0);
    });
    model.host_pack_gbs = static_cast<double>(kBig / 2) / std::max(host_pack, 1.0) / 1e3;
  }
  device.free_device(dev);
  device.free_host(host);
  return model;
}

}  // namespace commtap::datatypes
