#include "stages/ingest/decoder_input_gate.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include <gst/video/video.h>

#include "pipeline/logging.h"
#include "stages/ingest/h264_reference_lists.h"
#include "stages/ingest/h26x_access_unit.h"
#include "stages/ingest/mpeg_video_gaps.h"

namespace vapipe {

void RecoveryWatch::start(GstClockTime pts, uint32_t frames) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!GST_CLOCK_TIME_IS_VALID(pts)) {
    state_ = State::kIdle;  // nothing to compare pictures with: the decoder's own judgement stands
    return;
  }
  whole_from_ = pts;
  remaining_ = std::min(frames, kMaxFrames);
  state_ = remaining_ == 0 ? State::kKnown : State::kCounting;
}

void RecoveryWatch::input(GstClockTime pts) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (state_ != State::kCounting) return;
  if (GST_CLOCK_TIME_IS_VALID(pts)) whole_from_ = std::max(whole_from_, pts);
  if (--remaining_ == 0) state_ = State::kKnown;
}

bool RecoveryWatch::admit_output(GstClockTime pts) {
  std::lock_guard<std::mutex> lock(mutex_);
  switch (state_) {
    case State::kIdle:
      return true;
    case State::kCounting:
      return false;
    case State::kKnown:
      if (GST_CLOCK_TIME_IS_VALID(pts) && pts < whole_from_) return false;
      state_ = State::kIdle;  // the first whole picture: the rest follow it
      return true;
  }
  return true;
}

std::string frames_without_pictures(const DecoderInputCounters& counters) {
  if (counters.field_coded.load()) return "";
  const uint64_t expected = counters.expected_pictures.load(), pictures = counters.pictures.load();
  if (pictures >= expected) return "";
  const uint64_t missing = expected - pictures;
  if (missing < 2 || missing * 100 < expected) return "";
  return "its decoder gave no picture for " + std::to_string(missing) + " of its " + std::to_string(expected) +
         " frames (damaged data in the file?): those frames have no results";
}

bool is_intra_only_codec(const GstCaps* caps) {
  if (!caps || gst_caps_get_size(caps) == 0) return false;
  // Codecs whose every frame is coded alone, by their definition (not by an encoder's setting, as an
  // all-intra H.264 stream is: that one's parser marks its frames key frames itself).
  static constexpr const char* kIntraOnly[] = {
      "image/jpeg", "image/png",      "image/x-j2c",   "image/x-jpc",     "image/jp2",        "image/x-jpc-striped",
      "image/tiff", "image/bmp",      "video/x-dv",    "video/x-prores",  "video/x-dnxhd",    "video/x-ffv",
      "video/x-huffyuv", "video/x-cineform", "video/x-raw",
  };
  const char* name = gst_structure_get_name(gst_caps_get_structure(caps, 0));
  return std::any_of(std::begin(kIntraOnly), std::end(kIntraOnly), [&](const char* n) { return g_str_equal(name, n); });
}

