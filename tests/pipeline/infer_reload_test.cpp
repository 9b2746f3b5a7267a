#include "pipeline/infer_reload.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace vapipe {
namespace {

std::string with_infer(const std::string& infer) {
  return "job: {mode: live}\nstreams: [{id: a, uri: 'rtsp://cam/a'}]\ninfer:\n" + infer;
}

InferConfig loaded_infer(const std::string& yaml) {
  auto c = load_config_string(yaml, "job.yaml", "/cfg");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? c->infer : InferConfig{};
}

// The model and how it runs change with a reload; the rest of `infer` is refused, naming its line and
// what a running job takes.
TEST(InferReload, TheModelAndHowItRunsChangeAndTheRestIsRefusedWithItsLine) {
  const std::string running = with_infer("  model: m.pt\n  labels: m.txt\n  device: cpu\n");
  auto same = compare_infer_sections(running, with_infer("  labels: m.txt\n  device: 'cpu'\n  model: m.pt\n"), "job.yaml");
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_FALSE(same->changed());
  EXPECT_EQ(describe_infer_reload(*same), "");

  auto newer = compare_infer_sections(
      running, with_infer("  model: m2.pt\n  labels: m2.txt\n  device: cpu\n  top_k: 5\n  precision: fp16\n"), "job.yaml");
  ASSERT_TRUE(newer.ok()) << newer.status().message();
  EXPECT_EQ(newer->keys, (std::vector<std::string>{"labels", "model", "precision", "top_k"}));
  EXPECT_EQ(describe_infer_reload(*newer), "infer.labels, infer.model, infer.precision, infer.top_k changed");

  auto moved = compare_infer_sections(running, with_infer("  model: m.pt\n  labels: m.txt\n  device: cuda:1\n"),
                                      "job.yaml");
  ASSERT_FALSE(moved.ok());
  EXPECT_NE(moved.status().message().find("job.yaml:6: `infer.device` changed; of `infer`, a running job takes only "
                                          "model, labels, model_name, top_k, output, precision, channels_last, "
                                          "optimize, warmup_batches"),
            std::string::npos)
      << moved.status().message();
  auto threads = compare_infer_sections(running, with_infer("  model: m.pt\n  labels: m.txt\n  device: cpu\n  threads: 2\n"),
                                        "job.yaml");
  ASSERT_FALSE(threads.ok());
  EXPECT_NE(threads.status().message().find("`infer.threads` changed"), std::string::npos) << threads.status().message();
}

// As infer compares them: by value, paths as resolved (./m.pt is m.pt); model_name and top_k alone
// need no new model, the rest do. A new model's default model_name is its file's name.
TEST(InferReload, SettingsAreComparedByValueAndOnlyNameAndTopKNeedNoNewModel) {
  const InferConfig running = loaded_infer(with_infer("  model: m.pt\n  labels: m.txt\n"));
  EXPECT_TRUE(changed_infer_settings(running, loaded_infer(with_infer("  model: ./m.pt\n  labels: m.txt\n"))).empty());
  const std::vector<std::string> named =
      changed_infer_settings(running, loaded_infer(with_infer("  model: m.pt\n  labels: m.txt\n  model_name: door\n  top_k: 1\n")));
  EXPECT_EQ(named, (std::vector<std::string>{"model_name", "top_k"}));
  EXPECT_FALSE(infer_change_needs_new_model(named));
  const std::vector<std::string> model = changed_infer_settings(running, loaded_infer(with_infer("  model: m2.pt\n  labels: m.txt\n")));
  EXPECT_EQ(model, (std::vector<std::string>{"model", "model_name"}));  // (its name: m2)
  EXPECT_TRUE(infer_change_needs_new_model(model));
  EXPECT_TRUE(infer_change_needs_new_model({"output"}));
  InferConfig taken = running;
  take_reloadable_infer_settings(loaded_infer(with_infer("  model: m2.pt\n  labels: m.txt\n  threads: 3\n")), taken);
  EXPECT_EQ(taken.model, "/cfg/m2.pt");
  EXPECT_EQ(taken.model_name, "m2");
  EXPECT_EQ(taken.threads, running.threads);  // not a reloadable setting
}

// A model or labels file named as before and replaced under the same path since the job loaded it (a
// new model copied over the old) is a change: infer loads it again. One named anew is loaded anyway;
// one that is not there is noted apart (said as a warning; the running model goes on).
TEST(InferReload, AFileReplacedUnderTheSamePathIsAChangeAndOneThatIsGoneIsNoted) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("vapipe_infer_files_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "m.pt") << "v1";
  std::ofstream(dir / "m.txt") << "a\nb\n";
  InferConfig infer;
  infer.model = (dir / "m.pt").string();
  infer.labels = (dir / "m.txt").string();
  const InferFileIdentities loaded = infer_file_identities(infer);

  InferReload unchanged;
  note_replaced_infer_files(infer, loaded, unchanged);
  EXPECT_FALSE(unchanged.changed());
  EXPECT_TRUE(unchanged.missing.empty());

  std::ofstream(dir / "m.pt") << "v2, a new model";
  InferReload replaced;
  note_replaced_infer_files(infer, loaded, replaced);
  EXPECT_TRUE(replaced.changed());
  EXPECT_EQ(replaced.replaced, std::vector<std::string>{"model"});
  EXPECT_EQ(describe_infer_reload(replaced), "infer.model's file " + infer.model + " was replaced");

  InferReload renamed;  // (its path changed too: loaded as a new path's)
  renamed.keys = {"model"};
  note_replaced_infer_files(infer, loaded, renamed);
  EXPECT_TRUE(renamed.replaced.empty());
  EXPECT_EQ(describe_infer_reload(renamed), "infer.model changed");

  std::filesystem::remove(dir / "m.txt");
  InferReload gone;
  note_replaced_infer_files(infer, loaded, gone);
  EXPECT_EQ(gone.missing, std::vector<std::string>{"labels"});
  EXPECT_EQ(gone.missing_paths, std::vector<std::string>{infer.labels});
  EXPECT_EQ(gone.replaced, std::vector<std::string>{"model"});
  EXPECT_EQ(describe_infer_reload(gone), "infer.model's file " + infer.model + " was replaced");

  // Kept in the run folder for `vapipe validate --reload`, as the supervisor saw them.
  EXPECT_FALSE(read_infer_file_identities(dir.string()).has_value());
  ASSERT_TRUE(write_infer_file_identities(dir.string(), loaded).ok());
  const auto kept = read_infer_file_identities(dir.string());
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->model, loaded.model);
  EXPECT_EQ(kept->labels, loaded.labels);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vapipe
