#include "pipeline/stream_glob.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "pipeline/config.h"
#include "tests/fakes/child_process.h"

namespace vapipe {
namespace {

class StreamGlobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("vapipe-glob-" + std::to_string(getpid()));
    // Hidden ones too: what a Mac leaves beside a file it copies, a desktop's trash, a dot-file.
    for (const char* f : {"a/x.mp4", "a/y.MKV", "a/notes.txt", "a/sub/z.mp4", "a/sub/deep/w.mp4", "a/b c/v.mp4",
                          "a/._x.mp4", "a/.Trash/t.mp4", "a/sub/.partial.mp4"}) {
      std::filesystem::create_directories((dir_ / f).parent_path());
      std::ofstream(dir_ / f) << "x";
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string at(const std::string& rel) const { return (dir_ / rel).string(); }
  std::vector<std::string> glob(const std::string& rel) const {
    auto r = expand_file_glob(at(rel));
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r.value() : std::vector<std::string>{};
  }
  std::filesystem::path dir_;
};

TEST_F(StreamGlobTest, WildcardsMatchWithinAFolderAndDoubleStarAcrossFolders) {
  EXPECT_EQ(glob("a/*.mp4"), (std::vector<std::string>{at("a/x.mp4")}));
  EXPECT_EQ(glob("a/**/*.mp4"),
            (std::vector<std::string>{at("a/b c/v.mp4"), at("a/sub/deep/w.mp4"), at("a/sub/z.mp4"), at("a/x.mp4")}));
  EXPECT_EQ(glob("a/sub/?.mp4"), (std::vector<std::string>{at("a/sub/z.mp4")}));
  EXPECT_EQ(glob("a/[xy].*"), (std::vector<std::string>{at("a/x.mp4"), at("a/y.MKV")}));
  EXPECT_EQ(glob("a/[!x].*"), (std::vector<std::string>{at("a/y.MKV")}));
  EXPECT_EQ(glob("a/sub/z.mp4"), (std::vector<std::string>{at("a/sub/z.mp4")}));  // no wildcard: the file
  EXPECT_TRUE(glob("a/*.avi").empty());
  // Names starting with '.' only when the pattern names a '.' itself, as in a shell.
  size_t hidden = 0;
  ASSERT_TRUE(expand_file_glob(at("a/**/*.mp4"), &hidden).ok());
  EXPECT_EQ(hidden, 3u);
  ASSERT_TRUE(expand_file_glob(at("a/*.mp4"), &hidden).ok());
  EXPECT_EQ(hidden, 1u);
  EXPECT_EQ(glob("a/.*.mp4"), (std::vector<std::string>{at("a/._x.mp4")}));
  EXPECT_EQ(glob("a/.Trash/*.mp4"), (std::vector<std::string>{at("a/.Trash/t.mp4")}));
  EXPECT_EQ(glob("a/**/.*.mp4"), (std::vector<std::string>{at("a/._x.mp4"), at("a/sub/.partial.mp4")}));
  auto missing = expand_file_glob(at("nowhere/*.mp4"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nowhere does not exist"), std::string::npos);
}

// A camera's folder linked in from a share (archive/cam1 -> ../nas/cam1) is listed as the shell lists
// it (it was passed over: found 2026-12-07); a link back up to a folder already listed is not followed
// round again.
TEST_F(StreamGlobTest, FoldersLinkedToAreFollowedOnce) {
  std::filesystem::create_directories(dir_ / "nas/cam1");
  std::ofstream(dir_ / "nas/cam1/n.mp4") << "x";
  std::filesystem::create_directory_symlink(dir_ / "nas/cam1", dir_ / "a/cam1");
  std::filesystem::create_directory_symlink(dir_ / "a", dir_ / "a/sub/loop");  // a/sub/loop/sub/loop/...
  EXPECT_EQ(glob("a/*/*.mp4"), (std::vector<std::string>{at("a/b c/v.mp4"), at("a/cam1/n.mp4"), at("a/sub/z.mp4")}));
  EXPECT_EQ(glob("a/**/n.mp4"), (std::vector<std::string>{at("a/cam1/n.mp4")}));
  EXPECT_EQ(glob("a/**/x.mp4"), (std::vector<std::string>{at("a/x.mp4")}));  // not again through the loop
}

// A folder under the pattern that this user cannot list (another owner's, mode 700) is said, with the
// files of the others found (it was passed over in silence). Listed as `nobody`: root lists anything.
TEST_F(StreamGlobTest, AFolderThatCannotBeListedIsSaid) {
  std::filesystem::create_directories(dir_ / "a/locked");
  std::ofstream(dir_ / "a/locked/l.mp4") << "x";
  std::filesystem::permissions(dir_ / "a/locked", std::filesystem::perms::owner_all);
  for (const auto& p : {dir_, dir_ / "a", dir_ / "a/sub", dir_ / "a/sub/deep", dir_ / "a/b c"}) {
    std::filesystem::permissions(p, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                        std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                        std::filesystem::perms::others_exec);
  }
  const testing::ChildOutcome as_nobody = testing::said_by_child([&]() -> std::string {
    if (!testing::become_nobody_if_root()) return "could not become nobody";
    std::vector<std::string> unreadable;
    auto files = expand_file_glob(at("a/**/*.mp4"), nullptr, &unreadable);
    std::string said = files.ok() ? std::to_string(files->size()) : "error";
    for (const std::string& u : unreadable) said += "|" + u;
    return said;
  });
  ASSERT_TRUE(as_nobody.ran) << as_nobody.status;
  EXPECT_EQ(as_nobody.said, "4|" + at("a/locked") + " (Permission denied)");
  EXPECT_NE(unlisted_folders_text({at("a/locked") + " (Permission denied)"}).find("1 folder under the pattern could not "
                                                                                   "be listed: "),
            std::string::npos);
}

// Two files of one folder whose names differ only in what an id cannot hold ("c d.mp4", "c#d.mp4"):
// the error names both files and says to rename one (id_prefix cannot tell them apart); with another
// glob's file, id_prefix can.
TEST_F(StreamGlobTest, TwoFilesThatMakeOneIdAreBothNamedWithTheWayOut) {
  for (const char* f : {"same/c d.mp4", "same/c#d.mp4"}) {
    std::filesystem::create_directories((dir_ / f).parent_path());
    std::ofstream(dir_ / f) << "x";
  }
  const std::string tail = "infer: {model: m.pt, labels: l.txt}\n";
  auto one = load_config_string("streams:\n  - {glob: 'same/*.mp4'}\n" + tail, "job.yaml", dir_.string());
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.status().message().find("job.yaml:2: streams[0].glob: " + at("same/c#d.mp4") +
                                        " makes the stream id 'c-d', as " + at("same/c d.mp4") + " does"),
            std::string::npos) << one.status().message();
  EXPECT_NE(one.status().message().find("rename one of the two files"), std::string::npos) << one.status().message();
  auto two = load_config_string("streams:\n  - {glob: 'same/c d.mp4'}\n  - {glob: 'same/c#*.mp4'}\n" + tail,
                                "job.yaml", dir_.string());
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("set id_prefix to tell them apart"), std::string::npos) << two.status().message();
}

TEST_F(StreamGlobTest, IdsComeFromThePathUnderTheFixedFolder) {
  const std::string base = glob_base_dir(at("a/**/*.mp4"));
  EXPECT_EQ(base, at("a"));
  EXPECT_EQ(stream_id_for_file(base, at("a/sub/z.mp4"), ""), "sub-z");
  EXPECT_EQ(stream_id_for_file(base, at("a/b c/v.mp4"), "nov-"), "nov-b-c-v");
  const std::string deep = std::string(40, 'd') + "/" + std::string(40, 'e');
  const std::string one = stream_id_for_file(base, at("a/" + deep + "/f1.mp4"), "");
  const std::string two = stream_id_for_file(base, at("a/" + deep + "/f2.mp4"), "");
  EXPECT_EQ(one.size(), 64u);
  EXPECT_NE(one, two);
  EXPECT_EQ(one.substr(one.size() - 3), "-f1");
}

TEST_F(StreamGlobTest, AGlobEntryInAConfigMakesOneStreamPerFile) {
  const std::string head = "infer: {model: m.pt, labels: m.txt}\nstreams:\n";
  auto c = load_config_string(head + "  - {glob: 'a/**/*.mp4', id_prefix: 'arch-', max_fps: 1, roi: [0.5, 0, 0.5, 1], "
                                     "keyframes_only: true}\n"
                                     "  - {id: cam, uri: 'test://ball?frames=5'}\n",
                              "job.yaml", dir_.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->streams.size(), 5u);
  EXPECT_EQ(c->streams[0].id, "arch-b-c-v");
  EXPECT_EQ(c->streams[3].id, "arch-x");
  EXPECT_EQ(c->streams[3].parsed.kind, UriKind::kFile);
  EXPECT_EQ(c->streams[3].line, 3);
  EXPECT_EQ(c->streams[4].id, "cam");
  EXPECT_EQ(c->streams[0].max_fps, 1);  // a glob's max_fps is each file's
  EXPECT_EQ(c->streams[3].max_fps, 1);
  EXPECT_EQ(c->streams[4].max_fps, -1);  // none: the job's ingest.max_fps
  EXPECT_EQ(c->streams[3].keyframes_only, std::optional<bool>(true));  // a glob's keyframes_only too
  EXPECT_EQ(c->streams[4].keyframes_only, std::nullopt);               // none: the job's
  EXPECT_FALSE(c->ingest.keyframes_only_for(c->streams[4]));
  EXPECT_EQ(c->streams[3].roi, (std::array<double, 4>{0.5, 0, 0.5, 1}));  // a glob's roi too
  EXPECT_FALSE(c->streams[3].whole_frame());
  EXPECT_TRUE(c->streams[4].whole_frame());
  EXPECT_EQ(c->job.mode, JobMode::kArchive);
  ASSERT_EQ(c->notes.size(), 1u);  // the hidden files the glob left out, said
  EXPECT_NE(c->notes[0].find("streams[0].glob: 3 hidden file(s) (a name, or a folder's, starting with '.'"),
            std::string::npos)
      << c->notes[0];

  for (const auto& [entry, expected] : std::vector<std::pair<std::string, std::string>>{
           {"  - {glob: 'a/*.avi'}\n", "job.yaml:3: streams[0].glob: no file matches '" + at("a/*.avi") + "'"},
           {"  - {glob: 'a/.Trash/*.avi'}\n", "no file matches"},
           {"  - {glob: 'a/_*.mp4'}\n", "no file matches '" + at("a/_*.mp4") + "'"},
           {"  - {glob: 'a/?_*.mp4'}\n", "no file matches '" + at("a/?_*.mp4") + "' (1 hidden file(s)"},
           {"  - {glob: 'a/*.mp4', uri: 'x.mp4'}\n", "streams[0]: give either uri (with an id) or glob"},
           {"  - {glob: 'a/sub/*.mp4'}\n  - {glob: 'a/sub/deep/../*.mp4'}\n", "makes the stream id 'z', as "},
           {"  - {id: x, uri: 'test://ball', id_prefix: p}\n", "streams[0].id_prefix: only with glob"},
           {"  - {id: x, uri: 'test://ball', max_fps: -2}\n", "job.yaml:3: streams[0].max_fps: expected a number from 0 to 1000"},
           {"  - {id: x, uri: 'test://ball', roi: [0, 0, 1]}\n", "job.yaml:3: streams[0].roi: expected [x, y, width, height]"},
           {"  - {id: x, uri: 'test://ball', keyframes_only: 2}\n", "job.yaml:3: streams[0].keyframes_only: expected true or false"},
           {"  - {id: x, uri: 'test://ball', rtsp_latency_ms: 70000}\n", "job.yaml:3: streams[0].rtsp_latency_ms: expected an integer from 0 to 60000"},
           {"  - {id: x, uri: 'test://ball', roi: [0.5, 0, 0.6, 1]}\n", "streams[0].roi: the region must have a width and a "
                                                                      "height and lie inside the frame"},
           {"  - {id: x, uri: 'test://ball', roi: [0, 0, 0, 1]}\n", "streams[0].roi: the region must have a width"},
           {"  - {id: x, uri: 'test://ball', roi: [0, 0, 2, 1]}\n", "job.yaml:3: streams[0].roi[2]: expected [x, y"},
       }) {
    auto bad = load_config_string(head + entry, "job.yaml", dir_.string());
    ASSERT_FALSE(bad.ok()) << entry;
    EXPECT_NE(bad.status().message().find(expected), std::string::npos) << bad.status().message();
  }
}

// settle_s: a recorder writes its current file while cron runs the job over the folder; read now, that
// file's end would be missed and the next --resume would take it as done. Files modified within
// settle_s are left for a later run, and said so.
TEST_F(StreamGlobTest, FilesModifiedWithinSettleSecondsAreLeftForALaterRun) {
  for (const char* hidden : {"a/._x.mp4", "a/.Trash", "a/sub/.partial.mp4"}) std::filesystem::remove_all(dir_ / hidden);
  const auto an_hour_ago = std::filesystem::file_time_type::clock::now() - std::chrono::hours(1);
  for (const char* f : {"a/x.mp4", "a/sub/z.mp4", "a/sub/deep/w.mp4", "a/b c/v.mp4"}) {
    std::filesystem::last_write_time(dir_ / f, an_hour_ago);
  }
  std::ofstream(dir_ / "a/sub/z.mp4", std::ios::app) << "still being written";  // modified now
  const std::string head = "infer: {model: m.pt, labels: m.txt}\nstreams:\n";
  auto c = load_config_string(head + "  - {glob: 'a/**/*.mp4', settle_s: 60}\n", "job.yaml", dir_.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  std::vector<std::string> ids;
  for (const StreamConfig& s : c->streams) ids.push_back(s.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"b-c-v", "sub-deep-w", "x"}));
  ASSERT_EQ(c->notes.size(), 1u);
  EXPECT_EQ(c->notes[0], "streams[0].glob: 1 file(s) modified in the last 60 s are left for a later run (settle_s: "
                         "they may still be being written): 'z.mp4'");
  // Without settle_s every file is a stream, and nothing is said.
  auto all = load_config_string(head + "  - {glob: 'a/**/*.mp4'}\n", "job.yaml", dir_.string());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->streams.size(), 4u);
  EXPECT_TRUE(all->notes.empty());
  // Nothing settled: an error, as no match is.
  auto none = load_config_string(head + "  - {glob: 'a/sub/*.mp4', settle_s: 60}\n", "job.yaml", dir_.string());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("job.yaml:3: streams[0].settle_s: every file that matches '" +
                                          at("a/sub/*.mp4") + "' (1) was modified in the last 60 s: none is settled "
                                          "yet ('z.mp4')"),
            std::string::npos) << none.status().message();
  auto not_glob = load_config_string(head + "  - {id: x, uri: 'test://ball', settle_s: 5}\n", "job.yaml", dir_.string());
  ASSERT_FALSE(not_glob.ok());
  EXPECT_NE(not_glob.status().message().find("streams[0].settle_s: only with glob"), std::string::npos);
}

}  // namespace
}  // namespace vapipe