namespace {

struct ProbeState {
  ProbeState(const std::atomic<bool>* keyframes_only, DecoderInputCounters* c, std::string id, bool exact)
      : gate(keyframes_only->load()),
        keyframes_only(keyframes_only),
        counters(c),
        stream_id(std::move(id)),
        exact_timestamps(exact) {}
  DecoderInputGate gate;
  const std::atomic<bool>* keyframes_only;  // the stream's, as a reload leaves it
  DecoderInputCounters* counters;
  std::string stream_id;
  bool exact_timestamps;  // the decoder's pictures keep their frames' timestamps (see gate_decoder_input)
  std::optional<AccessUnitReader> reader;  // from the input's caps: H.264 and H.265
  // Ditto: H.264's reference lists (RefPicListGaps), H.265's reference picture sets (RefPicSetGaps).
  std::unique_ptr<ReferencePictures> references;
  bool h264 = false;  // from the input's caps too (see follow_losses)
  std::shared_ptr<FramesAfterLostKeyFrames> lost_key_frames;  // (may be null)
  std::optional<TemporalReferenceGaps> temporal_references;  // ditto: MPEG-1 and MPEG-2 video
  bool intra_only = false;                 // from the input's caps too
  bool vp8 = false;                        // ditto: its frames say whether they are shown
  bool theora = false;                     // ditto: its headers are packets of their own
  GstSegment segment;                      // the input's latest (undefined format until one came)
  RecoveryWatch recovery;
  // The timestamps of the frames passed that should each give a picture, until it comes (or a later
  // one does: counters->undecoded). Input and output run on different threads.
  std::mutex pending_mutex;
  std::multiset<GstClockTime> pending;
  // The last picture's timestamp: GstVideoDecoder gives a picture whose frame's timestamp is below it
  // that one again (it keeps them from going back), so a picture at it may be of an earlier frame.
  GstClockTime last_picture = GST_CLOCK_TIME_NONE;
  std::atomic<bool> recovering{false};  // passed from a recovery point, or flushed; no picture since
  // Input thread: a frame passed since the decoder last started (a connection, a flush); the frames
  // passed since data was lost, until a key frame (see gate_decoder_input).
  bool passed_any = false;
  bool after_loss = false;
  // Input thread: a segment came since the last frame (see follow_losses).
  bool new_segment = false;
  // The damaged stretches whose pictures may still come, each the range of its frames' timestamps, the
  // last one open while its frames are passed (under pending_mutex). Ranges, not each frame's timestamp:
  // a decoder reordering B-frames of a camera whose RTP timestamps jitter sends some pictures under
  // another frame's timestamp (GstVideoDecoder keeps them from going back: 1.033 s in, 1.045 s out).
  struct Stretch {
    GstClockTime first, last;
  };
  std::deque<Stretch> damaged;
  bool stretch_open = false;
  // The latest whole pictures' timestamps, where damage is followed picture by picture: a damaged
  // stretch's range may hold some (a B-frame decoded between damaged pictures shown around it), which
  // are not marked.
  std::deque<GstClockTime> whole_within;
  // Input thread: after a loss, the frames still to come before an intra-refreshed stream's pictures
  // are whole (its recovery point's count); the timestamp of the open GOP's key frame that ended a
  // damaged stretch, while its leading pictures (shown before it, referring to the GOP before) come.
  uint32_t refresh_left = 0;
  GstClockTime open_key_pts = GST_CLOCK_TIME_NONE;
};

// At most this many frames waited for: a decoder that holds more (or sends other timestamps than it
// took) is not followed further back.
constexpr size_t kMaxPending = 512;
// At most this many damaged stretches waited for.
constexpr size_t kMaxStretches = 64;

void expect_picture_at(ProbeState& state, GstClockTime pts) {
  if (!GST_CLOCK_TIME_IS_VALID(pts)) return;
  std::lock_guard<std::mutex> lock(state.pending_mutex);
  state.pending.insert(pts);
  if (state.pending.size() > kMaxPending) state.pending.erase(state.pending.begin());
}

// Whether the picture at `pts` is of a frame passed after a loss: within a damaged stretch's range. The
// stretches wholly before it are forgotten (decoders send pictures in presentation order).
bool picture_is_damaged(ProbeState& state, GstClockTime pts) {
  if (!GST_CLOCK_TIME_IS_VALID(pts)) return false;
  std::lock_guard<std::mutex> lock(state.pending_mutex);
  auto& stretches = state.damaged;
  while (!stretches.empty() && stretches.front().last < pts && !(stretches.size() == 1 && state.stretch_open)) {
    stretches.pop_front();
  }
  if (auto whole = std::find(state.whole_within.begin(), state.whole_within.end(), pts); whole != state.whole_within.end()) {
    state.whole_within.erase(whole);
    return false;
  }
  return std::any_of(stretches.begin(), stretches.end(),
                     [&](const ProbeState::Stretch& s) { return s.first <= pts && pts <= s.last; });
}

// Whether no later frame refers to this one, as its codec says (H.264, H.265, MPEG-1/2); false when
// it cannot be told.
bool is_non_reference(const ProbeState& state, GstBuffer* buffer) {
  if (state.reader) return !state.reader->read(buffer).reference;
  return state.temporal_references && TemporalReferenceGaps::is_b_frame(buffer);
}

// The picture at `pts` is damaged: within the open stretch's range, or a new stretch's (pending_mutex
// held). Ranges, not each frame's timestamp: see ProbeState::damaged.
void mark_in_stretch(ProbeState& state, GstClockTime pts) {
  if (!GST_CLOCK_TIME_IS_VALID(pts)) return;
  if (!state.stretch_open || state.damaged.empty()) {
    state.damaged.push_back({pts, pts});
    state.stretch_open = true;
    if (state.damaged.size() > kMaxStretches) state.damaged.pop_front();
    return;
  }
  state.damaged.back().first = std::min(state.damaged.back().first, pts);
  state.damaged.back().last = std::max(state.damaged.back().last, pts);
}

// H.264 or H.265, its picture's header read: damage is followed picture by picture (the lists or sets
// of ReferencePictures): a picture is damaged when its data was lost (`lost`: DISCONT) or a reference
// picture it uses is damaged or never passed (H.264: a frame_num gap's frames, which the decoder
// conceals), and the pictures that use it are then. So a lost B-frame that a few others use (a
// B-pyramid) damages those few, not every picture to the next key frame; a lost P-frame damages the
// P-frames after it, each using the one before, and not an I-frame after it. An intra-refreshed stream (its
// P-frames use each other to the end) is whole again its recovery point's count of frames after a
// recovery point. Consecutive damaged pictures (in decoding order) make one stretch of timestamps, as
// the stretch model's do (a decoder may give a picture another frame's timestamp).
void follow_picture_damage(ProbeState& state, GstBuffer* buffer, DecoderInputGate::Frame frame, bool lost, GstClockTime pts) {
  ReferencePictures& references = *state.references;
  bool damaged = lost || references.last_uses_damaged();
  if (frame != DecoderInputGate::Frame::kDelta) {
    const AccessUnitKind kind = state.reader ? state.reader->read(buffer) : AccessUnitKind{};
    state.refresh_left = kind.picture == AccessUnitKind::Picture::kPartial ? kind.recovery_frames.value_or(0) : 0;
  } else if (lost) {
    state.refresh_left = 0;  // a new loss: whole from the next recovery point's count on
  } else if (state.refresh_left > 0 && --state.refresh_left == 0) {
    references.heal();  // the count's last picture is whole, and so are those it is used by
    damaged = false;
  }
  if (damaged) references.damage_last();
  std::lock_guard<std::mutex> lock(state.pending_mutex);
  if (!damaged) {
    state.stretch_open = false;
    // (Kept whether or not a stretch's range holds it yet: a damaged picture decoded after it may widen one.)
    if (GST_CLOCK_TIME_IS_VALID(pts)) {
      state.whole_within.push_back(pts);
      if (state.whole_within.size() > kMaxPending) state.whole_within.pop_front();
    }
    return;
  }
  mark_in_stretch(state, pts);
}

// Follows the losses in what passes to the decoder: `frame` was passed. A loss is a DISCONT (RTP's: the
// depayloader marks the frame it was assembling when the gap came, a key frame too, whose lost slice
// smears its whole GOP), or a frame that uses reference frames never passed (an MPEG-TS stream's lost
// packets: tsdemux drops the frame they were in and marks nothing), told by H.264's frame_num,
// H.265's reference picture sets or MPEG-2's temporal_reference.
// The DISCONT of the first frame after a new segment (not a flush's) is no loss either: the parser marks
// it so (h264parse, a GstBaseParse). matroskademux sends a second segment, from 0, when a file's audio
// starts before its video (ffmpeg's and OBS's Matroska files with AAC or Opus): the video's third frame
// came marked, and 28 of its 30 pictures were "damaged" (found 2026-12-07).
void follow_losses(ProbeState& state, GstBuffer* buffer, DecoderInputGate::Frame frame, DecoderInputGate::Verdict verdict,
                   bool after_segment) {
  const bool first = !std::exchange(state.passed_any, true);
  // Read in decoding order, every frame passed.
  const bool skipped = (state.references && state.references->missing_before(buffer)) ||
                       (state.temporal_references && state.temporal_references->missing_before(buffer));
  const bool discont = !first && !after_segment && GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DISCONT);
  const GstClockTime pts = GST_BUFFER_PTS(buffer);
  // After a key frame the demuxer dropped (H.264: its frame_num need not show an IDR frame's loss; H.265's
  // sets name what is missing): what the frames after it refer to is unknown, a stretch.
  const bool after_lost_key = !first && frame == DecoderInputGate::Frame::kDelta && state.h264 && state.lost_key_frames &&
                              GST_CLOCK_TIME_IS_VALID(pts) && state.lost_key_frames->take(pts);
  // (A reference picture cut short is damaged, and so are the pictures whose lists hold it, no more.
  // Stop 65 started a stretch there in H.264: libav left 1 to 5 grey levels of difference in ~120 pixels
  // of the pictures after one such picture of an x264 open GOP, P-frames that do not use it; their
  // classification was the same to 1e-5, and 9 more files, open GOPs of fast motion among them, showed
  // no such leak, while the stretch marked 122 whole pictures more over 29 files: not kept, stop 66.)
  if (state.exact_timestamps && state.references && state.references->last_read() &&
      verdict != DecoderInputGate::Verdict::kPassAfterWaiting && !state.after_loss && !after_lost_key) {
    follow_picture_damage(state, buffer, frame, discont, pts);
    return;
  }
  // Whatever the stretch marks, the reference pictures read are damaged for those that use them after
  // it: an open GOP's leading pictures after its key frame, followed picture by picture again.
  struct DamageWhenMarked {
    ProbeState& state;
    bool marked = false;
    ~DamageWhenMarked() {
      if (marked && state.references && state.references->last_read()) state.references->damage_last();
    }
  } damage{state};
  bool leading = false;  // an open GOP's leading picture after a damaged stretch
  if (verdict == DecoderInputGate::Verdict::kPassAfterWaiting) {
    state.after_loss = true;  // decoded without the key frame it refers to
  } else if (frame != DecoderInputGate::Frame::kDelta) {
    state.refresh_left = 0;
    state.open_key_pts = GST_CLOCK_TIME_NONE;
    if (discont) {
      state.after_loss = true;  // a key frame that lost a slice
    } else if (state.after_loss) {
      // A whole key frame needs nothing before it. But an intra-refreshed stream's recovery point is
      // whole only its count of frames later (a column of fresh blocks a frame), and an open GOP's
      // leading pictures, after it, still refer to the damaged ones.
      const AccessUnitKind kind = state.reader ? state.reader->read(buffer) : AccessUnitKind{};
      if (kind.picture == AccessUnitKind::Picture::kPartial && kind.recovery_frames.value_or(0) > 0) {
        state.refresh_left = *kind.recovery_frames;
      } else {
        state.after_loss = false;
        // (MPEG-2: an open GOP's header says so, and its leading B-frames refer to the damaged GOP too.)
        if (kind.open_gop || (state.temporal_references && TemporalReferenceGaps::opens_open_gop(buffer))) {
          state.open_key_pts = pts;
        }
      }
    }
  } else if (discont && !skipped && !after_lost_key && !state.after_loss && is_non_reference(state, buffer)) {
    // Data lost in a frame no other refers to (most B-frames): its picture alone is damaged.
    damage.marked = true;
    if (!GST_CLOCK_TIME_IS_VALID(pts)) return;
    std::lock_guard<std::mutex> lock(state.pending_mutex);
    state.damaged.push_back({pts, pts});  // (no stretch is open: none after a loss)
    if (state.damaged.size() > kMaxStretches) state.damaged.pop_front();
    return;
  } else if (discont || skipped || after_lost_key) {
    state.after_loss = true;
    state.refresh_left = 0;
    state.open_key_pts = GST_CLOCK_TIME_NONE;
  } else if (state.refresh_left > 0) {
    if (--state.refresh_left == 0) state.after_loss = false;
  } else if (GST_CLOCK_TIME_IS_VALID(state.open_key_pts)) {
    if (GST_CLOCK_TIME_IS_VALID(pts) && pts < state.open_key_pts) {
      leading = !state.reader || state.reader->codec() == AccessUnitReader::Codec::kH264 || state.reader->read(buffer).rasl;
    } else {
      state.open_key_pts = GST_CLOCK_TIME_NONE;  // the GOP's leading pictures come first: none after this
    }
  }
  damage.marked = leading || state.after_loss;
  std::lock_guard<std::mutex> lock(state.pending_mutex);
  if (leading) {
    // Within the range of the stretch it ended: the pictures between are its own.
    if (state.damaged.empty()) {
      state.damaged.push_back({pts, pts});
    } else {
      state.damaged.back().last = std::max(state.damaged.back().last, pts);
    }
    return;
  }
  if (!state.after_loss) {
    state.stretch_open = false;
    return;
  }
  mark_in_stretch(state, pts);
}

