// The config's and the bus's small text formats, each parsed from the same bytes: media times
// ("1:30:00.000"), TLS fingerprints, host:port, ${NAME} expansion, dates and times, recorded_at's
// forms and a file name read by a strptime format, picture requests (JSON from publish), a URI's host
// and port (ingest's own connection to a camera), a webhook's http(s) URL. Any text
// gives a value or an error, never a crash; a media time read back from its own text is the same to the
// nearest millisecond.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pipeline/config.h"
#include "pipeline/http_url.h"
#include "pipeline/picture_requests.h"
#include "pipeline/recorded_at.h"
#include "stages/ingest/network_reachability.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (auto t = vapipe::parse_media_time(text); t.ok() && *t >= 0) {
    auto again = vapipe::parse_media_time(vapipe::media_time_text(*t));
    VAPIPE_FUZZ_CHECK(again.ok(), "a media time's own text parses");
    VAPIPE_FUZZ_CHECK(*again - *t <= 500'000 && *t - *again <= 500'000, "a media time's text is it to the millisecond");
  }
  (void)vapipe::parse_tls_fingerprint(text);
  std::string host;
  int port = 0;
  (void)vapipe::split_host_port(text, &host, &port);
  (void)vapipe::expand_environment(text);
  (void)vapipe::parse_date_time(text);
  (void)vapipe::parse_recorded_at(text);
  // The first line a strptime format, the rest a file name.
  if (const size_t newline = text.find('\n'); newline != std::string::npos) {
    (void)vapipe::time_in_file_name(text.substr(newline + 1), text.substr(0, newline));
  }
  (void)vapipe::decode_picture_request(text);
  if (auto authority = vapipe::uri_authority(text)) {
    VAPIPE_FUZZ_CHECK(!authority->host.empty() && authority->port > 0, "a URI's authority has a host and a port");
  }
  if (auto url = vapipe::parse_http_url(text); url.ok()) {
    VAPIPE_FUZZ_CHECK(!url->host.empty() && url->port >= 1 && url->port <= 65535, "a URL has a host and a port");
    VAPIPE_FUZZ_CHECK(!url->target.empty() && url->target.front() == '/', "a request target starts with '/'");
    for (unsigned char c : url->target) VAPIPE_FUZZ_CHECK(c > 0x20 && c != 0x7f, "a request target has no blank");
    auto again = vapipe::parse_http_url(url->origin());
    VAPIPE_FUZZ_CHECK(again.ok() && again->host == url->host && again->port == url->port && again->tls == url->tls,
                      "a URL's origin names its host and port again");
  }
  if (auto broker = vapipe::parse_mqtt_url(text); broker.ok()) {
    VAPIPE_FUZZ_CHECK(!broker->host.empty() && broker->port >= 1 && broker->port <= 65535, "a broker has a host and a port");
    VAPIPE_FUZZ_CHECK(broker->target == "/", "a broker's URL has no path");
    auto again = vapipe::parse_mqtt_url(broker->origin());
    VAPIPE_FUZZ_CHECK(again.ok() && again->host == broker->host && again->port == broker->port && again->tls == broker->tls,
                      "a broker's origin names its host and port again");
    VAPIPE_FUZZ_CHECK(!vapipe::parse_http_url(text).ok(), "a URL is a broker's or a webhook's, not both");
  }
  return 0;
}
