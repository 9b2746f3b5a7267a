// A file's container structure, written byte by byte: whole, cut short, or an MP4 without its index.
// Real files cut short are read end to end in stream_reader_test.cpp.
#include "stages/ingest/container_end.h"

#include <cstdint>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace vapipe {
namespace {

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

std::string le32(uint32_t v) {
  return {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16), static_cast<char>(v >> 24)};
}

// An ISO BMFF box of `size` bytes in all (its header included), its body filled with 'x'.
std::string box(const std::string& type, uint32_t size) { return be32(size) + type + std::string(size - 8, 'x'); }

class ContainerEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("vapipe-container-end-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The check of a file holding `bytes`, or only its first `keep` of them.
  ContainerEnd check(const std::string& bytes, size_t keep = std::string::npos) {
    const std::string path = (dir_ / ("f" + std::to_string(files_++))).string();
    std::ofstream(path, std::ios::binary) << bytes.substr(0, keep);
    return check_container_end(path);
  }

  std::filesystem::path dir_;
  int files_ = 0;
};

TEST_F(ContainerEndTest, AnMp4CutInsideABoxIsCutShortAndOneWithoutMoovLacksItsIndex) {
  const std::string ftyp = box("ftyp", 24), mdat = box("mdat", 1000), moov = box("moov", 200);
  // As a recorder writes it: the index last.
  ContainerEnd whole = check(ftyp + mdat + moov);
  EXPECT_EQ(whole.container, "MP4");
  EXPECT_EQ(whole.cut_short, "");
  EXPECT_FALSE(whole.missing_index);
  EXPECT_EQ(describe_container_end(whole), "");

  ContainerEnd unfinished = check(ftyp + mdat + moov, 524);  // half of mdat, no moov
  EXPECT_EQ(unfinished.cut_short, "it ends 500 bytes into its 'mdat' box of 1000 bytes");
  EXPECT_TRUE(unfinished.missing_index);
  EXPECT_EQ(describe_container_end(unfinished).rfind("it is an MP4/QuickTime file without its index (no 'moov' box", 0), 0u)
      << describe_container_end(unfinished);
  EXPECT_NE(describe_container_end(unfinished).find("; it ends 500 bytes into its 'mdat' box"), std::string::npos);

  // Cut between boxes: whole boxes, but no index.
  ContainerEnd between = check(ftyp + mdat);
  EXPECT_EQ(between.cut_short, "");
  EXPECT_TRUE(between.missing_index);

  // Index first (faststart), the media cut: playable up to the cut.
  ContainerEnd faststart = check(ftyp + moov + mdat, 24 + 200 + 300);
  EXPECT_EQ(faststart.cut_short, "it ends 300 bytes into its 'mdat' box of 1000 bytes");
  EXPECT_FALSE(faststart.missing_index);
  EXPECT_EQ(describe_container_end(faststart),
            "the file is cut short: it ends 300 bytes into its 'mdat' box of 1000 bytes (a recording that did not "
            "finish, or a copy cut short); its results end where it does");

  // Fragments: each 'moof' indexes its own 'mdat'; the last one cut.
  ContainerEnd fragments = check(ftyp + box("moof", 100) + mdat + box("moof", 100) + mdat, 24 + 1100 + 100 + 10);
  EXPECT_EQ(fragments.cut_short, "it ends 10 bytes into its 'mdat' box of 1000 bytes");
  EXPECT_FALSE(fragments.missing_index);

  // Cut inside a box's header.
  EXPECT_EQ(check(ftyp + moov + mdat, 24 + 200 + 5).cut_short, "it ends 5 bytes into the header of a box");
}

TEST_F(ContainerEndTest, Mp4SizesOfSixtyFourBitsAndToTheEndAreRead) {
  const std::string ftyp = box("ftyp", 24), moov = box("moov", 200);
  // size 1: a 64-bit size follows the type (large recordings).
  const std::string large = be32(1) + "mdat" + be32(0) + be32(1016) + std::string(1000, 'x');
  EXPECT_EQ(check(ftyp + moov + large).cut_short, "");
  EXPECT_EQ(check(ftyp + moov + large, 24 + 200 + 12).cut_short, "it ends inside the header of its 'mdat' box");
  EXPECT_EQ(check(ftyp + moov + large, 24 + 200 + 516).cut_short, "it ends 516 bytes into its 'mdat' box of 1016 bytes");
  // size 0: the box runs to the end of the file, wherever that is.
  const ContainerEnd to_end = check(ftyp + moov + be32(0) + "mdat" + std::string(777, 'x'));
  EXPECT_EQ(to_end.cut_short, "");
  EXPECT_FALSE(to_end.missing_index);
}