// A picture at `pts` came: frames expected before it that gave none will give none.
void picture_came_at(ProbeState& state, GstClockTime pts) {
  state.recovering = false;
  if (!GST_CLOCK_TIME_IS_VALID(pts)) return;
  std::lock_guard<std::mutex> lock(state.pending_mutex);
  // The decoder's clamp: frames whose timestamps it had run past (it guessed them for frames that came
  // without: an RTSP camera's after its jitter buffer reset its clock on a stall) come out at the last
  // picture's timestamp. The picture is the oldest waiting frame's, not a sign that it gave none.
  const bool clamped = pts == std::exchange(state.last_picture, pts);
  if (clamped && !state.pending.empty() && *state.pending.begin() < pts) {
    state.pending.erase(state.pending.begin());
    return;
  }
  const auto at = state.pending.lower_bound(pts);
  const auto missed = static_cast<uint64_t>(std::distance(state.pending.begin(), at));
  // Fields: two frames in, one picture out. Not counted (a field pair's second half is no loss).
  if (missed > 0 && !state.counters->field_coded.load()) state.counters->undecoded.fetch_add(missed);
  state.pending.erase(state.pending.begin(), at);
  if (auto same = state.pending.find(pts); same != state.pending.end()) state.pending.erase(same);
}

void take_input_caps(ProbeState& state, const GstCaps* caps) {
  state.reader = AccessUnitReader::for_caps(caps);
  state.references.reset();
  if (auto lists = RefPicListGaps::for_caps(caps)) {
    state.references = std::make_unique<RefPicListGaps>(std::move(*lists));
  } else if (auto sets = RefPicSetGaps::for_caps(caps)) {
    state.references = std::make_unique<RefPicSetGaps>(std::move(*sets));
  }
  state.temporal_references = TemporalReferenceGaps::for_caps(caps);
  state.h264 = state.reader && state.reader->codec() == AccessUnitReader::Codec::kH264;
  state.intra_only = is_intra_only_codec(caps);
  state.vp8 = state.theora = false;
  if (!caps || gst_caps_get_size(caps) == 0) return;
  const GstStructure* s = gst_caps_get_structure(caps, 0);
  state.vp8 = gst_structure_has_name(s, "video/x-vp8");
  state.theora = gst_structure_has_name(s, "video/x-theora");
  const char* interlace = gst_structure_get_string(s, "interlace-mode");
  if (interlace && !g_str_equal(interlace, "progressive")) state.counters->field_coded = true;
}

