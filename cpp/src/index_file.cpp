#include "kira/index_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iterator>

namespace kira {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'R', 'A', 'I', 'D', 'X', '\0'};
constexpr std::size_t kHeaderBytes = 32;

struct CrcTable {
  std::uint32_t t[8][256];
  CrcTable() {
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (std::uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
};

const char* kind_name(std::uint32_t kind) {
  switch (kind) {
    case 1: return "FlatIndex";
    case 2: return "HNSWIndex";
  }
  return nullptr;
}

[[noreturn]] void os_error(const std::string& what, const std::string& path) {
  const int e = errno;
  throw FileError(what + " " + path + ": " + std::strerror(e), e);
}

void write_all(int fd, const char* p, std::size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      os_error("cannot write", path);
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

}  // namespace

// Slicing-by-8 CRC-32 (IEEE polynomial, as zlib.crc32).
std::uint32_t crc32(const void* data, std::size_t n, std::uint32_t crc) {
  static const CrcTable table;
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  while (n >= 8) {
    std::uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = table.t[7][lo & 0xff] ^ table.t[6][(lo >> 8) & 0xff] ^ table.t[5][(lo >> 16) & 0xff] ^
          table.t[4][lo >> 24] ^ table.t[3][hi & 0xff] ^ table.t[2][(hi >> 8) & 0xff] ^
          table.t[1][(hi >> 16) & 0xff] ^ table.t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) crc = table.t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

void PayloadWriter::save(const std::string& path, IndexKind kind) const {
  char header[kHeaderBytes];
  std::memcpy(header, kMagic, 8);
  const std::uint32_t version = kFormatVersion;
  const auto kind_u = static_cast<std::uint32_t>(kind);
  const std::uint64_t length = buf_.size();
  const std::uint32_t payload_crc = crc32(buf_.data(), buf_.size());
  std::memcpy(header + 8, &version, 4);
  std::memcpy(header + 12, &kind_u, 4);
  std::memcpy(header + 16, &length, 8);
  std::memcpy(header + 24, &payload_crc, 4);
  const std::uint32_t header_crc = crc32(header, 28);
  std::memcpy(header + 28, &header_crc, 4);

  static std::atomic<unsigned> counter{0};
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) os_error("cannot create", tmp);
  try {
    write_all(fd, header, kHeaderBytes, tmp);
    write_all(fd, buf_.data(), buf_.size(), tmp);
    if (::fsync(fd) != 0) os_error("cannot fsync", tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    os_error("cannot close", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    os_error("cannot rename onto", path);
  }
  // Make the rename durable.
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

PayloadReader::PayloadReader(const std::string& path, IndexKind expected) : path_(path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    throw std::invalid_argument(path + ": " + (S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file") +
                                ", not an index file; pass the path of a file written by save()");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) os_error("cannot open index file", path);
  std::vector<char> all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string where = path + ": ";
  if (all.size() < 8 || std::memcmp(all.data(), kMagic, 8) != 0) {
    throw std::invalid_argument(where + "not a kira index file (bad magic bytes)");
  }
  if (all.size() < kHeaderBytes) throw std::invalid_argument(where + "truncated index file (header incomplete)");
  std::uint32_t version, kind, payload_crc, header_crc;
  std::uint64_t length;
  std::memcpy(&version, all.data() + 8, 4);
  std::memcpy(&kind, all.data() + 12, 4);
  std::memcpy(&length, all.data() + 16, 8);
  std::memcpy(&payload_crc, all.data() + 24, 4);
  std::memcpy(&header_crc, all.data() + 28, 4);
  if (version != kFormatVersion) {
    throw std::invalid_argument(where + "unsupported index format version " + std::to_string(version) +
                                " (this build reads version " + std::to_string(kFormatVersion) + ")");
  }
  if (crc32(all.data(), 28) != header_crc) {
    throw std::invalid_argument(where + "corrupted index file (header checksum mismatch)");
  }
  const char* found = kind_name(kind);
  if (!found) throw std::invalid_argument(where + "unknown index kind " + std::to_string(kind));
  if (kind != static_cast<std::uint32_t>(expected)) {
    throw std::invalid_argument(where + "file holds a " + found + ", not a " +
                                kind_name(static_cast<std::uint32_t>(expected)) + "; use " + found +
                                ".load");
  }
  const std::size_t have = all.size() - kHeaderBytes;
  if (have < length) {
    throw std::invalid_argument(where + "truncated index file (payload has " + std::to_string(have) +
                                " of " + std::to_string(length) + " bytes)");
  }
  if (have > length) {
    throw std::invalid_argument(where + "corrupted index file (" + std::to_string(have - length) +
                                " unexpected bytes after the payload)");
  }
  if (crc32(all.data() + kHeaderBytes, length) != payload_crc) {
    throw std::invalid_argument(where + "corrupted index file (payload checksum mismatch)");
  }
  buf_.assign(all.begin() + kHeaderBytes, all.end());
}

void PayloadReader::finish() const {
  if (pos_ != buf_.size()) corrupt("unexpected bytes after the payload");
}

void PayloadReader::corrupt(const std::string& what) const {
  throw std::invalid_argument(path_ + ": corrupted index file (" + what + ")");
}

}  // namespace kira