TEST_F(ContainerEndTest, ZerosEndTheBoxesAndWhatIsNotABoxGivesNoVerdict) {
  // A recorder that pre-allocates its files leaves zeros after the last box.
  const std::string ftyp = box("ftyp", 24), moov = box("moov", 200), mdat = box("mdat", 1000);
  const ContainerEnd padded = check(ftyp + moov + mdat + std::string(4096, '\0'));
  EXPECT_EQ(padded.cut_short, "");
  EXPECT_FALSE(padded.missing_index);
  // The padding of a recording that never finished: no index before it.
  const ContainerEnd unfinished = check(ftyp + mdat + std::string(4096, '\0'));
  EXPECT_EQ(unfinished.cut_short, "");
  EXPECT_TRUE(unfinished.missing_index);
  // Nor is an index said missing where the walk could not reach the end.
  const ContainerEnd unreadable = check(ftyp + mdat + std::string(64, '\xff') + moov);
  EXPECT_EQ(unreadable.cut_short, "");
  EXPECT_FALSE(unreadable.missing_index);
  // Not a container this knows.
  const ContainerEnd text = check("just some text, not a video at all\n");
  EXPECT_EQ(text.container, "");
  EXPECT_EQ(text.cut_short, "");
  EXPECT_FALSE(text.missing_index);
  EXPECT_EQ(check("").container, "");
}

TEST_F(ContainerEndTest, AMatroskaSegmentOrClusterThatRunsPastTheEndIsCutShort) {
  // EBML header: ID 1A45DFA3, size 4 (one-byte vint 0x84), 4 bytes of body.
  const std::string ebml = std::string("\x1A\x45\xDF\xA3\x84", 5) + "abcd";
  // Segment: ID 18538067, size as an 8-byte vint (0x01 then 7 bytes).
  auto segment_header = [](uint64_t size) {
    std::string h("\x18\x53\x80\x67\x01", 5);
    for (int i = 6; i >= 0; --i) h += static_cast<char>(size >> (8 * i));
    return h;
  };
  const std::string body(2000, 'c');
  const ContainerEnd whole = check(ebml + segment_header(2000) + body);
  EXPECT_EQ(whole.container, "Matroska");
  EXPECT_EQ(whole.cut_short, "");
  EXPECT_EQ(check(ebml + segment_header(2000) + body, 9 + 12 + 1500).cut_short,
            "it ends 1500 bytes into its Matroska segment of 2000 bytes");

  // Size unknown (all ones: a live recording): its clusters' sizes say it. Cluster: ID 1F43B675, a
  // 2-byte size vint (0x40 | high bits).
  const std::string unknown("\x18\x53\x80\x67\xFF", 5);
  const std::string cluster = std::string("\x1F\x43\xB6\x75\x43\xE8", 6) + std::string(1000, 'k');  // size 1000
  EXPECT_EQ(check(ebml + unknown + cluster + cluster).cut_short, "");
  EXPECT_EQ(check(ebml + unknown + cluster + cluster, 9 + 5 + 1006 + 6 + 400).cut_short,
            "it ends 400 bytes into an element of 1000 bytes (a cluster, most likely) of its Matroska segment");
  // A cluster of unknown size too: nothing to go by.
  const std::string open_cluster = std::string("\x1F\x43\xB6\x75\xFF", 5) + std::string(1000, 'k');
  EXPECT_EQ(check(ebml + unknown + open_cluster).cut_short, "");
}