// A packet of a codec's headers, not a frame: Theora's (their first byte's high bit, as the
// specification's header packets). Not GStreamer's HEADER flag: h264parse sets it on key frames that
// carry their SPS and PPS.
bool is_codec_header(const ProbeState& state, GstBuffer* buffer) {
  guint8 first = 0;
  return state.theora && gst_buffer_extract(buffer, 0, &first, 1) == 1 && (first & 0x80) != 0;
}

// Whether a frame passed to the decoder should give a picture of its own (see expected_pictures).
bool expects_picture(const ProbeState& state, GstBuffer* buffer) {
  if (is_codec_header(state, buffer) || GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DECODE_ONLY) ||
      gst_buffer_get_size(buffer) == 0) {
    return false;
  }
  if (state.vp8) {
    guint8 tag = 0;
    // The frame tag's show_frame bit (RFC 6386, 9.1): an alternate reference frame is not shown.
    if (gst_buffer_extract(buffer, 0, &tag, 1) == 1 && (tag & 0x10) == 0) return false;
  }
  const GstClockTime pts = GST_BUFFER_PTS(buffer);
  if (state.segment.format == GST_FORMAT_TIME && GST_CLOCK_TIME_IS_VALID(pts)) {
    const GstClockTime duration = GST_BUFFER_DURATION(buffer);
    const GstClockTime end = pts + (GST_CLOCK_TIME_IS_VALID(duration) ? duration : 0);
    if (GST_CLOCK_TIME_IS_VALID(state.segment.stop) && pts >= state.segment.stop) return false;
    if (end < state.segment.start || (end == state.segment.start && pts < end)) return false;
  }
  return true;
}

