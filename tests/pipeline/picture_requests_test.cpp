// Picture requests (pipeline/picture_requests.h): their text, their file names, and a real ZeroMQ
// PUB/SUB pair over ipc://, as publish and ingest use them.
#include "pipeline/picture_requests.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

namespace vapipe {
namespace {

TEST(PictureRequests, ARequestReadsBackAsItWasWritten) {
  PictureRequest r{"gate 2", "truck", 1234567, "/var/lib/vapipe/pictures/gate/x.jpg"};
  r.frame_seq = 1234570;
  r.frame_pts_ns = 86400123456789;  // a day of a camera's clock, to the nanosecond
  auto back = decode_picture_request(encode_picture_request(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->stream_id, r.stream_id);
  EXPECT_EQ(back->label, r.label);
  EXPECT_EQ(back->segment_start_seq, r.segment_start_seq);
  EXPECT_EQ(back->path, r.path);
  EXPECT_EQ(back->frame_seq, r.frame_seq);
  EXPECT_EQ(back->frame_pts_ns, r.frame_pts_ns);
  // A request without a frame (an untimed stream's) is of the next frame.
  auto next = decode_picture_request(R"({"stream_id": "gate", "path": "/x.jpg"})");
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->frame_pts_ns, -1);
  EXPECT_EQ(next->frame_seq, -1);
  for (const char* bad : {"", "not json", "[]", R"({"stream_id": "gate"})", R"({"stream_id": 3, "path": "/x.jpg"})"}) {
    EXPECT_FALSE(decode_picture_request(bad).ok()) << bad;
  }
  EXPECT_EQ(back->kind, PictureRequest::Kind::kPicture);
}

// publish.segments_clips: a clip's start names its file and the segment's first frame; its end names
// no file, only the segment's last frame; its going on after a reconnection, the frame it goes on with.
TEST(PictureRequests, AClipsStartAndEndReadBackAsTheyWereWritten) {
  PictureRequest start{"gate", "truck", 40, "/p/gate/2026-12-04/10-00-00.000_truck.mp4", 40, 1333333333,
                       PictureRequest::Kind::kClipStart};
  auto back = decode_picture_request(encode_picture_request(start));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->kind, PictureRequest::Kind::kClipStart);
  EXPECT_EQ(back->path, start.path);
  EXPECT_EQ(back->frame_pts_ns, 1333333333);
  PictureRequest end{"gate", "truck", 40, "", 95, 3166666666, PictureRequest::Kind::kClipEnd};
  back = decode_picture_request(encode_picture_request(end));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->kind, PictureRequest::Kind::kClipEnd);
  EXPECT_EQ(back->segment_start_seq, 40u);
  EXPECT_EQ(back->frame_pts_ns, 3166666666);
  EXPECT_EQ(segment_clip_path("/p/gate/2026-12-04/10-00-00.000_truck.jpg"), "/p/gate/2026-12-04/10-00-00.000_truck.mp4");
  PictureRequest goes_on{"gate", "truck", 40, "", 130, 500000000, PictureRequest::Kind::kClipGoesOn};
  back = decode_picture_request(encode_picture_request(goes_on));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->kind, PictureRequest::Kind::kClipGoesOn);
  EXPECT_EQ(back->segment_start_seq, 40u);
  EXPECT_EQ(back->frame_pts_ns, 500000000);
  PictureRequest before;
  before.kind = PictureRequest::Kind::kClipsBefore;
  before.before_unix_ns = 1796347088220858200;
  back = decode_picture_request(encode_picture_request(before));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->kind, PictureRequest::Kind::kClipsBefore);
  EXPECT_EQ(back->before_unix_ns, before.before_unix_ns);
  EXPECT_EQ(back->stream_id, "");
  for (const char* bad : {R"({"stream_id": "gate", "kind": "video"})", R"({"stream_id": "gate", "kind": "clip_start"})"}) {
    EXPECT_FALSE(decode_picture_request(bad).ok()) << bad;
  }
}