// A Matroska file's segment info without a Duration (written to a pipe, a live recorder's): its
// duration is unknown (GStreamer's demuxer guessed one: 3.0 s for a 4.0 s file). With one: known.
TEST_F(ContainerEndTest, AMatroskaSegmentInfoWithoutADurationSaysItIsUnknown) {
  const std::string ebml = std::string("\x1A\x45\xDF\xA3\x84", 5) + "abcd";
  const std::string unknown_segment("\x18\x53\x80\x67\xFF", 5);
  const std::string seek_head = std::string("\x11\x4D\x9B\x74\x83", 5) + "sss";
  // Info (1549A966) holding a TimestampScale (2AD7B1, 3 bytes) and, or not, a Duration (4489, a float).
  const std::string scale = std::string("\x2A\xD7\xB1\x83\x0F\x42\x40", 7);
  const std::string duration = std::string("\x44\x89\x84", 3) + std::string("\x45\x7A\x00\x00", 4);
  auto info = [](const std::string& body) {
    return std::string("\x15\x49\xA9\x66", 4) + static_cast<char>(0x80 | body.size()) + body;
  };
  const std::string cluster = std::string("\x1F\x43\xB6\x75\x43\xE8", 6) + std::string(1000, 'k');
  EXPECT_TRUE(check(ebml + unknown_segment + seek_head + info(scale) + cluster).duration_unknown);
  EXPECT_FALSE(check(ebml + unknown_segment + seek_head + info(scale + duration) + cluster).duration_unknown);
  EXPECT_FALSE(check(ebml + unknown_segment + cluster).duration_unknown);  // no info before its clusters: no verdict
}

TEST_F(ContainerEndTest, AnAviOrMpegTsCutShortIsSaid) {
  const std::string avi = "RIFF" + le32(1004) + "AVI " + std::string(1000, 'a');
  EXPECT_EQ(check(avi).container, "AVI");
  EXPECT_EQ(check(avi).cut_short, "");
  EXPECT_EQ(check(avi, 608).cut_short, "it ends 600 bytes into its RIFF chunk of 1004 bytes");
  // Above 1 GB, OpenDML goes on in 'AVIX' chunks: the second one cut.
  const std::string avix = "RIFF" + le32(504) + "AVIX" + std::string(500, 'b');
  EXPECT_EQ(check(avi + avix).cut_short, "");
  EXPECT_EQ(check(avi + avix, avi.size() + 108).cut_short, "it ends 100 bytes into its RIFF chunk of 504 bytes");
  // A writer that never filled the size in: no verdict.
  EXPECT_EQ(check("RIFF" + le32(0) + "AVI " + std::string(100, 'a')).cut_short, "");

  std::string ts;
  for (int i = 0; i < 5; ++i) ts += '\x47' + std::string(187, 't');
  EXPECT_EQ(check(ts).container, "MPEG-TS");
  EXPECT_EQ(check(ts).cut_short, "");
  EXPECT_EQ(check(ts, 4 * 188 + 100).cut_short, "it ends 100 bytes into a 188-byte packet");
  std::string m2ts;  // 192-byte packets: a 4-byte timestamp, then the 188 of MPEG-TS
  for (int i = 0; i < 5; ++i) m2ts += std::string(4, '\0') + '\x47' + std::string(187, 't');
  EXPECT_EQ(check(m2ts, 4 * 192 + 50).cut_short, "it ends 50 bytes into a 192-byte packet");
}

// A recorder's own format, by its first bytes: Dahua's DAV (no GStreamer demuxer) is said with how to
// get an MP4 out of it; a Hikvision header, or anything else, is described for a typefind error.
TEST_F(ContainerEndTest, ARecordersOwnFormatOrAFileThatIsNotAVideoIsDescribed) {
  auto file = [&](const std::string& bytes) {
    const std::string path = (dir_ / ("g" + std::to_string(files_++))).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  };
  const std::string dav = file("DHAV\xfd\x00\x00\x00" + std::string(100, 'x'));
  EXPECT_EQ(unreadable_recording(dav).rfind("it is a Dahua DAV recording ('DHAV' frames), which GStreamer cannot read: "
                                            "export it as MP4", 0), 0u);
  EXPECT_NE(unreadable_recording(dav).find("ffmpeg -i in.dav -c copy out.mp4"), std::string::npos);
  EXPECT_EQ(unreadable_recording(file("not a dav file")), "");
  EXPECT_EQ(describe_unidentified_file(file("IMKH\x01\x01" + std::string(60, '\0'))).rfind(
                "it is a Hikvision recording with its own header ('IMKH')", 0),
            0u);
  EXPECT_EQ(describe_unidentified_file(file("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj")),
            "it does not look like a video: its first bytes are \"%PDF-1.7\\x0A%\\xE2\\xE3\\xCF\\xD3\\x0A1\"");
  EXPECT_EQ(describe_unidentified_file(file("ab")), "it does not look like a video: its first bytes are \"ab\"");
  EXPECT_EQ(describe_unidentified_file((dir_ / "none").string()), "");
}

}  // namespace
}  // namespace vapipe