DecoderInputGate::Frame frame_of(const ProbeState& state, GstBuffer* buffer, std::optional<uint32_t>* recovery_frames) {
  if (state.intra_only) return DecoderInputGate::Frame::kKey;
  if (GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT)) return DecoderInputGate::Frame::kDelta;
  // Another codec: the parser's word. Or started: every frame passes, whatever it is.
  if (!state.reader || !state.gate.tells_frames_apart()) return DecoderInputGate::Frame::kKey;
  const AccessUnitKind kind = state.reader->read(buffer);
  if (kind.picture == AccessUnitKind::Picture::kRandomAccess || kind.picture == AccessUnitKind::Picture::kUnknown) {
    return DecoderInputGate::Frame::kKey;
  }
  *recovery_frames = kind.recovery_frames;
  return DecoderInputGate::Frame::kRecoveryPoint;
}

bool admit(ProbeState& state, GstBuffer* buffer) {
  state.counters->last_input_ns = std::chrono::steady_clock::now().time_since_epoch().count();
  // A codec's headers in the stream (Theora's three, before its first frame) are no frame: the decoder
  // needs them, and they were counted as frames left out before a key frame.
  if (is_codec_header(state, buffer)) return true;
  const bool after_segment = std::exchange(state.new_segment, false);
  state.counters->arrived.fetch_add(1);
  state.gate.set_keyframes_only(state.keyframes_only->load(std::memory_order_relaxed));
  std::optional<uint32_t> recovery_frames;
  const DecoderInputGate::Frame frame = frame_of(state, buffer, &recovery_frames);
  const DecoderInputGate::Verdict verdict = state.gate.admit(frame);
  // From a recovery point the decoder may send nothing until its pictures are whole (libav holds them
  // back itself, here up to the next IDR frame): the frames until its first picture are not counted.
  // So too from the end of the wait for a key frame that did not come (libav gives nothing until one
  // does: a camera joined early in a 30 s GOP counted 375 frames "undecodable", found 2026-12-07).
  if (verdict == DecoderInputGate::Verdict::kPassFromRecoveryPoint ||
      verdict == DecoderInputGate::Verdict::kPassAfterWaiting) {
    state.recovering = true;
  }
  const bool passed = verdict == DecoderInputGate::Verdict::kPass ||
                      verdict == DecoderInputGate::Verdict::kPassAfterWaiting ||
                      verdict == DecoderInputGate::Verdict::kPassFromRecoveryPoint;
  if (passed && !state.recovering.load() && expects_picture(state, buffer)) {
    state.counters->expected_pictures.fetch_add(1);
    expect_picture_at(state, GST_BUFFER_PTS(buffer));
  }
  if (passed) follow_losses(state, buffer, frame, verdict, after_segment);
  switch (verdict) {
    case DecoderInputGate::Verdict::kPass:
      state.recovery.input(GST_BUFFER_PTS(buffer));
      return true;
    case DecoderInputGate::Verdict::kNotKeyFrame:
      state.counters->not_key_frames.fetch_add(1);
      return false;
    case DecoderInputGate::Verdict::kRecoveryPointNotWhole:
      state.counters->not_key_frames.fetch_add(1);
      if (!state.counters->recovery_points_logged.exchange(true)) {
        VAPIPE_LOG_WARN("stream '{}': some of its key frames are not decoded, as they cannot be decoded alone: "
                        "recovery points of a stream refreshed by intra slices (intra refresh), or I-frames of an "
                        "open GOP (H.264); key frames only decodes its IDR frames, which may be few: sample it with "
                        "max_fps instead", state.stream_id);
      }
      return false;
    case DecoderInputGate::Verdict::kBeforeKeyFrame:
      state.counters->before_key_frame.fetch_add(1);
      return false;
    case DecoderInputGate::Verdict::kPassAfterWaiting:
      VAPIPE_LOG_WARN("stream '{}': no key frame in {} frames: decoding on from here (the pictures may be smeared "
                      "until the stream refreshes them)", state.stream_id, DecoderInputGate::kMaxWait);
      return true;
    case DecoderInputGate::Verdict::kPassFromRecoveryPoint:
      state.recovery.start(GST_BUFFER_PTS(buffer), recovery_frames.value_or(0));
      VAPIPE_LOG_INFO("stream '{}': decoding from a recovery point (intra refresh or open GOP): its pictures are whole "
                      "{} frames on, and the ones before are left out", state.stream_id, recovery_frames.value_or(0));
      return true;
  }
  return true;
}

