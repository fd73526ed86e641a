// datatypes: where a buffer lives, canonical layouts of MPI derived datatypes (TEMPI-style), and
// the packers that run them.
//
// A committed datatype is decoded once (MPI_Type_get_envelope/contents) into a small tree of
// three kinds of nodes, then simplified to a fixed point: most real types become one N-D
// strided block (an offset, a contiguous block size and a list of (count, stride) dimensions),
// which the host packer runs with loops specialized for small block sizes; the rest keep a
// compact tree. Packed bytes follow the type map's order exactly, so the result is
// byte-identical to MPI_Pack's.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace commtap::datatypes {

enum class MemoryKind { host, device };

// True when this build has CUDA support and the process can see at least one GPU. Answered
// once (the first call asks the CUDA runtime); "no driver" and "no device" both mean false.
bool gpu_available() noexcept;

// Where `pointer` lives. Without CUDA support or a GPU every pointer is host memory.
MemoryKind memory_kind(const void* pointer) noexcept;

// Whether this build was compiled with the CUDA parts.
bool built_with_cuda() noexcept;

// ---- Layouts (pure C++) -----------------------------------------------------------------------

struct Layout;
using LayoutPtr = std::shared_ptr<const Layout>;

// The bytes one element of a datatype covers, in type-map order, relative to the element's
// origin (its displacement 0, which need not be its lower bound).
struct Layout {
  enum class Kind : std::uint8_t {
    dense,   // `bytes` contiguous bytes at offset 0
    stream,  // `count` copies of `child`, `stride` bytes apart (the stride may be negative)
    list,    // `items`, in order: (offset, layout)
  };
  struct Item {
    std::int64_t offset;
    LayoutPtr layout;
  };
  Kind kind = Kind::dense;
  std::int64_t bytes = 0;
  std::int64_t count = 0;
  std::int64_t stride = 0;
  LayoutPtr child;
  std::vector<Item> items;
  std::int64_t size = 0;   // packed bytes
  std::uint64_t hash = 0;  // structural, for finding repeats quickly

  static LayoutPtr dense(std::int64_t bytes);
  static LayoutPtr stream(std::int64_t count, std::int64_t stride, LayoutPtr child);
  static LayoutPtr list(std::vector<Item> items);
  static LayoutPtr at(std::int64_t offset, LayoutPtr child) { return list({{offset, child}}); }
};

bool same_layout(const Layout& a, const Layout& b);
// Canonical text, e.g. "@8 stream(4, 16, dense(8))": equal layouts print equally.
std::string describe(const Layout& layout);

// Applies the simplification passes until nothing changes: drop empty and count-1 levels,
// fold dense streams, flatten nested streams and lists, merge adjacent blocks, turn runs of
// equal items at a constant distance into streams, hoist offsets out of streams.
LayoutPtr simplify(const LayoutPtr& layout);

// An N-dimensional strided block: for every index (i0, ..., in-1) with ik < dims[k].count, the
// `block` bytes at offset + sum ik * dims[k].stride; dims outermost first (type-map order).
struct StridedBlock {
  struct Dim {
    std::int64_t count;
    std::int64_t stride;
  };
  std::int64_t offset = 0;
  std::int64_t block = 0;
  std::vector<Dim> dims;
};
// The layout as one strided block, if it is one.
std::optional<StridedBlock> as_strided(const LayoutPtr& layout);

// ---- Packing ----------------------------------------------------------------------------------

// How to pack elements of one committed datatype.
class PackPlan {
 public:
  // `element`: the simplified layout of one element; `extent`: the datatype's extent.
  PackPlan(LayoutPtr element, std::int64_t extent);
  // Bytes that `count` elements pack to.
  std::int64_t packed_bytes(std::int64_t count) const { return element_->size * count; }
  // `count` elements, element i at `in` + i * extent, into `out` (packed_bytes(count) bytes).
  void pack(const void* in, std::int64_t count, void* out) const;
  // The reverse: `in` holds packed_bytes(count) bytes.
  void unpack(const void* in, std::int64_t count, void* out) const;
  bool strided() const { return strided_.has_value(); }
  const Layout& element() const { return *element_; }
  const LayoutPtr& element_layout() const { return element_; }
  // One element as a strided block, if it is one.
  const std::optional<StridedBlock>& strided_block() const { return strided_; }
  std::int64_t extent() const { return extent_; }

 private:
  LayoutPtr element_;
  std::int64_t extent_;
  std::optional<StridedBlock> strided_;  // of one element
};

// ---- MPI datatypes ----------------------------------------------------------------------------

// Decodes a datatype with PMPI_Type_get_envelope/contents (freeing the handles that creates).
// nullptr for what is not supported (darray, named types with holes such as MPI_DOUBLE_INT,
// Fortran-specific combiners): the caller then leaves the work to the MPI library.
LayoutPtr decode(MPI_Datatype datatype);

// Plans per datatype handle: made at MPI_Type_commit (named types on first use), dropped at
// MPI_Type_free. Thread safe.
class PlanCache {
 public:
  // After a successful MPI_Type_commit.
  void committed(MPI_Datatype datatype);
  // After a successful MPI_Type_free of `datatype` (the handle before the call).
  void freed(MPI_Datatype datatype);
  // The plan for a committed or named datatype; nullptr if commtap has none (unsupported,
  // or not committed through commtap).
  std::shared_ptr<const PackPlan> find(MPI_Datatype datatype);

 private:
  static std::shared_ptr<const PackPlan> make(MPI_Datatype datatype);
  std::shared_mutex mutex_;
  std::unordered_map<MPI_Datatype, std::shared_ptr<const PackPlan>> plans_;
  std::unordered_map<MPI_Datatype, bool> named_tried_;
};

// MPI_Pack/MPI_Unpack (and _c) done by commtap: on host buffers with a datatype `plans` has a
// plan for, byte for byte what the library would produce. Returns MPI_SUCCESS when it packed,
// or nullopt ("not taken": the caller calls the library), also for every case that is an error
// (bad count, no room, MPI_COMM_NULL, an uncommitted type), which the library then reports.
// Pack: in = the typed buffer, out = the packed one; unpack: the other way round.
template <typename Count>
std::optional<int> try_pack(PlanCache& plans, bool packing, const void* in, Count count,
                            MPI_Datatype datatype, void* out, Count size, Count* position,
                            MPI_Comm comm);

}  // namespace commtap::datatypes
