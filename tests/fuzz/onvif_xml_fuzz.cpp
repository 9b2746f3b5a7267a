// What cameras answer `vapipe discover` (WS-Discovery probe matches, SOAP responses), read by its own
// small XML parser: any answer must give a result or an error, never a crash, from the parser and
// from each reader of a parsed document.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli/onvif.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)vapipe::onvif::parse_probe_matches(text);
  auto doc = vapipe::onvif::parse_xml(text);
  if (!doc.ok()) return 0;
  (void)vapipe::onvif::fault_of(*doc);
  (void)vapipe::onvif::device_utc_time(*doc);
  (void)vapipe::onvif::media_service_of(*doc);
  (void)vapipe::onvif::profiles_of(*doc);
  (void)vapipe::onvif::stream_uri_of(*doc);
  (void)vapipe::onvif::soap_action_of(text);
  return 0;
}
