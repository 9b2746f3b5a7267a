#include "pipeline/results_path.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <filesystem>

namespace vapipe {

bool results_path_is_timed(const std::string& path) {
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    if (path[i] != '%') continue;
    if (path[i + 1] == '%') {
      ++i;
      continue;
    }
    return true;
  }
  return false;
}

Status check_timed_results_path(const std::string& path) {
  static const std::string kDateOrTime = "YymdejHIMpUWVGguwFTRaAbBh";
  bool any = false;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '%') continue;
    if (i + 1 == path.size()) return InvalidArgument("'" + path + "' ends with a lone '%' (write %% for a '%')");
    const char c = path[++i];
    if (c == '%') continue;
    if (kDateOrTime.find(c) == std::string::npos) {
      return InvalidArgument("'" + path + "': %" + std::string(1, c) +
                             " is not a conversion that names a date or an hour (%Y %m %d %H ...; one file a second "
                             "or a file named by the time zone would be no use)");
    }
    any = true;
  }
  if (!any) return InvalidArgument("'" + path + "' holds no date or time conversion");
  return Status::Ok();
}

std::string results_file_at(const std::string& path, int64_t unix_s) {
  const time_t t = static_cast<time_t>(unix_s);
  std::tm local{};
  localtime_r(&t, &local);
  std::string out(path.size() + 256, '\0');
  const size_t n = std::strftime(out.data(), out.size(), path.c_str(), &local);
  out.resize(n);
  return n > 0 ? out : path;
}

std::vector<TimedResultsFile> timed_results_files(const std::string& path) {
  std::vector<TimedResultsFile> files;
  if (!results_path_is_timed(path)) return files;
  const std::string lock = results_lock_path(path);
  const size_t slash = lock.rfind('/');
  const std::filesystem::path folder = slash == std::string::npos ? "." : lock.substr(0, slash + 1);
  // Only as deep as the pattern's own folders ("%Y/%m/x-%d.jsonl": two): a fixed folder such as
  // /var/lib is not walked whole.
  const std::string below = slash == std::string::npos ? path : path.substr(slash + 1);
  const int depth = static_cast<int>(std::count(below.begin(), below.end(), '/'));
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(folder, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() >= depth && it->is_directory(ec)) it.disable_recursion_pending();
    if (!it->is_regular_file(ec) || it.depth() != depth) continue;
    std::string name = it->path().string();
    if (slash == std::string::npos && name.rfind("./", 0) == 0) name = name.substr(2);  // as a relative pattern names it
    std::tm tm{};
    const char* rest = strptime(name.c_str(), path.c_str(), &tm);
    if (!rest || *rest != '\0') continue;
    tm.tm_isdst = -1;
    const time_t t = mktime(&tm);
    if (t == static_cast<time_t>(-1) || results_file_at(path, t) != name) continue;
    files.push_back({static_cast<int64_t>(t), name});
  }
  std::sort(files.begin(), files.end(),
            [](const TimedResultsFile& a, const TimedResultsFile& b) { return a.unix_s < b.unix_s; });
  return files;
}

std::string results_lock_path(const std::string& path) {
  if (!results_path_is_timed(path)) return path;
  // The deepest folder that holds no conversion; the rest of the pattern names the lock.
  const size_t first = path.find('%');
  const size_t slash = path.rfind('/', first);
  const std::string folder = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string name = path.substr(slash == std::string::npos ? 0 : slash + 1);
  std::replace(name.begin(), name.end(), '%', '_');
  std::replace(name.begin(), name.end(), '/', '_');
  return folder + "." + name + ".lock";
}

}  // namespace vapipe
