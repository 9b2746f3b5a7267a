#include "pipeline/token_file.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>

#include "pipeline/logging.h"

namespace vapipe {

namespace {

// A UTF-8 byte order mark, as Windows Notepad starts a file with: not part of the secret (a broker
// refused the password, "not authorised", with nothing to say why).
void drop_byte_order_mark(std::string& line) {
  if (line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
}

}  // namespace

void warn_if_others_may_read(const std::string& path, const char* what) {
  // A stage of a `vapipe run` reads the config again: the run has said it (6 times in a job before).
  if (const char* supervisor = std::getenv("VAPIPE_SUPERVISOR_PID"); supervisor && *supervisor) return;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || (st.st_mode & 077) == 0) return;
  // Once per file in a process (it is read again when it changes, and at each reload).
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (!said.insert(path).second) return;
  VAPIPE_LOG_WARN("{} can be read by other users; `chmod 600 {}` keeps the {} private", path, path, what);
}

Result<std::string> read_token_line(const std::string& path, const std::function<std::string(size_t)>& size_error) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read the token file " + path);
  warn_if_others_may_read(path, "token");
  std::string line;
  std::getline(in, line);
  drop_byte_order_mark(line);
  const auto first = line.find_first_not_of(" \t\r");
  const auto last = line.find_last_not_of(" \t\r");
  const std::string token = first == std::string::npos ? "" : line.substr(first, last - first + 1);
  if (const std::string why = size_error(token.size()); !why.empty()) return InvalidArgument(path + ":1: " + why);
  for (unsigned char ch : token) {
    if (ch < 0x21 || ch > 0x7e) {
      return InvalidArgument(path + ":1: the token must be printable ASCII without blanks (it travels in an HTTP "
                             "header)");
    }
  }
  return token;
}

Result<std::string> read_webhook_token_file(const std::string& path) {
  return read_token_line(path, [](size_t size) {
    return size == 0 ? "expected the token on the first line, found none" : std::string();
  });
}

Result<std::string> read_password_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read the password file " + path);
  warn_if_others_may_read(path, "password");
  std::string line;
  std::getline(in, line);
  drop_byte_order_mark(line);
  if (!line.empty() && line.back() == '\r') line.pop_back();  // written on Windows
  if (line.empty()) return InvalidArgument(path + ":1: expected the password on the first line, found none");
  for (unsigned char ch : line) {
    if (ch < 0x20 || ch == 0x7f) return InvalidArgument(path + ":1: the password holds a control character");
  }
  return line;
}

}  // namespace vapipe
