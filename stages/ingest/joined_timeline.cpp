#include "stages/ingest/joined_timeline.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "pipeline/config.h"
#include "pipeline/logging.h"

namespace vapipe {

GstClockTimeDiff JoinedTimeline::offset_for(GstClockTime pts, GstClockTime dts, GstClockTime duration) {
  const bool timed = GST_CLOCK_TIME_IS_VALID(duration) && duration > 0;
  if (timed) frame_ = duration;
  // Decode order: the decode time, where the demuxer gave one, goes up frame by frame; presentation
  // times go back at each frame reordered (a B-frame): by a few frames, or by a pause before the frame
  // decoded ahead of it, but never before every one of the kReorderWindow frames before it.
  const bool decode_time = GST_CLOCK_TIME_IS_VALID(dts);
  const GstClockTime decode = decode_time ? dts : pts;
  if (GST_CLOCK_TIME_IS_VALID(decode)) {
    const GstClockTime leap = std::max(kLeap, 8 * frame_);
    const bool back = decode_time ? GST_CLOCK_TIME_IS_VALID(last_decode_) && decode + leap < last_decode_
                                  : !shown_.empty() && decode + leap < shown_.back() &&
                                        std::all_of(shown_.begin(), shown_.end(), [&](GstClockTime t) { return decode <= t; });
    if (back && GST_CLOCK_TIME_IS_VALID(end_)) {
      // The part begins where the one before ended: its first frame decodes there, and no frame of it is
      // shown before its first is decoded.
      offset_ = static_cast<GstClockTimeDiff>(end_) - static_cast<GstClockTimeDiff>(decode);
      ++restarts_;
      joined_at_ = end_;
      went_back_to_ = decode;
      shown_.clear();
    }
    if (decode_time) last_decode_ = decode;
  }
  if (GST_CLOCK_TIME_IS_VALID(pts)) {
    shown_.push_back(pts);
    if (shown_.size() > kReorderWindow) shown_.pop_front();
    const GstClockTimeDiff end = static_cast<GstClockTimeDiff>(pts) + offset_ + static_cast<GstClockTimeDiff>(timed ? duration : 0);
    if (end >= 0 && (!GST_CLOCK_TIME_IS_VALID(end_) || static_cast<GstClockTime>(end) > end_)) {
      end_ = static_cast<GstClockTime>(end);
    }
  }
  return offset_;
}

namespace {

struct TimelineProbe {
  TimelineProbe(TimelineRestarts* r, std::string id, bool say) : restarts(r), stream_id(std::move(id)), say_first(say) {}
  JoinedTimeline timeline;
  TimelineRestarts* restarts;
  std::string stream_id;
  bool say_first;
};

GstClockTime shifted(GstClockTime t, GstClockTimeDiff offset) {
  if (!GST_CLOCK_TIME_IS_VALID(t)) return t;
  const GstClockTimeDiff moved = static_cast<GstClockTimeDiff>(t) + offset;
  return moved < 0 ? 0 : static_cast<GstClockTime>(moved);
}

// The frame's offset on the one timeline; a new part is counted and, the pad's first, said.
GstClockTimeDiff offset_of(TimelineProbe& probe, GstBuffer* buffer) {
  const uint64_t before = probe.timeline.restarts();
  const GstClockTimeDiff offset =
      probe.timeline.offset_for(GST_BUFFER_PTS(buffer), GST_BUFFER_DTS(buffer), GST_BUFFER_DURATION(buffer));
  if (probe.timeline.restarts() == before) return offset;
  const auto joined_at = static_cast<int64_t>(probe.timeline.last_joined_at());
  int64_t first = -1;
  probe.restarts->first_joined_at_ns.compare_exchange_strong(first, joined_at);
  if (probe.restarts->count.fetch_add(1) == 0 && probe.say_first) {
    VAPIPE_LOG_WARN("stream '{}': its timestamps start over at {} (back to {}: files joined end to end?): its frames "
                    "from there are timed on from {}, as one timeline", probe.stream_id, media_time_text(joined_at),
                    media_time_text(static_cast<int64_t>(probe.timeline.last_went_back_to())),
                    media_time_text(joined_at));
  }
  return offset;
}

void retime(GstBuffer* buffer, GstClockTimeDiff offset) {
  GST_BUFFER_PTS(buffer) = shifted(GST_BUFFER_PTS(buffer), offset);
  GST_BUFFER_DTS(buffer) = shifted(GST_BUFFER_DTS(buffer), offset);
}

GstPadProbeReturn on_decoder_input(GstPad*, GstPadProbeInfo* info, gpointer user) {
  auto& probe = *static_cast<TimelineProbe*>(user);
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_EVENT_FLUSH) {
    GstEvent* event = GST_PAD_PROBE_INFO_EVENT(info);
    if (event && GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP) probe.timeline.reset();
    return GST_PAD_PROBE_OK;
  }
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
    GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
    if (!buffer) return GST_PAD_PROBE_OK;
    if (const GstClockTimeDiff offset = offset_of(probe, buffer); offset != 0) {
      buffer = gst_buffer_make_writable(buffer);
      retime(buffer, offset);
      GST_PAD_PROBE_INFO_DATA(info) = buffer;
    }
    return GST_PAD_PROBE_OK;
  }
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER_LIST) {
    GstBufferList* list = GST_PAD_PROBE_INFO_BUFFER_LIST(info);
    if (!list) return GST_PAD_PROBE_OK;
    for (guint i = 0; i < gst_buffer_list_length(list); ++i) {
      if (const GstClockTimeDiff offset = offset_of(probe, gst_buffer_list_get(list, i)); offset != 0) {
        if (!gst_buffer_list_is_writable(list)) {
          list = gst_buffer_list_make_writable(list);
          GST_PAD_PROBE_INFO_DATA(info) = list;
        }
        retime(gst_buffer_list_get_writable(list, i), offset);
      }
    }
  }
  return GST_PAD_PROBE_OK;
}

}  // namespace

void join_restarted_timelines(GstPad* decoder_sink, TimelineRestarts* restarts, const std::string& stream_id,
                              bool say_first) {
  gst_pad_add_probe(decoder_sink,
                    static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST |
                                                 GST_PAD_PROBE_TYPE_EVENT_FLUSH),
                    &on_decoder_input, new TimelineProbe(restarts, stream_id, say_first),
                    [](gpointer probe) { delete static_cast<TimelineProbe*>(probe); });
}

std::string timeline_restarts_warning(const TimelineRestarts& restarts) {
  const uint64_t count = restarts.count.load();
  if (count == 0) return "";
  const std::string first = media_time_text(restarts.first_joined_at_ns.load());
  return "its timestamps started over " + std::string(count == 1 ? "once" : std::to_string(count) + " times") +
         ", first at " + first + " (files joined end to end?): its pts_ms go on across them as one timeline, which "
         "the file's own clock does not have (vapipe segments --frames and --clips read it on that timeline, from "
         "its start)";
}

}  // namespace vapipe