TEST(PictureRequests, APictureIsNamedByItsStreamTheDayAndTheTimeItsSegmentBegan) {
  const char* tz = std::getenv("TZ");
  const std::string old_tz = tz ? tz : "";
  setenv("TZ", "UTC", 1);
  tzset();
  // 2026-12-01 14:03:22.125 UTC
  EXPECT_EQ(segment_picture_path("/pictures", "gate", "truck", 1796133802125.0),
            "/pictures/gate/2026-12-01/14-03-22.125_truck.jpg");
  EXPECT_EQ(segment_picture_path("/p", "cam", "pick-up truck/van", 1796133802000.4),
            "/p/cam/2026-12-01/14-03-22.000_pick-up_truck_van.jpg");
  EXPECT_EQ(label_for_file_name("été 2"), "été_2");
  // A stream id that is no id (read from a results file of elsewhere) stays within the folder.
  EXPECT_EQ(stream_for_file_name("gate.cam-1"), "gate.cam-1");
  EXPECT_EQ(stream_for_file_name("../../../x"), ".._.._.._x");
  EXPECT_EQ(stream_for_file_name(".."), "_..");
  EXPECT_EQ(stream_for_file_name("/etc"), "_etc");
  EXPECT_EQ(segment_picture_path("/p", "../up", "car", 1796133802000.0), "/p/.._up/2026-12-01/14-03-22.000_car.jpg");
  if (tz) {
    setenv("TZ", old_tz.c_str(), 1);
  } else {
    unsetenv("TZ");
  }
  tzset();
}

// publish.segments_pictures_keep_days: the day folders older than the days kept go; today's, other
// streams' recent ones, and anything not named as a day stay.
TEST(PictureRequests, DayFoldersOlderThanTheDaysKeptAreRemovedAndNothingElse) {
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-picture-prune-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  for (const char* folder : {"gate/2026-11-28", "gate/2026-11-29", "gate/2026-11-30", "gate/2026-12-01", "door/2026-11-01",
                             "door/2026-12-01", "gate/holiday", "gate/2026-1-05"}) {
    std::filesystem::create_directories(dir / folder);
    std::ofstream(dir / folder / "10-00-00.000_truck.jpg") << "jpeg";
  }
  std::ofstream(dir / "gate" / "2026-11-01") << "a file, not a day folder";
  const char* tz = std::getenv("TZ");
  const std::string old_tz = tz ? tz : "";
  setenv("TZ", "UTC", 1);
  tzset();
  const std::time_t now = 1796133802;  // 2026-12-01 14:03:22 UTC
  EXPECT_TRUE(prune_segment_pictures(dir.string(), 0, now).empty()) << "0: all kept";
  const std::vector<std::string> removed = prune_segment_pictures(dir.string(), 2, now);  // today and yesterday
  EXPECT_EQ(removed, (std::vector<std::string>{(dir / "door/2026-11-01").string(), (dir / "gate/2026-11-28").string(),
                                               (dir / "gate/2026-11-29").string()}));
  for (const char* kept : {"gate/2026-11-30", "gate/2026-12-01", "door/2026-12-01", "gate/holiday", "gate/2026-1-05",
                           "gate/2026-11-01"}) {
    EXPECT_TRUE(std::filesystem::exists(dir / kept)) << kept;
  }
  EXPECT_TRUE(prune_segment_pictures(dir.string(), 2, now).empty()) << "nothing more to remove";
  EXPECT_TRUE(prune_segment_pictures((dir / "none").string(), 2, now).empty()) << "no folder yet";
  if (tz) {
    setenv("TZ", old_tz.c_str(), 1);
  } else {
    unsetenv("TZ");
  }
  tzset();
  std::filesystem::remove_all(dir);
}

TEST(PictureRequests, IngestReceivesWhatPublishSendsOverIpc) {
  const auto dir = std::filesystem::temp_directory_path() / ("vapipe-picture-requests-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string endpoint = "ipc://" + (dir / "pictures.sock").string();
  // Ingest may connect first (it starts before publish has bound after a restart of publish).
  auto receiver = PictureRequestReceiver::connect(endpoint);
  ASSERT_TRUE(receiver.ok()) << receiver.status().message();
  auto sender = PictureRequestSender::bind(endpoint);
  ASSERT_TRUE(sender.ok()) << sender.status().message();
  // A PUB socket drops what it sends before the subscription has reached it: send until one arrives.
  std::vector<PictureRequest> got;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  uint64_t sent = 0;
  while (got.empty() && std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE((*sender)->send(PictureRequest{"gate", "truck", sent++, "/p/gate.jpg"}).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    got = (*receiver)->poll();
  }
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0].stream_id, "gate");
  EXPECT_EQ(got[0].path, "/p/gate.jpg");
  // Once connected, every request arrives, in order.
  for (uint64_t i = 0; i < 5; ++i) ASSERT_TRUE((*sender)->send(PictureRequest{"gate", "car", 100 + i, "/p/c.jpg"}).ok());
  std::vector<PictureRequest> next;
  while (next.size() < 5 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (PictureRequest& r : (*receiver)->poll()) {
      if (r.label == "car") next.push_back(r);
    }
  }
  ASSERT_EQ(next.size(), 5u);
  for (uint64_t i = 0; i < 5; ++i) EXPECT_EQ(next[i].segment_start_seq, 100 + i);
  receiver->reset();
  sender->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vapipe
