// Decoding committed MPI datatypes into layouts, and the per-handle plan cache.
#include <vector>

#include "datatypes/datatypes.hpp"

namespace commtap::datatypes {

namespace {

// Every query below is the large-count (_c) form: MPICH 4.0.2 answers the int forms for a type
// made by a large-count constructor with an error, fatal under the default error handler
// (tests/mpich_defects/large_count_envelope.c), and commtap must never raise an error the
// application did not.
bool is_named(MPI_Datatype datatype) {
  MPI_Count integers = 0, addresses = 0, large_counts = 0, types = 0;
  int combiner = 0;
  return PMPI_Type_get_envelope_c(datatype, &integers, &addresses, &large_counts, &types,
                                  &combiner) == MPI_SUCCESS &&
         combiner == MPI_COMBINER_NAMED;
}

// The datatypes get_contents returns are new handles unless named: freed when done.
struct Contents {
  static constexpr int kLargeCount = -1;  // not an MPI combiner: made with MPI_Count counts
  int combiner = MPI_COMBINER_NAMED;
  std::vector<int> integers;
  std::vector<MPI_Aint> addresses;
  std::vector<MPI_Datatype> types;
  bool ok = false;
  explicit Contents(MPI_Datatype datatype) {
    MPI_Count ni = 0, na = 0, nc = 0, nt = 0;
    if (PMPI_Type_get_envelope_c(datatype, &ni, &na, &nc, &nt, &combiner) != MPI_SUCCESS) return;
    if (combiner == MPI_COMBINER_NAMED) {
      ok = true;
      return;
    }
    // A type made by a large-count constructor carries its counts as MPI_Count: not decoded
    // (no plan: the library packs it), but its component types are still released.
    std::vector<MPI_Count> large_counts(static_cast<std::size_t>(nc));
    integers.resize(static_cast<std::size_t>(ni));
    addresses.resize(static_cast<std::size_t>(na));
    types.resize(static_cast<std::size_t>(nt));
    ok = PMPI_Type_get_contents_c(datatype, ni, na, nc, nt, integers.data(), addresses.data(),
                                  large_counts.data(), types.data()) == MPI_SUCCESS;
    if (ok && nc > 0) {
      combiner = kLargeCount;
      return;
    }
    if (!ok) types.clear();
  }
  ~Contents() {
    for (MPI_Datatype& t : types)
      if (!is_named(t)) PMPI_Type_free(&t);
  }
  Contents(const Contents&) = delete;
  Contents& operator=(const Contents&) = delete;
};

std::int64_t extent_of(MPI_Datatype datatype) {
  MPI_Count lb = 0, extent = 0;
  PMPI_Type_get_extent_c(datatype, &lb, &extent);
  return static_cast<std::int64_t>(extent);
}

LayoutPtr decode_depth(MPI_Datatype datatype, int depth);

LayoutPtr decode_contents(const Contents& c, int depth) {
  const auto& I = c.integers;
  const auto& A = c.addresses;
  auto child = [&](std::size_t i) { return decode_depth(c.types.at(i), depth + 1); };
  switch (c.combiner) {
    case MPI_COMBINER_DUP:
      return child(0);
    case MPI_COMBINER_RESIZED:  // the extent changes, not the type map
      return child(0);
    case MPI_COMBINER_CONTIGUOUS: {
      LayoutPtr inner = child(0);
      if (!inner) return nullptr;
      return Layout::stream(I[0], extent_of(c.types[0]), inner);
    }
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR: {
      LayoutPtr inner = child(0);
      if (!inner) return nullptr;
      const std::int64_t e = extent_of(c.types[0]);
      const std::int64_t stride = c.combiner == MPI_COMBINER_VECTOR ? I[2] * e : A[0];
      return Layout::stream(I[0], stride, Layout::stream(I[1], e, inner));
    }
    case MPI_COMBINER_INDEXED:
    case MPI_COMBINER_HINDEXED:
    case MPI_COMBINER_INDEXED_BLOCK:
    case MPI_COMBINER_HINDEXED_BLOCK: {
      LayoutPtr inner = child(0);
      if (!inner) return nullptr;
      const std::int64_t e = extent_of(c.types[0]);
      const int count = I[0];
      std::vector<Layout::Item> items;
      for (int i = 0; i < count; ++i) {
        std::int64_t blocklength = 0, displacement = 0;
        switch (c.combiner) {
          case MPI_COMBINER_INDEXED:
            blocklength = I[1 + i];
            displacement = static_cast<std::int64_t>(I[1 + count + i]) * e;
            break;
          case MPI_COMBINER_HINDEXED:
            blocklength = I[1 + i];
            displacement = A[i];
            break;
          case MPI_COMBINER_INDEXED_BLOCK:
            blocklength = I[1];
            displacement = static_cast<std::int64_t>(I[2 + i]) * e;
            break;
          default:  // HINDEXED_BLOCK
            blocklength = I[1];
            displacement = A[i];
        }
        items.push_back({displacement, Layout::stream(blocklength, e, inner)});
      }
      return Layout::list(std::move(items));
    }
    case MPI_COMBINER_STRUCT: {
      const int count = I[0];
      std::vector<Layout::Item> items;
      for (int i = 0; i < count; ++i) {
        LayoutPtr inner = child(static_cast<std::size_t>(i));
        if (!inner) return nullptr;
        items.push_back(
            {A[i],
             Layout::stream(I[1 + i], extent_of(c.types[static_cast<std::size_t>(i)]), inner)});
      }
      return Layout::list(std::move(items));
    }
    case MPI_COMBINER_SUBARRAY: {
      LayoutPtr inner = child(0);
      if (!inner) return nullptr;
      const int n = I[0];
      const int* sizes = &I[1];
      const int* subsizes = &I[1 + n];
      const int* starts = &I[1 + 2 * n];
      const bool c_order = I[1 + 3 * n] == MPI_ORDER_C;
      const std::int64_t e = extent_of(c.types[0]);
      // Dimensions from the slowest-varying to the fastest: C order is 0..n-1, Fortran n-1..0.
      std::vector<int> order(static_cast<std::size_t>(n));
      for (int k = 0; k < n; ++k) order[static_cast<std::size_t>(k)] = c_order ? k : n - 1 - k;
      std::vector<std::int64_t> pitch(static_cast<std::size_t>(n));  // bytes per index step
      std::int64_t step = e;
      for (int k = n - 1; k >= 0; --k) {
        pitch[static_cast<std::size_t>(k)] = step;
        step *= sizes[order[static_cast<std::size_t>(k)]];
      }
      std::int64_t offset = 0;
      LayoutPtr layout = inner;
      for (int k = n - 1; k >= 0; --k) {
        const int d = order[static_cast<std::size_t>(k)];
        offset += static_cast<std::int64_t>(starts[d]) * pitch[static_cast<std::size_t>(k)];
        layout = Layout::stream(subsizes[d], pitch[static_cast<std::size_t>(k)], layout);
      }
      return Layout::at(offset, layout);
    }
    default:  // darray, Fortran combiners, large-count forms: the MPI library does them
      return nullptr;
  }
}

LayoutPtr decode_depth(MPI_Datatype datatype, int depth) {
  if (depth > 64) return nullptr;
  Contents contents(datatype);
  if (!contents.ok) return nullptr;
  if (contents.combiner == MPI_COMBINER_NAMED) {
    // Named types are dense unless they have holes (MPI_DOUBLE_INT, MPI_LONG_DOUBLE_INT, ...).
    MPI_Count size = 0, lb = 0, extent = 0;
    if (PMPI_Type_size_c(datatype, &size) != MPI_SUCCESS ||
        PMPI_Type_get_extent_c(datatype, &lb, &extent) != MPI_SUCCESS || lb != 0 || size != extent)
      return nullptr;
    return Layout::dense(size);
  }
  return decode_contents(contents, depth);
}

}  // namespace

LayoutPtr decode(MPI_Datatype datatype) {
  LayoutPtr layout = decode_depth(datatype, 0);
  return layout ? simplify(layout) : nullptr;
}

std::shared_ptr<const PackPlan> PlanCache::make(MPI_Datatype datatype) {
  LayoutPtr layout = decode(datatype);
  MPI_Count size = 0;
  if (!layout || PMPI_Type_size_c(datatype, &size) != MPI_SUCCESS || size != layout->size)
    return nullptr;  // a decoding that disagrees with MPI about the size is not trusted
  return std::make_shared<const PackPlan>(layout, extent_of(datatype));
}

void PlanCache::committed(MPI_Datatype datatype) {
  auto plan = make(datatype);
  std::unique_lock lock(mutex_);
  plans_[datatype] = std::move(plan);
}

void PlanCache::freed(MPI_Datatype datatype) {
  std::unique_lock lock(mutex_);
  plans_.erase(datatype);
}

std::shared_ptr<const PackPlan> PlanCache::find(MPI_Datatype datatype) {
  {
    std::shared_lock lock(mutex_);
    if (auto found = plans_.find(datatype); found != plans_.end()) return found->second;
    if (named_tried_.count(datatype)) return nullptr;
  }
  if (!is_named(datatype)) return nullptr;  // not committed through commtap
  auto plan = make(datatype);
  std::unique_lock lock(mutex_);
  named_tried_[datatype] = true;
  plans_[datatype] = plan;
  return plan;
}

}  // namespace commtap::datatypes