GstPadProbeReturn on_decoder_input(GstPad*, GstPadProbeInfo* info, gpointer user) {
  auto& state = **static_cast<std::shared_ptr<ProbeState>*>(user);
  if (GST_PAD_PROBE_INFO_TYPE(info) & (GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM | GST_PAD_PROBE_TYPE_EVENT_FLUSH)) {
    GstEvent* event = GST_PAD_PROBE_INFO_EVENT(info);
    if (event && GST_EVENT_TYPE(event) == GST_EVENT_CAPS) {
      GstCaps* caps = nullptr;
      gst_event_parse_caps(event, &caps);
      take_input_caps(state, caps);
    } else if (event && GST_EVENT_TYPE(event) == GST_EVENT_SEGMENT) {
      gst_event_copy_segment(event, &state.segment);
      state.new_segment = true;
    } else if (event && GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP) {
      state.gate.restart();
      state.passed_any = state.after_loss = false;  // the decoder starts again from a key frame
      state.refresh_left = 0;
      state.open_key_pts = GST_CLOCK_TIME_NONE;
      if (state.references) state.references->restart();
      if (state.temporal_references) state.temporal_references->restart();
      // Until the decoder's first picture after it, frames are not counted either: an open GOP's leading
      // B-frames, which refer to the GOP before the seek, give none (an AVI's, without a timestamp, cannot
      // be told by the segment).
      state.recovering = true;
      // A seek: the decoder drops what it held, which is not lost (nor expected any more: a stream's end
      // compares the pictures expected with those that came). Held: expected, not come, not known lost
      // (an AVI's B-frames have no timestamp to wait for them by: counted, never pending).
      std::lock_guard<std::mutex> lock(state.pending_mutex);
      DecoderInputCounters& c = *state.counters;
      const uint64_t expected = c.expected_pictures.load(), accounted = c.pictures.load() + c.undecoded.load();
      if (expected > accounted) c.expected_pictures.fetch_sub(expected - accounted);
      state.pending.clear();
      state.damaged.clear();
      state.whole_within.clear();
      state.stretch_open = false;
    }
    return GST_PAD_PROBE_OK;
  }
  return keep_buffers_where(info, [&](GstBuffer* buffer) { return admit(state, buffer); });
}

