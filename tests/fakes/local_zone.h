// This process's local time zone set for one test (TZ, as a POSIX rule: no zone files needed), and
// put back as it was when the test ends.
#pragma once

#include <cstdlib>
#include <ctime>
#include <string>

namespace vapipe::testing {

class LocalZone {
 public:
  explicit LocalZone(const char* rule) {
    if (const char* before = std::getenv("TZ")) saved_ = before;
    had_ = std::getenv("TZ") != nullptr;
    setenv("TZ", rule, 1);
    tzset();
  }
  ~LocalZone() {
    had_ ? setenv("TZ", saved_.c_str(), 1) : unsetenv("TZ");
    tzset();
  }
  LocalZone(const LocalZone&) = delete;
  LocalZone& operator=(const LocalZone&) = delete;

 private:
  std::string saved_;
  bool had_ = false;
};

}  // namespace vapipe::testing
