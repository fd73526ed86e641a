// What the stream workers run: NCCL's algorithms on host memory. Collectives that NCCL runs
// on its ring do so here too (reduce-scatter and all-gather rings, broadcast and reduce
// chains), so that each byte crosses the same links it crosses in NCCL and a slow link slows
// the same operations; sends and receives (and so gather, scatter and all-to-all, which are
// made of them) go directly to the peer.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "fake_nccl.hpp"
#include "nccl/datatypes.hpp"
#include "profiler_hooks.hpp"

namespace fake_nccl {
namespace {

// ---- Reductions ---------------------------------------------------------------------------
float half_to_float(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1f;
  const std::uint32_t mantissa = half & 0x3ff;
  std::uint32_t bits;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in a float
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000 | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Rounds to nearest even, as the GPU's conversion does.
std::uint16_t float_to_half(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000);
  const std::uint32_t exponent = (bits >> 23) & 0xff;
  std::uint32_t mantissa = bits & 0x7fffff;
  if (exponent == 0xff) return sign | 0x7c00 | (mantissa ? 0x200 : 0);
  const int biased = static_cast<int>(exponent) - 127 + 15;
  if (biased >= 0x1f) return sign | 0x7c00;
  if (biased <= 0) {  // subnormal half (or zero)
    if (biased < -10) return sign;
    mantissa |= 0x800000;
    const int shift = 14 - biased;
    std::uint32_t result = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (result & 1))) ++result;
    return static_cast<std::uint16_t>(sign | result);
  }
  std::uint32_t result = sign | (static_cast<std::uint32_t>(biased) << 10) | (mantissa >> 13);
  const std::uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (result & 1))) ++result;  // may carry into infinity
  return static_cast<std::uint16_t>(result);
}

float bfloat16_to_float(std::uint16_t value) {
  const std::uint32_t bits = static_cast<std::uint32_t>(value) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}

std::uint16_t float_to_bfloat16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<std::uint16_t>(bits >> 16);
}

// Integer sums and products wrap, as on the GPU (and without signed overflow in C++).
template <class T>
T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using Unsigned = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<Unsigned>(a) + static_cast<Unsigned>(b));
  } else {
    return a + b;
  }
}

template <class T>
T multiply(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using Unsigned = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<Unsigned>(a) * static_cast<Unsigned>(b));
  } else {
    return a * b;
  }
}

template <class T, class Combine>
void combine_all(T* dst, const T* src, std::size_t count, Combine combine) {
  for (std::size_t i = 0; i < count; ++i) dst[i] = combine(dst[i], src[i]);
}

template <class T>
void reduce_typed(void* dst_bytes, const void* src_bytes, std::size_t count, ncclRedOp_t op) {
  T* dst = static_cast<T*>(dst_bytes);
  const T* src = static_cast<const T*>(src_bytes);
  switch (op) {
    case ncclProd:
      combine_all(dst, src, count, multiply<T>);
      break;
    case ncclMax:
      combine_all(dst, src, count, [](T a, T b) { return std::max(a, b); });
      break;
    case ncclMin:
      combine_all(dst, src, count, [](T a, T b) { return std::min(a, b); });
      break;
    default:  // sum, and avg (divided at the end)
      combine_all(dst, src, count, add<T>);
  }
}

// 16-bit floating-point types reduce in float, one rounding per operation as on the GPU.
template <float (*to_float)(std::uint16_t), std::uint16_t (*from_float)(float)>
void reduce_16bit(void* dst_bytes, const void* src_bytes, std::size_t count, ncclRedOp_t op) {
  auto* dst = static_cast<std::uint16_t*>(dst_bytes);
  const auto* src = static_cast<const std::uint16_t*>(src_bytes);
  for (std::size_t i = 0; i < count; ++i) {
    float value = to_float(dst[i]);
    const float other = to_float(src[i]);
    reduce_typed<float>(&value, &other, 1, op);
    dst[i] = from_float(value);
  }
}

