// Hooks of point-to-point calls on CUDA device buffers over an MPI library that is not
// CUDA-aware (datatypes::Stager, COMMTAP_DEVICE_STAGING): before the library's call a device
// buffer is swapped for pinned host staging (packed on the way out), after it the staging is
// unpacked into the device buffer and freed. A nonblocking call hands the application the
// library's own request; the completion call that completes it (any Wait or Test form) finishes
// the transfer before it returns. Without a stager (no GPU, or staging off) every hook is one
// load and one branch (intercept.hpp calls staged_call, out of line, only when there is a stager).
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "datatypes/device.hpp"
#include "interpose/hooks_recording.hpp"
#include "interpose/hooks_requests.hpp"

namespace commtap::interpose {

enum class DeviceRole : std::uint8_t {
  none,
  send,        // (buf, count, type, dest, ...)
  receive,     // (buf, count, type, source, ...)
  mreceive,    // (buf, count, type, message, ...)
  sendrecv,    // (sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
               //  source, ...)
  replace,     // (buf, count, type, dest, sendtag, source, ...)
  completion,  // the Wait and Test families
  free,        // MPI_Request_free
};

template <Fn id>
constexpr DeviceRole device_role() {
  constexpr Family family = family_of(id);
  if constexpr (family == Family::send || is_send_start<id>()) return DeviceRole::send;
  if constexpr (id == Fn::Recv || id == Fn::Recv_c || is_recv_start<id>())
    return DeviceRole::receive;
  if constexpr (id == Fn::Mrecv || id == Fn::Mrecv_c || id == Fn::Imrecv || id == Fn::Imrecv_c)
    return DeviceRole::mreceive;
  if constexpr (id == Fn::Sendrecv || id == Fn::Sendrecv_c || id == Fn::Isendrecv ||
                id == Fn::Isendrecv_c)
    return DeviceRole::sendrecv;
  if constexpr (id == Fn::Sendrecv_replace || id == Fn::Sendrecv_replace_c ||
                id == Fn::Isendrecv_replace || id == Fn::Isendrecv_replace_c)
    return DeviceRole::replace;
  if constexpr (family == Family::completion) return DeviceRole::completion;
  if constexpr (id == Fn::Request_free) return DeviceRole::free;
  return DeviceRole::none;
}

template <Fn id>
struct DeviceHooks {
  static constexpr DeviceRole kRole = device_role<id>();
  static constexpr bool kTransfer = kRole == DeviceRole::send || kRole == DeviceRole::receive ||
                                    kRole == DeviceRole::mreceive ||
                                    kRole == DeviceRole::sendrecv || kRole == DeviceRole::replace;
  static constexpr bool kNonblocking = family_of(id) == Family::p2p_start;
  struct Nothing {};
  struct Completion {
    std::uint64_t epoch = 0;
    int count = 0;
    std::array<MPI_Request, 16> inline_handles;
    std::vector<MPI_Request> heap_handles;
    std::vector<MPI_Status> own_statuses;
    MPI_Request before(int i) const {
      return count > static_cast<int>(inline_handles.size()) ? heap_handles[i] : inline_handles[i];
    }
  };

  datatypes::Stager* stager = nullptr;  // set when this call has something staged
  // Made by stage() and snapshot(): a staged call that moves nothing (host buffers) stays cheap.
  [[no_unique_address]] std::conditional_t<kTransfer, std::optional<datatypes::Stager::Operation>,
                                           Nothing>
      operation;
  [[no_unique_address]] std::conditional_t<kTransfer, MPI_Status, Nothing> own_status;
  [[no_unique_address]] std::conditional_t<kRole == DeviceRole::completion,
                                           std::optional<Completion>, Nothing>
      completion;
  // A call that does not reach the library: staging failed, or a staged request was freed.
  std::optional<int> result;

  template <typename... A>
  void before(datatypes::Stager& s, A&... a) {
    if constexpr (kTransfer)
      stage(s, a...);
    else if constexpr (kRole == DeviceRole::completion)
      snapshot(s, a...);
    else if constexpr (kRole == DeviceRole::free)
      free_request(s, a...);
  }

