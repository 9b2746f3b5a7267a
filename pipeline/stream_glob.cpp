#include "pipeline/stream_glob.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <set>
#include <utility>

#include <sys/stat.h>

#include "pipeline/stable_hash.h"

namespace vapipe {
namespace {

bool has_wildcard(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// The part of a pattern after its base folder, as a regular expression over relative paths.
Result<std::regex> glob_regex(const std::string& rest) {
  std::string re;
  for (size_t i = 0; i < rest.size(); ++i) {
    const char c = rest[i];
    if (c == '*' && i + 1 < rest.size() && rest[i + 1] == '*') {
      const bool folder = i + 2 < rest.size() && rest[i + 2] == '/';
      re += folder ? "(?:.*/)?" : ".*";  // "**/": any folders, none included
      i += folder ? 2 : 1;
    } else if (c == '*') {
      re += "[^/]*";
    } else if (c == '?') {
      re += "[^/]";
    } else if (c == '[') {
      const size_t close = rest.find(']', i + 1);
      if (close == std::string::npos) return InvalidArgument("'[' without its ']'");
      std::string set = rest.substr(i + 1, close - i - 1);
      if (!set.empty() && set[0] == '!') set[0] = '^';
      re += "[" + set + "]";
      i = close;
    } else {
      if (std::string("\\^$.|+(){}").find(c) != std::string::npos) re += '\\';
      re += c;
    }
  }
  try {
    return std::regex(re, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return InvalidArgument(std::string("not a pattern vapipe understands: ") + e.what());
  }
}

}  // namespace

std::string glob_base_dir(const std::string& pattern) {
  std::filesystem::path base;
  for (const auto& part : std::filesystem::path(pattern).parent_path()) {
    if (has_wildcard(part.string())) break;
    base /= part;
  }
  return base.string();
}

Result<std::vector<std::string>> expand_file_glob(const std::string& pattern, size_t* hidden,
                                                  std::vector<std::string>* unreadable) {
  const std::string base = glob_base_dir(pattern);
  std::string rest = pattern.substr(std::min(pattern.size(), base.size()));
  while (!rest.empty() && rest[0] == '/') rest.erase(0, 1);
  VAPIPE_ASSIGN_OR_RETURN(std::regex re, glob_regex(rest));
  std::vector<std::string> files;
  std::error_code ec;
  if (!std::filesystem::is_directory(base, ec)) return NotFound("folder " + base + " does not exist");
  const bool recursive = rest.find('/') != std::string::npos || rest.find("**") != std::string::npos;
  // Hidden names (".x") only for a pattern that has a '.'-component of its own.
  const bool dot_components = (!rest.empty() && rest[0] == '.') || rest.find("/.") != std::string::npos;
  auto is_hidden = [](const std::string& rel) { return rel[0] == '.' || rel.find("/.") != std::string::npos; };
  size_t hidden_matches = 0;
  auto consider = [&](const std::filesystem::directory_entry& e) {
    std::error_code kind;  // a file gone since the listing is left out, not the listing's error
    if (!e.is_regular_file(kind)) return;
    const std::string rel = e.path().lexically_relative(base).generic_string();
    if (!std::regex_match(rel, re)) return;
    if (!dot_components && is_hidden(rel)) {
      ++hidden_matches;
      return;
    }
    files.push_back(e.path().lexically_normal().string());
  };
  // The folders under it, those linked to included (an archive's cameras linked in from a share), each
  // once: a link back up is not followed round. One that cannot be listed is said (`unreadable`), not
  // passed over in silence (a camera's folder of another owner, mode 700).
  std::set<std::pair<dev_t, ino_t>> listed;
  std::vector<std::filesystem::path> folders{base};
  while (!folders.empty()) {
    const std::filesystem::path folder = std::move(folders.back());
    folders.pop_back();
    struct stat st {};
    if (::stat(folder.c_str(), &st) == 0 && !listed.emplace(st.st_dev, st.st_ino).second) continue;
    const bool top = folder == std::filesystem::path(base);
    std::error_code list_error;
    std::vector<std::filesystem::path> below;
    // increment(ec), not a range-for: its ++ throws on a read error (a share that fails mid-listing).
    for (std::filesystem::directory_iterator it(folder, list_error), end; !list_error && it != end; it.increment(list_error)) {
      std::error_code kind;
      if (recursive && it->is_directory(kind)) below.push_back(it->path());
      consider(*it);
    }
    if (list_error && top) {
      ec = list_error;
      break;
    }
    if (list_error && unreadable) unreadable->push_back(folder.lexically_normal().string() + " (" + list_error.message() + ")");
    // Depth first, in name order (the result is sorted anyway).
    std::sort(below.rbegin(), below.rend());
    for (auto& f : below) folders.push_back(std::move(f));
  }
  if (ec) return Unavailable("cannot list " + base + ": " + ec.message());
  std::sort(files.begin(), files.end());
  if (hidden) *hidden = hidden_matches;
  return files;
}

std::string stream_id_for_file(const std::string& base_dir, const std::string& file, const std::string& prefix) {
  std::filesystem::path rel = std::filesystem::path(file).lexically_relative(base_dir);
  rel.replace_extension();
  std::string id = prefix + rel.generic_string();
  for (char& c : id) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) c = '-';
  }
  constexpr size_t kMax = 64;
  if (id.size() > kMax) {
    const uint32_t h = fnv1a32(file);  // of the whole path: distinct files keep distinct ids
    char hash[9];
    std::snprintf(hash, sizeof hash, "%08x", h);
    id = std::string(hash) + "-" + id.substr(id.size() - (kMax - 9));
  }
  return id;
}

}  // namespace vapipe