template <class T>
void divide_typed(void* bytes, std::size_t count, int divisor) {
  T* data = static_cast<T*>(bytes);
  for (std::size_t i = 0; i < count; ++i)
    data[i] = static_cast<T>(data[i] / static_cast<T>(divisor));
}

template <float (*to_float)(std::uint16_t), std::uint16_t (*from_float)(float)>
void divide_16bit(void* bytes, std::size_t count, int divisor) {
  auto* data = static_cast<std::uint16_t*>(bytes);
  for (std::size_t i = 0; i < count; ++i)
    data[i] = from_float(to_float(data[i]) / static_cast<float>(divisor));
}

// ---- Rings, chains and direct transfers ---------------------------------------------------
// One step of a ring or chain: at most one send to the next rank and one receive from the
// previous one, at the same time.
struct RingStep {
  bool sends = false;
  std::size_t send_offset = 0;
  std::size_t send_bytes = 0;
  bool receives = false;
  std::size_t recv_offset = 0;
  std::size_t recv_bytes = 0;
  bool reduce = false;
};

int wrap(int rank, int nranks) {
  return ((rank % nranks) + nranks) % nranks;
}

// Runs the steps on `base` with one proxy op per direction for the whole operation, as NCCL
// has one send and one receive proxy op per channel for a ring collective.
ncclResult_t run_ring(Op& op, char* base, std::span<const RingStep> steps, int next, int prev) {
  Comm& comm = *op.comm;
  int send_steps = 0, recv_steps = 0;
  for (const RingStep& step : steps) {
    if (step.sends) send_steps += chunks_of(step.send_bytes);
    if (step.receives) recv_steps += chunks_of(step.recv_bytes);
  }
  profiler::ProxyOp send_proxy{
      .op = &op, .peer = next, .send = true, .nsteps = send_steps, .chunk = kChunkBytes};
  profiler::ProxyOp recv_proxy{
      .op = &op, .peer = prev, .send = false, .nsteps = recv_steps, .chunk = kChunkBytes};
  if (send_steps > 0) profiler::proxy_op_start(send_proxy);
  if (recv_steps > 0) profiler::proxy_op_start(recv_proxy);
  ncclResult_t result = ncclSuccess;
  for (const RingStep& step : steps) {
    Transfer transfers[2];
    std::size_t count = 0;
    if (step.sends)
      transfers[count++] = Transfer{
          next,         true,       base + step.send_offset, step.send_bytes, false, op.type,
          op.reduction, &send_proxy};
    if (step.receives)
      transfers[count++] = Transfer{
          prev,         false,      base + step.recv_offset, step.recv_bytes, step.reduce, op.type,
          op.reduction, &recv_proxy};
    result = run_transfers(comm, std::span(transfers, count));
    if (result != ncclSuccess) break;
  }
  if (recv_steps > 0) profiler::proxy_op_stop(recv_proxy);
  if (send_steps > 0) profiler::proxy_op_stop(send_proxy);
  return result;
}

// Segment i of a buffer cut into nranks pieces: offsets in bytes, offsets[nranks] = the end.
std::vector<std::size_t> even_segments(std::size_t count, int nranks, std::size_t size) {
  std::vector<std::size_t> offsets(static_cast<std::size_t>(nranks) + 1, 0);
  const std::size_t base = count / static_cast<std::size_t>(nranks);
  const std::size_t extra = count % static_cast<std::size_t>(nranks);
  for (std::size_t i = 0; i < static_cast<std::size_t>(nranks); ++i)
    offsets[i + 1] = offsets[i] + (base + (i < extra ? 1 : 0)) * size;
  return offsets;
}

// Ring reduce-scatter: after it, rank r holds the reduction of segment r.
void add_reduce_scatter_steps(std::vector<RingStep>& steps, const std::vector<std::size_t>& at,
                              int rank, int nranks) {
  for (int k = 0; k + 1 < nranks; ++k) {
    const auto out = static_cast<std::size_t>(wrap(rank - k - 1, nranks));
    const auto in = static_cast<std::size_t>(wrap(rank - k - 2, nranks));
    steps.push_back(
        RingStep{true, at[out], at[out + 1] - at[out], true, at[in], at[in + 1] - at[in], true});
  }
}