GstPadProbeReturn on_decoder_output(GstPad*, GstPadProbeInfo* info, gpointer user) {
  auto& state = **static_cast<std::shared_ptr<ProbeState>*>(user);
  GstBuffer* buffer = GST_PAD_PROBE_INFO_BUFFER(info);
  if (buffer) {
    state.counters->pictures.fetch_add(1);
    if (GST_BUFFER_FLAG_IS_SET(buffer, GST_VIDEO_BUFFER_FLAG_INTERLACED)) state.counters->field_coded = true;
    picture_came_at(state, GST_BUFFER_PTS(buffer));
  }
  if (!buffer || state.recovery.admit_output(GST_BUFFER_PTS(buffer))) {
    if (buffer && picture_is_damaged(state, GST_BUFFER_PTS(buffer)) &&
        !GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_CORRUPTED)) {
      // A flag is the buffer's metadata: a picture's memory is shared, not copied, by making it writable.
      buffer = gst_buffer_make_writable(buffer);
      GST_PAD_PROBE_INFO_DATA(info) = buffer;
      GST_BUFFER_FLAG_SET(buffer, GST_BUFFER_FLAG_CORRUPTED);
    }
    if (buffer && GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_CORRUPTED)) state.counters->damaged_pictures.fetch_add(1);
    return GST_PAD_PROBE_OK;
  }
  state.counters->before_recovery.fetch_add(1);
  return GST_PAD_PROBE_DROP;
}

