// Layout trees and the passes that bring them to a canonical form.
#include <string>

#include "datatypes/datatypes.hpp"

namespace commtap::datatypes {

namespace {

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

LayoutPtr empty() {
  return Layout::list({});
}

}  // namespace

LayoutPtr Layout::dense(std::int64_t bytes) {
  auto node = std::make_shared<Layout>();
  node->kind = Kind::dense;
  node->bytes = bytes;
  node->size = bytes;
  node->hash = mix(1, static_cast<std::uint64_t>(bytes));
  return node;
}

LayoutPtr Layout::stream(std::int64_t count, std::int64_t stride, LayoutPtr child) {
  auto node = std::make_shared<Layout>();
  node->kind = Kind::stream;
  node->count = count;
  node->stride = stride;
  node->size = count * child->size;
  node->hash =
      mix(mix(mix(2, static_cast<std::uint64_t>(count)), static_cast<std::uint64_t>(stride)),
          child->hash);
  node->child = std::move(child);
  return node;
}

LayoutPtr Layout::list(std::vector<Item> items) {
  auto node = std::make_shared<Layout>();
  node->kind = Kind::list;
  std::uint64_t hash = 3;
  for (const Item& item : items) {
    node->size += item.layout->size;
    hash = mix(mix(hash, static_cast<std::uint64_t>(item.offset)), item.layout->hash);
  }
  node->hash = hash;
  node->items = std::move(items);
  return node;
}

bool same_layout(const Layout& a, const Layout& b) {
  if (&a == &b) return true;
  if (a.hash != b.hash || a.kind != b.kind || a.size != b.size) return false;
  switch (a.kind) {
    case Layout::Kind::dense:
      return a.bytes == b.bytes;
    case Layout::Kind::stream:
      return a.count == b.count && a.stride == b.stride && same_layout(*a.child, *b.child);
    case Layout::Kind::list:
      if (a.items.size() != b.items.size()) return false;
      for (std::size_t i = 0; i < a.items.size(); ++i)
        if (a.items[i].offset != b.items[i].offset ||
            !same_layout(*a.items[i].layout, *b.items[i].layout))
          return false;
      return true;
  }
  return false;
}

std::string describe(const Layout& layout) {
  switch (layout.kind) {
    case Layout::Kind::dense:
      return "dense(" + std::to_string(layout.bytes) + ")";
    case Layout::Kind::stream:
      return "stream(" + std::to_string(layout.count) + ", " + std::to_string(layout.stride) +
             ", " + describe(*layout.child) + ")";
    case Layout::Kind::list: {
      if (layout.items.size() == 1)
        return "@" + std::to_string(layout.items[0].offset) + " " +
               describe(*layout.items[0].layout);
      std::string out = "[";
      for (std::size_t i = 0; i < layout.items.size(); ++i) {
        if (i > 0) out += ", ";
        out +=
            "@" + std::to_string(layout.items[i].offset) + " " + describe(*layout.items[i].layout);
      }
      return out + "]";
    }
  }
  return "?";
}

namespace {

// One pass, bottom-up. `changed` is set when anything was rewritten.
LayoutPtr pass(const LayoutPtr& node, bool& changed) {
  switch (node->kind) {
    case Layout::Kind::dense:
      if (node->bytes == 0) {
        changed = true;
        return empty();
      }
      return node;

    case Layout::Kind::stream: {
      LayoutPtr child = pass(node->child, changed);
      if (node->count == 0 || child->size == 0) {
        changed = true;
        return empty();
      }
      if (node->count == 1) {  // a count-1 level is its child
        changed = true;
        return child;
      }
      // A stream of dense blocks that touch each other is one dense block.
      if (child->kind == Layout::Kind::dense && node->stride == child->bytes) {
        changed = true;
        return Layout::dense(node->count * child->bytes);
      }
      if (child->kind == Layout::Kind::stream &&
          node->stride == child->count * child->stride) {  // flatten nested streams
        changed = true;
        return Layout::stream(node->count * child->count, child->stride, child->child);
      }
      // A child at an offset: the whole stream moves by it.
      if (child->kind == Layout::Kind::list && child->items.size() == 1) {
        changed = true;
        return Layout::at(child->items[0].offset,
                          Layout::stream(node->count, node->stride, child->items[0].layout));
      }
      if (child != node->child) return Layout::stream(node->count, node->stride, child);
      return node;
    }

    case Layout::Kind::list: {
      // Children first, then flatten nested lists and drop empty items.
      std::vector<Layout::Item> flat;
      bool rewritten = false;
      for (const Layout::Item& item : node->items) {
        LayoutPtr child = pass(item.layout, changed);
        rewritten |= child != item.layout;
        if (child->size == 0) {
          rewritten = true;
          continue;
        }
        if (child->kind == Layout::Kind::list) {
          rewritten = true;
          for (const Layout::Item& inner : child->items)
            flat.push_back({item.offset + inner.offset, inner.layout});
        } else {
          flat.push_back({item.offset, child});
        }
      }
      // Merge dense blocks that touch.
      std::vector<Layout::Item> merged;
      for (const Layout::Item& item : flat) {
        if (!merged.empty()) {
          Layout::Item& last = merged.back();
          if (last.layout->kind == Layout::Kind::dense &&
              item.layout->kind == Layout::Kind::dense &&
              last.offset + last.layout->bytes == item.offset) {
            last.layout = Layout::dense(last.layout->bytes + item.layout->bytes);
            rewritten = true;
            continue;
          }
        }
        merged.push_back(item);
      }
      // Runs of equal items at a constant distance become streams.
      std::vector<Layout::Item> runs;
      for (std::size_t i = 0; i < merged.size();) {
        std::size_t j = i + 1;
        if (j < merged.size() && same_layout(*merged[i].layout, *merged[j].layout)) {
          const std::int64_t delta = merged[j].offset - merged[i].offset;
          while (j + 1 < merged.size() && merged[j + 1].offset - merged[j].offset == delta &&
                 same_layout(*merged[i].layout, *merged[j + 1].layout))
            ++j;
          ++j;
        }
        if (j - i >= 2) {
          runs.push_back({merged[i].offset, Layout::stream(static_cast<std::int64_t>(j - i),
                                                           merged[i + 1].offset - merged[i].offset,
                                                           merged[i].layout)});
          rewritten = true;
        } else {
          runs.push_back(merged[i]);
        }
        i = j;
      }
      if (runs.size() == 1 && runs[0].offset == 0) {
        changed = true;
        return runs[0].layout;
      }
      if (!rewritten) return node;
      changed = true;
      return Layout::list(std::move(runs));
    }
  }
  return node;
}

}  // namespace

LayoutPtr simplify(const LayoutPtr& layout) {
  LayoutPtr current = layout;
  for (int round = 0; round < 64; ++round) {
    bool changed = false;
    current = pass(current, changed);
    if (!changed) break;
  }
  return current;
}

std::optional<StridedBlock> as_strided(const LayoutPtr& layout) {
  StridedBlock block;
  const Layout* node = layout.get();
  for (;;) {
    switch (node->kind) {
      case Layout::Kind::dense:
        block.block = node->bytes;
        return block;
      case Layout::Kind::stream:
        block.dims.push_back({node->count, node->stride});
        node = node->child.get();
        break;
      case Layout::Kind::list:
        if (node->items.size() != 1) return std::nullopt;
        // An offset below the outermost dimension shifts every block alike.
        block.offset += node->items[0].offset;
        node = node->items[0].layout.get();
        break;
    }
  }
}

}  // namespace commtap::datatypes