// Ring all-gather: rank r starts with segment r, ends with all of them.
void add_all_gather_steps(std::vector<RingStep>& steps, const std::vector<std::size_t>& at,
                          int rank, int nranks) {
  for (int k = 0; k + 1 < nranks; ++k) {
    const auto out = static_cast<std::size_t>(wrap(rank - k, nranks));
    const auto in = static_cast<std::size_t>(wrap(rank - k - 1, nranks));
    steps.push_back(
        RingStep{true, at[out], at[out + 1] - at[out], true, at[in], at[in + 1] - at[in], false});
  }
}

// A pipeline along the ring: position 0 only sends, the last position only receives, the
// others receive chunk s while they forward chunk s-1.
std::vector<RingStep> chain_steps(std::size_t bytes, int position, int nranks, bool reduce) {
  const int chunks = chunks_of(bytes);
  auto chunk_at = [&](int chunk) { return static_cast<std::size_t>(chunk) * kChunkBytes; };
  auto chunk_bytes = [&](int chunk) { return std::min(kChunkBytes, bytes - chunk_at(chunk)); };
  std::vector<RingStep> steps;
  for (int s = 0; s <= chunks; ++s) {
    RingStep step;
    if (position > 0 && s < chunks) {
      step.receives = true;
      step.recv_offset = chunk_at(s);
      step.recv_bytes = chunk_bytes(s);
      step.reduce = reduce;
    }
    const int forwarded = position == 0 ? s : s - 1;
    if (position < nranks - 1 && forwarded >= 0 && forwarded < chunks) {
      step.sends = true;
      step.send_offset = chunk_at(forwarded);
      step.send_bytes = chunk_bytes(forwarded);
    }
    if (step.sends || step.receives) steps.push_back(step);
  }
  return steps;
}

// Transfers straight to their peers, each its own proxy op (owners[i] is transfer i's op).
ncclResult_t run_direct(Comm& comm, std::vector<Transfer>& transfers, std::span<Op* const> owners) {
  std::vector<profiler::ProxyOp> proxies(transfers.size());
  for (std::size_t i = 0; i < transfers.size(); ++i) {
    if (transfers[i].peer == comm.rank) continue;  // a copy, with no proxy in NCCL either
    proxies[i] = profiler::ProxyOp{.op = owners[i],
                                   .peer = transfers[i].peer,
                                   .send = transfers[i].send,
                                   .nsteps = chunks_of(transfers[i].bytes),
                                   .chunk = kChunkBytes};
    profiler::proxy_op_start(proxies[i]);
    transfers[i].proxy = &proxies[i];
  }
  const ncclResult_t result = run_transfers(comm, transfers);
  for (std::size_t i = 0; i < transfers.size(); ++i)
    if (transfers[i].proxy) profiler::proxy_op_stop(proxies[i]);
  return result;
}

void copy_input(const void* from, void* to, std::size_t bytes) {
  if (from != to && bytes > 0) std::memmove(to, from, bytes);
}

ncclResult_t all_reduce(Op& op) {
  const Comm& comm = *op.comm;
  const std::size_t size = type_size(op.type);
  char* data = static_cast<char*>(op.recv);
  copy_input(op.send, data, op.count * size);
  ncclResult_t result = ncclSuccess;
  if (comm.nranks > 1) {
    const auto at = even_segments(op.count, comm.nranks, size);
    std::vector<RingStep> steps;
    add_reduce_scatter_steps(steps, at, comm.rank, comm.nranks);
    add_all_gather_steps(steps, at, comm.rank, comm.nranks);
    result = run_ring(op, data, steps, wrap(comm.rank + 1, comm.nranks),
                      wrap(comm.rank - 1, comm.nranks));
  }
  // Every rank divides the same sums the same way, so averages agree bit for bit.
  if (result == ncclSuccess && op.reduction == ncclAvg)
    finish_average(data, op.count, op.type, comm.nranks);
  return result;
}

