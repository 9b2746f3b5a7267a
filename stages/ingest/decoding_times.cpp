#include "stages/ingest/decoding_times.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace vapipe {

void DecodingTimes::add(int64_t pts, int64_t duration) {
  if (duration > 0) duration_ = duration;
  if (pts < 0) {
    pending_.push_back(-1);
    ++untimed_;
    return;
  }
  pts += offset_;
  if (const int64_t back = latest_ - pts;
      latest_ >= 0 && back > std::max<int64_t>(1'000'000'000, static_cast<int64_t>(kRecent) * frame_duration())) {
    offset_ += back + frame_duration();  // a new timeline: from a frame after the latest
    pts += back + frame_duration();
  }
  latest_ = std::max(latest_, pts);
  place_untimed(pts);
  pending_.push_back(pts);
  note(pts);
}

void DecodingTimes::place_untimed(int64_t next_pts) {
  if (untimed_ == 0) return;
  const int64_t n = static_cast<int64_t>(untimed_);
  // Evenly between the timed frames around them; else a step apart after the one before.
  const bool between = last_timed_ >= 0 && next_pts > last_timed_ + n;
  const int64_t from = last_timed_ >= 0 ? last_timed_ : std::max<int64_t>(0, next_pts - (n + 1) * kMinStep);
  const int64_t step = between ? (next_pts - last_timed_) / (n + 1) : kMinStep;
  for (size_t i = pending_.size() - untimed_, j = 1; i < pending_.size(); ++i, ++j) {
    pending_[i] = from + static_cast<int64_t>(j) * step;
    note(pending_[i]);
  }
  untimed_ = 0;
}

void DecodingTimes::note(int64_t pts) {
  depths_.push_back(static_cast<size_t>(std::count_if(recent_.begin(), recent_.end(), [pts](int64_t p) { return p > pts; })));
  if (depths_.size() > kDepthWindow) depths_.pop_front();
  recent_.push_back(pts);
  if (recent_.size() > kRecent) recent_.pop_front();
  shown_.insert(pts);
  last_timed_ = pts;
}

int64_t DecodingTimes::frame_duration() const {
  if (duration_ > 0) return duration_;
  std::vector<int64_t> sorted(recent_.begin(), recent_.end());  // the smallest gap between neighbours shown
  std::sort(sorted.begin(), sorted.end());
  int64_t gap = 0;
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (const int64_t g = sorted[i] - sorted[i - 1]; g > 0 && (gap == 0 || g < gap)) gap = g;
  }
  return gap > 0 ? gap : 1'000'000;  // one frame alone, untimed otherwise: any step will do
}

size_t DecodingTimes::reorder_depth() const {
  return depths_.empty() ? 0 : *std::max_element(depths_.begin(), depths_.end());
}

std::optional<DecodingTimes::Frame> DecodingTimes::take() {
  if (ended_) place_untimed(last_timed_ + static_cast<int64_t>(untimed_ + 1) * std::max(kMinStep, frame_duration()));
  if (pending_.size() <= untimed_ || (!ended_ && pending_.size() - untimed_ <= lookahead_)) return std::nullopt;
  Frame frame;
  frame.pts = pending_.front();
  pending_.pop_front();
  const uint64_t i = taken_++;
  const size_t depth = reorder_depth();
  int64_t dts;
  if (i < depth) {
    // Before the stream's first presentation time, a frame apart each (a decoder's reorder delay).
    dts = used_ == 0 ? *shown_.begin() - static_cast<int64_t>(depth - i) * frame_duration() : last_dts_ + kMinStep;
  } else if (const uint64_t want = i - depth; used_ <= want) {
    for (; used_ < want; ++used_) shown_.erase(shown_.begin());  // the depth shrank: passed over
    dts = *shown_.begin();  // the (i-k)-th smallest presentation time
    shown_.erase(shown_.begin());
    ++used_;
  } else {
    dts = last_dts_ + kMinStep;  // the depth grew after earlier frames took later times
  }
  if (last_dts_ != INT64_MIN) dts = std::max(dts, last_dts_ + kMinStep);
  frame.pts = std::max(frame.pts, dts);
  frame.dts = dts;
  last_dts_ = dts;
  return frame;
}

}  // namespace vapipe
