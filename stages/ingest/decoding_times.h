// Decoding times for compressed frames that come with presentation times only, in decoding order: an
// RTSP camera's H.264/H.265 (RTP carries one timestamp, the frame's presentation time; the jitter buffer
// and depayloader give no DTS). An MP4 needs both: a sample's decoding time orders it, its composition
// offset (PTS - DTS, never negative in the boxes mp4mux writes) places it. Without DTS, a stream with
// B-frames would be muxed with DTS = PTS forced to rise, so that players show its frames in decoding
// order (a P-frame before the B-frames that it follows on screen).
//
// A stream's reorder depth k is how many frames at most come before a frame in decoding order and
// after it in presentation order (0 without B-frames, 1 for IPBB, 2 for x264's B-pyramid). With it,
// frame i's decoding time is the (i-k)-th smallest presentation time of the stream, which the frames
// up to i already decide: no frame after i can be shown before it without a depth above k. The first
// k frames take times one frame duration apart before the first presentation time. So every DTS rises,
// and DTS <= PTS, as a decoder with k frames of reorder delay would have them.
//
// k is learnt from the frames themselves (the SPS's max_num_reorder_frames is often absent): each frame
// waits until `lookahead` more frames have come (a clip is a file, its latency does not matter), and k
// is the greatest depth among the last kDepthWindow frames then. So a burst of disordered times (a
// jitter buffer's first second, while it learns the camera's clock) raises k only while it lasts.
// Where k grows, a decoding time steps kMinStep past the one before (and the presentation time, where
// needed, to it): never backwards, nor two in one tick of the MP4's timescale. Where k shrinks, the
// times it passes over are left out.
//
// Times that go back further than any reordering does (more than kRecent frames, and 1 s: a jitter
// buffer that resynchronised to a camera's clock) are a new timeline: its frames are placed from a
// frame after the latest one shown, as they are shown, rather than all crowded a kMinStep apart.
#pragma once

#include <cstddef>
#include <climits>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>

namespace vapipe {

class DecodingTimes {
 public:
  // H.264 and H.265 reorder at most 16 frames (their largest decoded picture buffer).
  static constexpr size_t kDefaultLookahead = 17;
  static constexpr size_t kRecent = 32;       // a frame's depth is counted among the frames this far before it
  static constexpr size_t kDepthWindow = 64;  // k: the greatest depth among this many frames
  static constexpr int64_t kMinStep = 1'000'000;  // between two decoding times (1 ms)
  explicit DecodingTimes(size_t lookahead = kDefaultLookahead) : lookahead_(lookahead) {}

  struct Frame {
    int64_t pts = 0;  // as given; raised to the DTS where a late-grown depth needs it, or past a timeline
                      // that went back
    int64_t dts = 0;
  };
  // The next frame in decoding order: its presentation time, and its duration when known (0: not
  // known; the smallest gap between recent presentation times stands in). An untimed frame (pts < 0:
  // a jitter buffer leaves some so) is placed between the timed frames around it in decoding order,
  // evenly, once the next comes; where that one is shown earlier (a B-frame), or none comes, a
  // kMinStep apart after the one before.
  void add(int64_t pts, int64_t duration = 0);
  // The oldest frame not yet taken, once its DTS is decided (after `lookahead` more frames, or once
  // end() was called); frames come out in the order they were added.
  std::optional<Frame> take();
  // No frame comes after those added: each is decided.
  void end() { ended_ = true; }
  // k: the greatest reorder depth (frames before one in decoding order, after it in presentation
  // order) among the last kDepthWindow frames added.
  size_t reorder_depth() const;
  size_t waiting() const { return pending_.size(); }

 private:
  int64_t frame_duration() const;
  void place_untimed(int64_t next_pts);  // the untimed frames at pending_'s tail, before a frame at next_pts
  void note(int64_t pts);                // a frame's presentation time, in decoding order
  size_t lookahead_;
  bool ended_ = false;
  std::deque<int64_t> pending_;    // presentation times of frames not yet taken, decoding order
  size_t untimed_ = 0;             // the last of them not yet placed (-1 in pending_)
  int64_t last_timed_ = -1;        // the last presentation time given
  int64_t latest_ = -1;            // the latest presentation time given
  int64_t offset_ = 0;             // added to those given: the timelines that went back
  std::multiset<int64_t> shown_;   // presentation times not yet used as a decoding time
  std::deque<int64_t> recent_;     // the last kRecent presentation times added, for the next frame's depth
  std::deque<size_t> depths_;      // of the last kDepthWindow frames added
  uint64_t taken_ = 0, used_ = 0;  // frames taken; presentation times used as decoding times
  int64_t duration_ = 0;  // the last frame duration given
  int64_t last_dts_ = INT64_MIN;
};

}  // namespace vapipe
