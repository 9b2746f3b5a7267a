#include "pipeline/infer_reload.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace vapipe