  // Right after the library's call (inside the call's time: the application sees the data).
  template <typename... A>
  void after_library(int rc, A&... a) {
    if constexpr (kRole != DeviceRole::none && kRole != DeviceRole::free) {
      if (stager == nullptr) return;
      if constexpr (kTransfer)
        finish_transfer(rc, a...);
      else
        finish_completions(rc, a...);
    }
  }

 private:
  template <typename... A>
  void stage(datatypes::Stager& s, A&... a) {
    constexpr bool sends =
        kRole == DeviceRole::send || kRole == DeviceRole::sendrecv || kRole == DeviceRole::replace;
    constexpr bool receives = kRole != DeviceRole::send;
    s.progress();
    operation.emplace();
    int rc = MPI_SUCCESS;
    if constexpr (sends) {
      auto& buffer = std::get<0>(std::tie(a...));
      // The replace forms are always staged: yield mode packs the buffer even for
      // MPI_PROC_NULL (interpose/yield.cpp), and a real source still writes to it.
      const bool proc_null =
          kRole != DeviceRole::replace && std::get<3>(std::tie(a...)) == MPI_PROC_NULL;
      if (!proc_null && s.is_device(buffer)) {
        const auto count = std::get<1>(std::tie(a...));
        auto& datatype = std::get<2>(std::tie(a...));
        datatypes::Staged& staged =
            kRole == DeviceRole::replace ? operation->receive : operation->send;
        rc = kRole == DeviceRole::replace
                 ? s.stage_replace(const_cast<void*>(static_cast<const void*>(buffer)), count,
                                   datatype, staged, kNonblocking)
                 : s.stage_send(buffer, count, datatype, staged);
        if (rc == MPI_SUCCESS && staged.wire_buffer != nullptr) {
          buffer = static_cast<std::remove_reference_t<decltype(buffer)>>(staged.wire_buffer);
          rewrite(s, staged, std::get<1>(std::tie(a...)), datatype);
          stager = &s;
        }
      }
    }
    if constexpr (receives && kRole != DeviceRole::replace) {
      constexpr std::size_t base = kRole == DeviceRole::sendrecv ? 5 : 0;
      auto& buffer = std::get<base>(std::tie(a...));
      bool proc_null = false;
      if constexpr (kRole != DeviceRole::mreceive)
        proc_null = std::get<base + 3>(std::tie(a...)) == MPI_PROC_NULL;
      if (rc == MPI_SUCCESS && !proc_null && s.is_device(buffer)) {
        const auto count = std::get<base + 1>(std::tie(a...));
        auto& datatype = std::get<base + 2>(std::tie(a...));
        rc = s.stage_receive(buffer, count, datatype, operation->receive,
                             kRole == DeviceRole::sendrecv && kNonblocking);
        if (rc == MPI_SUCCESS && operation->receive.wire_buffer != nullptr) {
          buffer = operation->receive.wire_buffer;
          rewrite(s, operation->receive, std::get<base + 1>(std::tie(a...)), datatype);
          stager = &s;
        }
      }
    }
    if constexpr (!kNonblocking && receives) {
      // The receive's status says how much arrived, also where the application ignores it.
      MPI_Status*& status = std::get<sizeof...(A) - 1>(std::tie(a...));
      if (stager != nullptr && status == MPI_STATUS_IGNORE) status = &own_status;
    }
    if (rc != MPI_SUCCESS) {
      s.release(operation->send);
      s.release(operation->receive);
      stager = nullptr;
      result = rc;
    }
  }

  // The count and type the library gets for `staged` (see Staged::wire_count).
  template <typename Count>
  static void rewrite(datatypes::Stager& s, const datatypes::Staged& staged, Count& count,
                      MPI_Datatype& datatype) {
    if (staged.wire_count < 0) {
      datatype = staged.wire_type;
    } else if (staged.wire_count <= static_cast<MPI_Count>(std::numeric_limits<Count>::max())) {
      count = static_cast<Count>(staged.wire_count);
      datatype = staged.wire_type;
    } else {
      datatype = s.element_type(staged);
    }
  }

