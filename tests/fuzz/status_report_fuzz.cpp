// `vapipe status` reads whatever answers on the address it is given: publish's /healthz of this or
// another version, or another program. Any JSON must give a report or an error naming the URL, never
// an exception or a crash (nlohmann's value() and get() throw on fields of another type).
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli/status_report.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto h = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (h.is_discarded()) return 0;  // not JSON: status_command says so before a report is asked
  const auto report = vapipe::cli::status_report(h, "http://fuzz:9100/healthz");
  if (!report.ok()) {
    VAPIPE_FUZZ_CHECK(report.status().message().rfind("http://fuzz:9100/healthz: ", 0) == 0, "an error names the URL");
  } else {
    VAPIPE_FUZZ_CHECK(!report->empty() && report->back() == '\n', "a report is whole lines");
  }
  return 0;
}
