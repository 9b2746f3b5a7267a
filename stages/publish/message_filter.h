// Which published messages a sink of publish's own takes (publish.webhooks, publish.mqtt): its topic
// prefixes and labels, and its cooldown, which holds back a segment that begins again soon after the
// last one sent of its stream and label (a person walking in and out of view is one alert).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "pipeline/config.h"

namespace vapipe {

// Whether a sink's topics entry takes `topic`: one that names a stream ("segments/gate") takes that
// stream's topic alone; with a '*' at its end ("segments/gate*"), every topic that starts so; the rest
// ("segments/", "events", "job/summary") every topic they start.
bool topic_taken(const std::string& entry, const std::string& topic);

class MessageFilter {
 public:
  explicit MessageFilter(const MessageSinkConfig& config);

  // Whether a message on `topic` goes to the sink: one of its topics takes it (topic_taken), and with labels, a
  // segment's or result's label among them (events and the summary go whatever their labels).
  bool wants(const std::string& topic, const nlohmann::json& payload = nlohmann::json()) const;
  // cooldown_s: whether a segment message it wants is held back: a `began` within cooldown_s of the
  // last `began` sent of its stream and label, and that segment's picture and end. Call once per
  // message it wants, in publish order, from one thread.
  bool cooled_down(const nlohmann::json& payload);

 private:
  std::vector<std::string> topics_, labels_;
  double cooldown_s_ = 0;
  // By (stream, label), the last `began` sent: its start_ms and start_capture_unix_ms (0 when it had
  // none); the segments held back, by (stream, label, start_seq), the oldest forgotten past a bound.
  struct SentBegan {
    double start_ms = 0, start_capture_ms = 0;
  };
  std::map<std::pair<std::string, std::string>, SentBegan> last_sent_began_;
  std::set<std::tuple<std::string, std::string, uint64_t>> cooled_segments_;
  std::deque<std::tuple<std::string, std::string, uint64_t>> cooled_order_;
};

}  // namespace vapipe