  template <typename... A>
  void finish_transfer(int rc, A&... a) {
    if constexpr (kNonblocking) {
      MPI_Request* request = std::get<sizeof...(A) - 1>(std::tie(a...));
      if (rc == MPI_SUCCESS && *request != MPI_REQUEST_NULL) {
        stager->track(*request, std::move(*operation));
        return;
      }
      stager->release(operation->send);
      stager->release(operation->receive);
    } else {
      stager->release(operation->send);
      if constexpr (kRole != DeviceRole::send) {
        MPI_Status* status = std::get<sizeof...(A) - 1>(std::tie(a...));
        if (status != MPI_STATUS_IGNORE)
          stager->finish_receive(operation->receive, *status, rc);
        else
          stager->release(operation->receive);
      }
    }
  }

  template <typename... A>
  void snapshot(datatypes::Stager& s, A&... a) {
    if (!s.tracking()) return;
    s.progress();
    if (!s.tracking()) return;
    stager = &s;
    Completion& taken = completion.emplace();
    taken.epoch = s.epoch();
    const MPI_Request* requests;
    if constexpr (id == Fn::Wait || id == Fn::Test) {
      requests = std::get<0>(std::tie(a...));
      taken.count = 1;
    } else {
      taken.count = std::max(std::get<0>(std::tie(a...)), 0);
      requests = std::get<1>(std::tie(a...));
    }
    const int n = taken.count;
    if (n > static_cast<int>(taken.inline_handles.size()))
      taken.heap_handles.assign(requests, requests + n);
    else
      std::copy(requests, requests + n, taken.inline_handles.begin());
    MPI_Status*& statuses = std::get<status_argument<id>()>(std::tie(a...));
    if (statuses == MPI_STATUS_IGNORE || statuses == MPI_STATUSES_IGNORE) {
      constexpr bool single =
          id == Fn::Wait || id == Fn::Test || id == Fn::Waitany || id == Fn::Testany;
      taken.own_statuses.resize(single ? 1 : static_cast<std::size_t>(std::max(n, 1)));
      statuses = taken.own_statuses.data();
    }
  }

  template <typename... A>
  void finish_completions(int rc, A&... a) {
    MPI_Request* requests;
    if constexpr (id == Fn::Wait || id == Fn::Test)
      requests = std::get<0>(std::tie(a...));
    else
      requests = std::get<1>(std::tie(a...));
    MPI_Status* statuses = std::get<status_argument<id>()>(std::tie(a...));
    const Completion& taken = *completion;
    for (int i = 0; i < taken.count; ++i) {
      const MPI_Request handle = taken.before(i);
      // A completed nonpersistent request is set to MPI_REQUEST_NULL by the library.
      if (handle == MPI_REQUEST_NULL || requests[i] != MPI_REQUEST_NULL) continue;
      auto completed = stager->take(handle, taken.epoch);
      if (!completed) continue;
      const MPI_Status* status = &statuses[0];
      if constexpr (id == Fn::Waitall || id == Fn::Testall) {
        status = &statuses[i];
      } else if constexpr (id == Fn::Waitsome || id == Fn::Testsome) {
        const int done = *std::get<2>(std::tie(a...));
        const int* indices = std::get<3>(std::tie(a...));
        for (int k = 0; k < done; ++k)
          if (indices[k] == i) status = &statuses[k];
      }
      stager->finish(*completed, *status, rc);
    }
  }

  template <typename... A>
  void free_request(datatypes::Stager& s, A&... a) {
    MPI_Request* request = std::get<0>(std::tie(a...));
    if (request == nullptr || *request == MPI_REQUEST_NULL || !s.tracks(*request)) return;
    // The library must keep the request until the transfer is over (staging lives as long);
    // the application's handle is freed as MPI_Request_free would.
    s.orphan(*request);
    *request = MPI_REQUEST_NULL;
    result = MPI_SUCCESS;
  }
};

// The stager if this call may stage (a point-to-point, completion or Request_free call) and
// device staging is on; a constant nullptr for every other call.
template <Fn id>
[[gnu::always_inline]] inline datatypes::Stager* device_stager() {
  if constexpr (device_role<id>() == DeviceRole::none)
    return nullptr;
  else
    return runtime().stager;
}

}  // namespace commtap::interpose