void delete_state(gpointer state) { delete static_cast<std::shared_ptr<ProbeState>*>(state); }

}  // namespace

void FramesAfterLostKeyFrames::add(GstClockTime pts) {
  std::lock_guard<std::mutex> lock(mutex_);
  frames_.push_back(pts);
  if (frames_.size() > kMaxFrames) frames_.pop_front();
}

bool FramesAfterLostKeyFrames::take(GstClockTime pts) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = std::find(frames_.begin(), frames_.end(), pts);
  if (found == frames_.end()) return false;
  frames_.erase(frames_.begin(), found + 1);
  return true;
}

void gate_decoder_input(GstPad* decoder_sink, GstPad* decoder_src, const std::atomic<bool>* keyframes_only,
                        DecoderInputCounters* counters, const std::string& stream_id, bool exact_timestamps,
                        std::shared_ptr<FramesAfterLostKeyFrames> lost_key_frames) {
  auto state = std::make_shared<ProbeState>(keyframes_only, counters, stream_id, exact_timestamps);
  state->lost_key_frames = std::move(lost_key_frames);
  gst_segment_init(&state->segment, GST_FORMAT_UNDEFINED);
  if (GstCaps* caps = gst_pad_get_current_caps(decoder_sink)) {
    take_input_caps(*state, caps);
    gst_caps_unref(caps);
  }
  if (GstEvent* segment = gst_pad_get_sticky_event(decoder_sink, GST_EVENT_SEGMENT, 0)) {
    gst_event_copy_segment(segment, &state->segment);
    gst_event_unref(segment);
  }
  gst_pad_add_probe(decoder_sink,
                    static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST |
                                                 GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM | GST_PAD_PROBE_TYPE_EVENT_FLUSH),
                    &on_decoder_input, new std::shared_ptr<ProbeState>(state), &delete_state);
  // Decoders push pictures one by one.
  if (decoder_src) {
    gst_pad_add_probe(decoder_src, GST_PAD_PROBE_TYPE_BUFFER, &on_decoder_output, new std::shared_ptr<ProbeState>(state),
                      &delete_state);
  }
}

}  // namespace vapipe
