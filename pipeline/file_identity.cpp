#include "pipeline/file_identity.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <vector>

namespace vapipe {

std::string file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing " + std::to_string(errno);
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ":" +
         std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec);
}

size_t head_bytes_then(int64_t file_bytes_then) {
  return file_bytes_then < 0 ? kFileHeadBytes : std::min(kFileHeadBytes, static_cast<size_t>(file_bytes_then));
}

std::string file_head_hash(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::vector<char> head(std::min(max_bytes, kFileHeadBytes));
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  if (in.bad()) return "";
  uint64_t hash = 14695981039346656037ull;
  for (std::streamsize i = 0; i < in.gcount(); ++i) {
    hash = (hash ^ static_cast<unsigned char>(head[static_cast<size_t>(i)])) * 1099511628211ull;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace vapipe
