// Makes hostile job directories from one real rank file, for tests/mpi/hostile.sh: each case is
// a directory holding one corrupted copy as rank-0.db. The damage is drawn from a fixed seed, so
// a failing case can be made again by its number:
//   hostile_traces SOURCE.db OUT-DIR FIRST COUNT SEED
// Kinds of damage (case number mod 8 picks one, the seed the details):
//   0 random bytes flipped anywhere (the header too)      4 a table replaced by a view (some
//   1 a page overwritten with random bytes                  endless, over a recursive CTE)
//   2 the file cut at a random length                     5 a trigger, a virtual table, or a
//   3 a column of a table set to a hostile value (text      table dropped
//     with invalid UTF-8 and escape sequences in a       6 the schema version changed
//     number column, +-9e18, infinity, a blob, 100 KB)     7 two of 0-3, and a journal of junk
#include <sqlite3.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<char>;

Bytes read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct Damage {
  std::mt19937_64 random;
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : random() % n; }
};

void flip_bytes(Bytes& file, Damage& d) {
  const auto flips = 1 + d.below(32);
  for (std::uint64_t i = 0; i < flips && !file.empty(); ++i)
    file[d.below(file.size())] ^= static_cast<char>(1 + d.below(255));
}

void overwrite_page(Bytes& file, Damage& d) {
  const std::size_t page = 4096, pages = file.size() / page;
  if (pages == 0) return;
  const std::size_t first = d.below(pages) * page;
  for (std::size_t i = first; i < first + page; ++i) file[i] = static_cast<char>(d.random());
}

void cut(Bytes& file, Damage& d) {
  file.resize(d.below(file.size()));
}

bool exec(sqlite3* db, const std::string& sql) {
  return sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
}

// Applies SQL damage to the database at `path`; false if SQLite refused it.
template <typename Apply>
bool with_database(const fs::path& path, Apply apply) {
  sqlite3* db = nullptr;
  bool ok = sqlite3_open(path.c_str(), &db) == SQLITE_OK && exec(db, "PRAGMA journal_mode=DELETE");
  ok = ok && apply(db);
  sqlite3_close(db);
  return ok;
}

std::vector<std::pair<std::string, std::vector<std::string>>> tables_of(sqlite3* db) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table'", -1, &s, nullptr);
  while (sqlite3_step(s) == SQLITE_ROW)
    out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)),
                     std::vector<std::string>{});
  sqlite3_finalize(s);
  for (auto& [table, columns] : out) {
    sqlite3_prepare_v2(db, ("PRAGMA table_info(\"" + table + "\")").c_str(), -1, &s, nullptr);
    while (sqlite3_step(s) == SQLITE_ROW)
      columns.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 1)));
    sqlite3_finalize(s);
  }
  return out;
}