ncclResult_t reduce_scatter(Op& op) {
  const Comm& comm = *op.comm;
  const std::size_t size = type_size(op.type);
  const std::size_t bytes = op.count * size;
  // The input must stay as it is: reduce in a copy.
  std::vector<char> work(
      static_cast<const char*>(op.send),
      static_cast<const char*>(op.send) + bytes * static_cast<std::size_t>(comm.nranks));
  std::vector<std::size_t> at(static_cast<std::size_t>(comm.nranks) + 1);
  for (std::size_t i = 0; i < at.size(); ++i) at[i] = i * bytes;
  std::vector<RingStep> steps;
  add_reduce_scatter_steps(steps, at, comm.rank, comm.nranks);
  ncclResult_t result = ncclSuccess;
  if (!steps.empty())
    result = run_ring(op, work.data(), steps, wrap(comm.rank + 1, comm.nranks),
                      wrap(comm.rank - 1, comm.nranks));
  if (result != ncclSuccess) return result;
  copy_input(work.data() + static_cast<std::size_t>(comm.rank) * bytes, op.recv, bytes);
  if (op.reduction == ncclAvg) finish_average(op.recv, op.count, op.type, comm.nranks);
  return ncclSuccess;
}

ncclResult_t all_gather(Op& op) {
  const Comm& comm = *op.comm;
  const std::size_t bytes = op.count * type_size(op.type);
  char* data = static_cast<char*>(op.recv);
  copy_input(op.send, data + static_cast<std::size_t>(comm.rank) * bytes, bytes);
  std::vector<std::size_t> at(static_cast<std::size_t>(comm.nranks) + 1);
  for (std::size_t i = 0; i < at.size(); ++i) at[i] = i * bytes;
  std::vector<RingStep> steps;
  add_all_gather_steps(steps, at, comm.rank, comm.nranks);
  if (steps.empty()) return ncclSuccess;
  return run_ring(op, data, steps, wrap(comm.rank + 1, comm.nranks),
                  wrap(comm.rank - 1, comm.nranks));
}

ncclResult_t broadcast(Op& op) {
  const Comm& comm = *op.comm;
  const std::size_t bytes = op.count * type_size(op.type);
  char* data = static_cast<char*>(op.recv);
  if (comm.rank == op.root) copy_input(op.send, data, bytes);
  if (comm.nranks == 1) return ncclSuccess;
  const auto steps = chain_steps(bytes, wrap(comm.rank - op.root, comm.nranks), comm.nranks, false);
  return run_ring(op, data, steps, wrap(comm.rank + 1, comm.nranks),
                  wrap(comm.rank - 1, comm.nranks));
}

ncclResult_t reduce(Op& op) {
  const Comm& comm = *op.comm;
  const std::size_t bytes = op.count * type_size(op.type);
  // The chain runs from root+1 to the root; ranks other than the root reduce in a copy.
  std::vector<char> copy;
  char* data;
  if (comm.rank == op.root) {
    data = static_cast<char*>(op.recv);
    copy_input(op.send, data, bytes);
  } else {
    copy.assign(static_cast<const char*>(op.send), static_cast<const char*>(op.send) + bytes);
    data = copy.data();
  }
  ncclResult_t result = ncclSuccess;
  if (comm.nranks > 1) {
    const auto steps =
        chain_steps(bytes, wrap(comm.rank - op.root - 1, comm.nranks), comm.nranks, true);
    result = run_ring(op, data, steps, wrap(comm.rank + 1, comm.nranks),
                      wrap(comm.rank - 1, comm.nranks));
  }
  if (result == ncclSuccess && comm.rank == op.root && op.reduction == ncclAvg)
    finish_average(data, op.count, op.type, comm.nranks);
  return result;
}

}  // namespace

std::size_t type_size(ncclDataType_t type) {
  return commtap::nccl::datatype_bytes(static_cast<int>(type));
}

