#include "stages/publish/message_filter.h"

#include <algorithm>

#include "pipeline/json_fields.h"

namespace vapipe {

bool topic_taken(const std::string& entry, const std::string& topic) {
  // A stream's topic whole ("segments/gate" is not "segments/gate2"'s: a webhook meant for one camera got
  // another's; found 2026-12-07), a '*' at its end for every stream whose id starts so; the rest
  // ("segments/", "events", "job/summary") as prefixes.
  const size_t slash = entry.find('/');
  if (!entry.empty() && entry.back() == '*') return topic.compare(0, entry.size() - 1, entry, 0, entry.size() - 1) == 0;
  if (slash != std::string::npos && slash + 1 < entry.size() && entry.rfind("job/", 0) != 0) return topic == entry;
  return topic.compare(0, entry.size(), entry) == 0;
}

MessageFilter::MessageFilter(const MessageSinkConfig& config)
    : topics_(config.topics), labels_(config.labels), cooldown_s_(config.cooldown_s) {}

bool MessageFilter::wants(const std::string& topic, const nlohmann::json& payload) const {
  if (!std::any_of(topics_.begin(), topics_.end(), [&](const std::string& t) { return topic_taken(t, topic); })) {
    return false;
  }
  if (labels_.empty()) return true;
  const std::string schema = text_field(payload, "schema");
  if (schema != "vapipe.segment" && schema != "vapipe.result") return true;  // events, the summary
  const std::string label = text_field(payload, "label");
  return std::find(labels_.begin(), labels_.end(), label) != labels_.end();
}

bool MessageFilter::cooled_down(const nlohmann::json& payload) {
  if (cooldown_s_ <= 0 || text_field(payload, "schema") != "vapipe.segment") return false;
  const std::string stream = text_field(payload, "stream_id"), label = text_field(payload, "label");
  const auto start_seq = count_field(payload, "start_seq");
  if (!start_seq) return false;
  auto segment = std::make_tuple(stream, label, *start_seq);
  bool held = cooled_segments_.count(segment) > 0;
  if (!held && text_field(payload, "event") == "began") {
    const auto start_ms = number_field(payload, "start_ms");
    const double start_capture_ms = number_field(payload, "start_capture_unix_ms").value_or(0);
    const auto last = last_sent_began_.find({stream, label});
    if (start_ms && last != last_sent_began_.end()) {
      const SentBegan& sent = last->second;
      if (*start_ms >= sent.start_ms) {
        // By the stream's own time: an archive job read at 10x real time keeps the cooldown of the video.
        held = *start_ms - sent.start_ms < cooldown_s_ * 1000;
      } else if (start_capture_ms > 0 && sent.start_capture_ms > 0 && start_capture_ms >= sent.start_capture_ms) {
        // The stream's timestamps started over: a live camera that reconnected (or a looped file). A
        // blip of its network is not a new visit: by this machine's clock, at which a live stream's
        // frames are received.
        held = start_capture_ms - sent.start_capture_ms < cooldown_s_ * 1000;
      }
    }
    if (held) {
      cooled_segments_.insert(segment);
      cooled_order_.push_back(segment);
      if (cooled_order_.size() > 4096) {  // a bound: the oldest held-back segment is long over
        cooled_segments_.erase(cooled_order_.front());
        cooled_order_.pop_front();
      }
    } else if (start_ms) {
      last_sent_began_[{stream, label}] = SentBegan{*start_ms, start_capture_ms};
    }
  }
  return held;
}

}  // namespace vapipe
