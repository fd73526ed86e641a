// analyzer/store/output_files: every file the `commtap` command writes (reports, exports, merged
// databases, Prometheus textfiles, the findings store) is created so that whoever owns the
// directory it goes into cannot redirect the write: a new file with a random name, created with
// O_CREAT|O_EXCL|O_NOFOLLOW through a descriptor of the directory, with its mode set before
// anything is written, then renamed over the target in the same directory. A symbolic link
// planted at the target or at a temporary name is replaced or refused, never followed; a reader
// sees the old file or the new one, never part of one.
#pragma once

#include <sqlite3.h>

#include <sys/types.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace commtap::analyzer {

class OutputFile {
 public:
  // A new temporary file beside `path`, with `mode` (whatever the umask). Null with `error`
  // naming the path when it cannot be created.
  static std::unique_ptr<OutputFile> create(const std::string& path, mode_t mode,
                                            std::string& error);
  ~OutputFile();  // removes the temporary file unless committed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::FILE* stream() { return stream_; }
  bool write(const void* data, std::size_t size);
  // Flushes, syncs and renames the file over the target; false with `error` if any step failed
  // (then the target is unchanged).
  bool commit(std::string& error);

 private:
  OutputFile() = default;
  int directory_ = -1;
  std::FILE* stream_ = nullptr;
  std::string path_, name_, temporary_;
  bool failed_ = false;
};

// `text` into `path` through an OutputFile.
bool write_file_atomically(const std::string& path, const std::string& text, mode_t mode,
                           std::string& error);

// The mode of an output made from the files `inputs`: readable by no one the inputs are not
// readable by (their modes intersected, within 0666; 0600 where there are none or one cannot be
// read). Traces are 0600 or 0640: they name hosts, command lines and source paths.
mode_t mode_for_outputs_of(const std::vector<std::string>& inputs);

// Why a write to `where` failed, for a message: "the disk holding <where> is full (No space left
// on device)" where the cause is a full disk, a quota or a file size limit (SQLite's SQLITE_FULL,
// or the system's ENOSPC, EDQUOT, EFBIG), else `message` as it is, with the system's reason.
std::string write_failure(const std::string& where, const std::string& message, int sqlite_code = 0,
                          int system_errno = 0);
// write_failure for the last error of `db`.
std::string sqlite_write_failure(const std::string& where, sqlite3* db);

// Creates the SQLite database `path` empty with `mode` if nothing is there (no link followed),
// so that SQLite, which would create it with the umask's mode, opens a file of that mode.
bool create_private_database(const std::string& path, mode_t mode, std::string& error);

}  // namespace commtap::analyzer