void reduce_into(void* dst, const void* src, std::size_t count, ncclDataType_t type,
                 ncclRedOp_t op) {
  switch (type) {
    case ncclInt8:
      return reduce_typed<std::int8_t>(dst, src, count, op);
    case ncclUint8:
      return reduce_typed<std::uint8_t>(dst, src, count, op);
    case ncclInt32:
      return reduce_typed<std::int32_t>(dst, src, count, op);
    case ncclUint32:
      return reduce_typed<std::uint32_t>(dst, src, count, op);
    case ncclInt64:
      return reduce_typed<std::int64_t>(dst, src, count, op);
    case ncclUint64:
      return reduce_typed<std::uint64_t>(dst, src, count, op);
    case ncclFloat16:
      return reduce_16bit<half_to_float, float_to_half>(dst, src, count, op);
    case ncclFloat32:
      return reduce_typed<float>(dst, src, count, op);
    case ncclFloat64:
      return reduce_typed<double>(dst, src, count, op);
    case ncclBfloat16:
      return reduce_16bit<bfloat16_to_float, float_to_bfloat16>(dst, src, count, op);
    default:
      return;
  }
}

void finish_average(void* data, std::size_t count, ncclDataType_t type, int nranks) {
  switch (type) {
    case ncclInt8:
      return divide_typed<std::int8_t>(data, count, nranks);
    case ncclUint8:
      return divide_typed<std::uint8_t>(data, count, nranks);
    case ncclInt32:
      return divide_typed<std::int32_t>(data, count, nranks);
    case ncclUint32:
      return divide_typed<std::uint32_t>(data, count, nranks);
    case ncclInt64:
      return divide_typed<std::int64_t>(data, count, nranks);
    case ncclUint64:
      return divide_typed<std::uint64_t>(data, count, nranks);
    case ncclFloat16:
      return divide_16bit<half_to_float, float_to_half>(data, count, nranks);
    case ncclFloat32:
      return divide_typed<float>(data, count, nranks);
    case ncclFloat64:
      return divide_typed<double>(data, count, nranks);
    case ncclBfloat16:
      return divide_16bit<bfloat16_to_float, float_to_bfloat16>(data, count, nranks);
    default:
      return;
  }
}

const char* op_name(OpKind kind) {
  switch (kind) {
    case OpKind::AllReduce:
      return "AllReduce";
    case OpKind::Broadcast:
      return "Broadcast";
    case OpKind::Reduce:
      return "Reduce";
    case OpKind::AllGather:
      return "AllGather";
    case OpKind::ReduceScatter:
      return "ReduceScatter";
    case OpKind::AlltoAll:
      return "AlltoAll";
    case OpKind::Gather:
      return "Gather";
    case OpKind::Scatter:
      return "Scatter";
    case OpKind::Send:
      return "Send";
    case OpKind::Recv:
      return "Recv";
  }
  return "?";
}

bool is_p2p(OpKind kind) {
  return kind == OpKind::Send || kind == OpKind::Recv;
}

ncclResult_t run_collective(Op& op) {
  switch (op.kind) {
    case OpKind::AllReduce:
      return all_reduce(op);
    case OpKind::Broadcast:
      return broadcast(op);
    case OpKind::Reduce:
      return reduce(op);
    case OpKind::AllGather:
      return all_gather(op);
    case OpKind::ReduceScatter:
      return reduce_scatter(op);
    default:
      return fail(ncclInternalError, "%s does not run as a collective", op_name(op.kind));
  }
}

ncclResult_t run_p2p(Comm& comm, std::span<Op* const> ops) {
  std::vector<Transfer> transfers;
  for (Op* op : ops) {
    const std::size_t bytes = op->count * type_size(op->type);
    const bool send = op->kind == OpKind::Send;
    transfers.push_back(Transfer{
        op->root, send,
        send ? static_cast<char*>(const_cast<void*>(op->send)) : static_cast<char*>(op->recv),
        bytes});
  }
  return run_direct(comm, transfers, ops);
}

}  // namespace fake_nccl