bool hostile_value(sqlite3* db, Damage& d) {
  const auto tables = tables_of(db);
  if (tables.empty()) return false;
  const auto& [table, columns] = tables[d.below(tables.size())];
  if (columns.empty()) return false;
  const std::string column = columns[d.below(columns.size())];
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, ("UPDATE \"" + table + "\" SET \"" + column + "\" = ?1").c_str(), -1,
                         &s, nullptr) != SQLITE_OK)
    return false;
  static const std::string kTexts[] = {"h\xff\xfe\x1b[31mred\x1b[0m\nforged line",
                                       "\n\nssh-ed25519 AAAAC3 attacker@evil\n",
                                       std::string(100'000, 'x'),
                                       "' OR 1=1 --",
                                       "\xc0\xaf\xed\xa0\x80",
                                       "12abc"};
  switch (d.below(8)) {
    case 0:
      sqlite3_bind_int64(s, 1, INT64_MIN + static_cast<std::int64_t>(d.below(1000)));
      break;
    case 1:
      sqlite3_bind_int64(s, 1, INT64_MAX - static_cast<std::int64_t>(d.below(1000)));
      break;
    case 2:
      sqlite3_bind_double(s, 1, d.below(2) ? 1e308 * 10 : -1e308 * 10);  // +-infinity
      break;
    case 3:
      sqlite3_bind_int64(s, 1, -static_cast<std::int64_t>(d.below(1'000'000'000)));
      break;
    case 4: {
      std::string blob(d.below(64) + 1, '\0');
      for (char& c : blob) c = static_cast<char>(d.random());
      sqlite3_bind_blob(s, 1, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
      break;
    }
    case 5:
      sqlite3_bind_null(s, 1);
      break;
    default: {
      const std::string& text = kTexts[d.below(std::size(kTexts))];
      sqlite3_bind_text(s, 1, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    }
  }
  const bool ok = sqlite3_step(s) == SQLITE_DONE;
  sqlite3_finalize(s);
  return ok;
}

bool view_for_table(sqlite3* db, Damage& d) {
  static const char* kTables[] = {"heartbeats", "collectives", "ranks",         "transfers",
                                  "aggregates", "meta",        "clock_offsets", "comm_progress"};
  const std::string table = kTables[d.below(std::size(kTables))];
  const std::string endless =
      "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x AS rank, x AS "
      "wall_ns, 'computing' AS state FROM r";
  return exec(db, "PRAGMA legacy_alter_table=ON; ALTER TABLE \"" + table + "\" RENAME TO old_" +
                      table + "; CREATE VIEW \"" + table + "\" AS " +
                      (d.below(2) ? endless : "SELECT * FROM old_" + table));
}

bool schema_oddity(sqlite3* db, Damage& d) {
  switch (d.below(3)) {
    case 0:
      return exec(db, "CREATE TRIGGER t AFTER INSERT ON meta BEGIN SELECT 1; END");
    case 1:
      return exec(db,
                  "DROP TABLE IF EXISTS call_sites; CREATE VIRTUAL TABLE call_sites USING "
                  "fts4(rank, site, frame)");
    default: {
      const auto tables = tables_of(db);
      return !tables.empty() &&
             exec(db, "DROP TABLE \"" + tables[d.below(tables.size())].first + "\"");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s SOURCE.db OUT-DIR FIRST COUNT SEED\n", argv[0]);
    return 2;
  }
  const fs::path source = argv[1], out = argv[2];
  const long first = std::stol(argv[3]), count = std::stol(argv[4]);
  const std::uint64_t seed = std::stoull(argv[5]);
  const Bytes original = read_file(source);
  for (long number = first; number < first + count; ++number) {
    Damage d{std::mt19937_64(seed * 1'000'003 + static_cast<std::uint64_t>(number))};
    const fs::path dir = out / ("case-" + std::to_string(number));
    fs::create_directories(dir);
    const fs::path file = dir / "rank-0.db";
    write_file(file, original);
    auto byte_damage = [&](int kind) {
      Bytes bytes = read_file(file);
      if (kind == 0) flip_bytes(bytes, d);
      if (kind == 1) overwrite_page(bytes, d);
      if (kind == 2) cut(bytes, d);
      write_file(file, bytes);
    };
    auto damage = [&](int kind) {
      if (kind <= 2) return byte_damage(kind);
      if (!with_database(file, [&](sqlite3* db) { return hostile_value(db, d); })) byte_damage(0);
    };
    switch (number % 8) {
      case 4:
        if (!with_database(file, [&](sqlite3* db) { return view_for_table(db, d); }))
          byte_damage(1);
        break;
      case 5:
        if (!with_database(file, [&](sqlite3* db) { return schema_oddity(db, d); })) byte_damage(1);
        break;
      case 6:
        with_database(file, [&](sqlite3* db) {
          return exec(db, "PRAGMA user_version=" + std::to_string(d.below(40) - 10));
        });
        break;
      case 7: {
        damage(static_cast<int>(d.below(4)));
        damage(static_cast<int>(d.below(4)));
        Bytes junk(d.below(8192) + 1);
        for (char& c : junk) c = static_cast<char>(d.random());
        // Half of the journals start as real ones do, so the reader takes them for hot.
        if (d.below(2) && junk.size() >= 8) {
          const unsigned char magic[8] = {0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7};
          for (int i = 0; i < 8; ++i)
            junk[static_cast<std::size_t>(i)] = static_cast<char>(magic[i]);
        }
        write_file(fs::path(file.string() + "-journal"), junk);
        break;
      }
      default:
        damage(static_cast<int>(number % 8));
    }
  }
  return 0;
}
