#include "analyzer/store/output_files.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace commtap::analyzer {

namespace fs = std::filesystem;

namespace {

std::string random_suffix() {
  unsigned char bytes[8] = {};
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    const auto mix = static_cast<unsigned long long>(::getpid()) * 0x9E3779B97F4A7C15ull ^
                     static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(bytes));
    std::memcpy(bytes, &mix, sizeof bytes);
  }
  static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string out;
  for (unsigned char b : bytes) out += kDigits[b % 36];
  return out;
}

}  // namespace

std::unique_ptr<OutputFile> OutputFile::create(const std::string& path, mode_t mode,
                                               std::string& error) {
  auto file = std::unique_ptr<OutputFile>(new OutputFile());
  file->path_ = path;
  const fs::path target(path);
  file->name_ = target.filename().string();
  if (file->name_.empty() || file->name_ == "." || file->name_ == "..") {
    error = path + ": not a file name";
    return nullptr;
  }
  const std::string directory =
      target.has_parent_path() ? target.parent_path().string() : std::string(".");
  // Everything below goes through this descriptor: a directory renamed or replaced by a link
  // after this point cannot move the write elsewhere.
  file->directory_ = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (file->directory_ < 0) {
    error = "cannot write " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    file->temporary_ = "." + file->name_ + "." + random_suffix() + ".tmp";
    fd = ::openat(file->directory_, file->temporary_.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    error = "cannot write " + path + ": " + std::strerror(errno);
    file->temporary_.clear();
    return nullptr;
  }
  ::fchmod(fd, mode & 0666);  // the umask narrowed it, or a wider mode was asked for
  file->stream_ = ::fdopen(fd, "w");
  if (file->stream_ == nullptr) {
    ::close(fd);
    error = "cannot write " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  return file;
}

OutputFile::~OutputFile() {
  if (stream_ != nullptr) std::fclose(stream_);
  if (!temporary_.empty()) ::unlinkat(directory_, temporary_.c_str(), 0);
  if (directory_ >= 0) ::close(directory_);
}

bool OutputFile::write(const void* data, std::size_t size) {
  failed_ = failed_ || std::fwrite(data, 1, size, stream_) != size;
  return !failed_;
}

bool OutputFile::commit(std::string& error) {
  const bool written = !failed_ && std::fflush(stream_) == 0 && ::fsync(::fileno(stream_)) == 0;
  const int saved = errno;
  const bool closed = std::fclose(stream_) == 0;
  stream_ = nullptr;
  if (!written || !closed) {
    const int cause = written ? errno : saved;
    error = "cannot write " + path_ + ": " + write_failure(path_, std::strerror(cause), 0, cause);
    return false;
  }
  if (::renameat(directory_, temporary_.c_str(), directory_, name_.c_str()) != 0) {
    error = "cannot write " + path_ + ": " + std::strerror(errno);
    return false;
  }
  temporary_.clear();
  return true;
}

bool write_file_atomically(const std::string& path, const std::string& text, mode_t mode,
                           std::string& error) {
  auto file = OutputFile::create(path, mode, error);
  if (!file) return false;
  if (!file->write(text.data(), text.size())) {
    const int cause = errno;
    error = "cannot write " + path + ": " + write_failure(path, std::strerror(cause), 0, cause);
    return false;
  }
  return file->commit(error);
}

mode_t mode_for_outputs_of(const std::vector<std::string>& inputs) {
  if (inputs.empty()) return 0600;
  mode_t mode = 0666;
  for (const std::string& input : inputs) {
    struct stat info {};
    mode &= ::stat(input.c_str(), &info) == 0 ? (info.st_mode & 0666) : 0600;
  }
  return mode | 0600;  // the user who runs commtap reads and replaces what it wrote
}

std::string write_failure(const std::string& where, const std::string& message, int sqlite_code,
                          int system_errno) {
  const bool full = sqlite_code == SQLITE_FULL || system_errno == ENOSPC ||
                    system_errno == EDQUOT || system_errno == EFBIG;
  if (full)
    return "the disk holding " + where + " is full (" +
           std::strerror(system_errno != 0 ? system_errno : ENOSPC) + ")";
  if (system_errno != 0 && message != std::strerror(system_errno))
    return message + " (" + std::strerror(system_errno) + ")";
  return message;
}

std::string sqlite_write_failure(const std::string& where, sqlite3* db) {
  if (db == nullptr) return "cannot open " + where;
  return write_failure(where, sqlite3_errmsg(db), sqlite3_extended_errcode(db) & 0xff,
                       sqlite3_system_errno(db));
}

bool create_private_database(const std::string& path, mode_t mode, std::string& error) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 0666);
  if (fd < 0) {
    if (errno == EEXIST) return true;  // SQLite opens it with SQLITE_OPEN_NOFOLLOW
    error = path + ": " + std::strerror(errno);
    return false;
  }
  ::fchmod(fd, mode & 0666);
  ::close(fd);
  return true;
}

}  // namespace commtap::analyzer
