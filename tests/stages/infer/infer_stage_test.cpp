#include "stages/infer/infer_stage.h"

#include <cstdint>
#include <gtest/gtest.h>

#include <regex>

#include <thread>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <fstream>

#include "pipeline/file_identity.h"
#include "stages/infer/labels.h"
#include "tests/fakes/fake_classifier.h"
#include "tests/fakes/stage_harness.h"

namespace vapipe {
namespace {

using testing::CollectingEmitter;
using testing::FakeClassifier;

const TensorInfo kInput{DType::kFloat32, 3, 4, 4};

class InferStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("vapipe-infer-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    write_labels({"zero", "one", "two", "three"});
    config_ = testing::test_config(2);
    config_.preprocess.width = 4;
    config_.preprocess.height = 4;
    config_.batch.max_batch_size = 4;
    config_.infer.labels = (dir_ / "labels.txt").string();
    config_.infer.top_k = 2;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void write_labels(const std::vector<std::string>& labels) {
    std::ofstream out(dir_ / "labels.txt");
    for (const auto& l : labels) out << l << "\n";
  }

  // A stage whose classifier answers class = first float of the tensor.
  std::unique_ptr<InferStage> open_stage(int64_t classes = 4) {
    auto stage = std::make_unique<InferStage>([this, classes](const ClassifierOptions& o) -> Result<std::unique_ptr<Classifier>> {
      options_ = o;
      auto c = std::make_unique<FakeClassifier>(classes, o.input);
      fake_ = c.get();
      return std::unique_ptr<Classifier>(std::move(c));
    });
    Status s = stage->open(StageContext{config_});
    EXPECT_TRUE(s.ok()) << s.message();
    return stage;
  }

  static Message tensor(uint32_t stream, uint64_t seq, float first) {
    Message m = testing::tensor_message(stream, seq, kInput);
    std::memset(m.payload.data(), 0, m.payload.size());
    std::memcpy(m.payload.data(), &first, sizeof first);
    return m;
  }

  std::filesystem::path dir_;
  Config config_;
  ClassifierOptions options_;
  FakeClassifier* fake_ = nullptr;
};

TEST_F(InferStageTest, OneResultPerFrameInBatchOrderWithLabels) {
  auto stage = open_stage();
  EXPECT_EQ(options_.warmup_batch_size, 4u);
  EXPECT_EQ(options_.input, kInput);
  Message batch;
  batch.kind = MessageKind::kBatch;
  batch.items.push_back(tensor(0, 0, 2));
  batch.items.push_back(tensor(1, 0, 3));
  batch.items.push_back(tensor(0, 1, 1));
  CollectingEmitter out;
  ASSERT_TRUE(stage->process(std::move(batch), out).ok());
  ASSERT_EQ(out.messages.size(), 3u);
  EXPECT_EQ(out.messages[0].prediction.top_k[0].label, "two");
  EXPECT_EQ(out.messages[0].prediction.top_k.size(), 2u);
  EXPECT_EQ(out.messages[1].env.stream_index, 1u);
  EXPECT_EQ(out.messages[1].prediction.top_k[0].label, "three");
  EXPECT_EQ(out.messages[2].env.seq, 1u);
  EXPECT_EQ(out.messages[2].prediction.top_k[0].class_id, 1);
  EXPECT_EQ(out.messages[2].prediction.model, "model");
  EXPECT_EQ(fake_->batch_sizes, std::vector<size_t>{3});
}

// A model that is slow to load and warm up is slow per batch too: the watchdog's floor is ten times
// what open() took, so a big model on a CPU does not look stuck.
TEST_F(InferStageTest, TheWatchdogFloorIsTenTimesTheModelsLoadAndWarmUp) {
  write_labels({"a", "b", "c", "d"});
  InferStage stage([](const ClassifierOptions& o) -> Result<std::unique_ptr<Classifier>> {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // load and warm-up
    return std::unique_ptr<Classifier>(std::make_unique<FakeClassifier>(4, o.input));
  });
  ASSERT_TRUE(stage.open(StageContext{config_}).ok());
  EXPECT_GE(stage.watchdog_floor_s(), 1.0);
  EXPECT_LT(stage.watchdog_floor_s(), 60.0);
}

TEST_F(InferStageTest, BadFramesGetErrorResultsAndTheRestOfTheBatchIsClassified) {
  auto stage = open_stage();
  Message batch;
  batch.kind = MessageKind::kBatch;
  batch.items.push_back(tensor(0, 0, 1));
  Message upstream_error = tensor(0, 1, 1);
  upstream_error.payload.reset();
  upstream_error.error = "preprocess: bad layout";
  batch.items.push_back(std::move(upstream_error));
  Message wrong_shape = testing::tensor_message(0, 2, TensorInfo{DType::kFloat32, 3, 8, 8});
  batch.items.push_back(std::move(wrong_shape));
  batch.items.push_back(tensor(0, 3, 2));
  CollectingEmitter out;
  ASSERT_TRUE(stage->process(std::move(batch), out).ok());
  ASSERT_EQ(out.messages.size(), 4u);
  EXPECT_TRUE(out.messages[0].prediction.error.empty());
  EXPECT_EQ(out.messages[1].prediction.error, "preprocess: bad layout");
  EXPECT_NE(out.messages[2].prediction.error.find("does not match the model input"), std::string::npos);
  EXPECT_EQ(out.messages[3].prediction.top_k[0].label, "two");
  EXPECT_EQ(fake_->batch_sizes, std::vector<size_t>{2});
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(out.messages[i].env.seq, i);
}

TEST_F(InferStageTest, AFailedForwardGivesEveryFrameAnErrorResultAndTheStageGoesOn) {
  auto stage = open_stage();
  fake_->fail = true;
  Message batch;
  batch.kind = MessageKind::kBatch;
  batch.items.push_back(tensor(0, 0, 1));
  batch.items.push_back(tensor(0, 1, 1));
  CollectingEmitter out;
  ASSERT_TRUE(stage->process(std::move(batch), out).ok());
  ASSERT_EQ(out.messages.size(), 2u);
  EXPECT_NE(out.messages[1].prediction.error.find("inference failed"), std::string::npos);
  fake_->fail = false;
  Message next;
  next.kind = MessageKind::kBatch;
  next.items.push_back(tensor(0, 2, 3));
  ASSERT_TRUE(stage->process(std::move(next), out).ok());
  EXPECT_EQ(out.messages[2].prediction.top_k[0].label, "three");
}

// A batch on the GPU that fails: while the GPU's CUDA context still works (out of memory, say), its
// frames get error results and the stage goes on; once it no longer does (an illegal address: every
// later CUDA call fails too), the stage stops (kAborted: its process fails and its lane restarts with
// a new context) and publishes nothing for that batch, nor anything after it, so that an archive job
// classifies those frames again instead of recording errors for them.
TEST_F(InferStageTest, ABatchThatFailsOnAGpuThatNoLongerWorksStopsTheStageSoThatItsLaneRestarts) {
  std::vector<int> asked;
  bool gpu_works = true;
  InferStage stage(
      [this](const ClassifierOptions& o) -> Result<std::unique_ptr<Classifier>> {
        auto c = std::make_unique<FakeClassifier>(4, o.input);
        c->device_name = "cuda:1";
        fake_ = c.get();
        return std::unique_ptr<Classifier>(std::move(c));
      },
      [&](int gpu) {
        asked.push_back(gpu);
        return gpu_works ? Status::Ok()
                         : Internal("CUDA on GPU 1 no longer works (cudaErrorIllegalAddress: an illegal memory access "
                                    "was encountered)");
      });
  ASSERT_TRUE(stage.open(StageContext{config_}).ok());
  fake_->fail = true;
  auto batch = [](uint64_t first_seq) {
    Message b;
    b.kind = MessageKind::kBatch;
    b.items.push_back(tensor(0, first_seq, 1));
    b.items.push_back(tensor(0, first_seq + 1, 1));
    return b;
  };
  CollectingEmitter out;
  ASSERT_TRUE(stage.process(batch(0), out).ok());
  ASSERT_EQ(out.messages.size(), 2u);
  EXPECT_NE(out.messages[0].prediction.error.find("inference failed"), std::string::npos);
  EXPECT_EQ(asked, std::vector<int>{1});
  gpu_works = false;
  std::vector<Message> queued;
  queued.push_back(batch(2));
  queued.push_back(testing::end_message(0, 4));
  Status s = stage.process_many(std::move(queued), out);
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.message();
  EXPECT_NE(s.message().find("CUDA on GPU 1 no longer works"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("infer exits so that its lane restarts"), std::string::npos) << s.message();
  EXPECT_EQ(out.messages.size(), 2u);  // no result for frames 2 and 3, and no end of the stream after them
}

// A live job's reload of the model: infer follows the job's copy of its config (rewritten by the
// supervisor), loads the new model on a thread of its own while the running one classifies, and takes it
// between batches once it is ready.
class InferReloadTest : public InferStageTest {
 protected:
  void SetUp() override {
    InferStageTest::SetUp();
    copy_ = (dir_ / "config.yaml").string();
    write_copy("model: " + path("model.pt") + ", labels: " + path("labels.txt") + ", model_name: model, top_k: 2");
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write_copy(const std::string& infer, const std::string& more = "") {
    // (The supervisor writes it whole: atomically, with a new identity.)
    const std::string tmp = copy_ + ".tmp";
    std::ofstream(tmp) << "job: {name: t, mode: live}\n"
                          "streams: [{id: s0, uri: 'test://smpte'}, {id: s1, uri: 'test://smpte'}]\n"
                          "preprocess: {width: 4, height: 4}\nbatch: {max_batch_size: 4}\n"
                          "infer: {" + infer + "}\n" + more;
    std::filesystem::rename(tmp, copy_);
  }
  // Models by file: their classes (0: cannot be loaded), and how long a load takes.
  struct Model {
    int64_t classes = 4;
    std::chrono::milliseconds load{0};
  };
  std::unique_ptr<InferStage> open_following() {
    auto stage = std::make_unique<InferStage>([this](const ClassifierOptions& o) -> Result<std::unique_ptr<Classifier>> {
      const Model m = models_.count(o.model_path) ? models_.at(o.model_path) : Model{};
      std::this_thread::sleep_for(m.load);
      loaded_paths_.push_back(o.model_path);
      options_ = o;
      if (m.classes == 0) return InvalidArgument("model " + o.model_path + " is not a TorchScript model (a test's)");
      return std::unique_ptr<Classifier>(std::make_unique<FakeClassifier>(m.classes, o.input));
    });
    stage->set_config_copy(copy_);
    Status s = stage->open(StageContext{config_});
    EXPECT_TRUE(s.ok()) << s.message();
    return stage;
  }
  // The copy is looked at once a second: after it, the stage's deadline.
  static void look_at_the_copy(InferStage& stage) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    CollectingEmitter none;
    ASSERT_TRUE(stage.on_deadline(none).ok());
  }
  static bool wait_loaded(InferStage& stage) {
    for (int i = 0; i < 500; ++i) {
      if (stage.next_deadline() == SteadyTime{}) return true;  // ready: taken at once
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  static double counter(const InferStage& stage, const std::string& name) {
    for (const auto& [n, v] : stage.counters()) {
      if (n == name) return v;
    }
    return -1;
  }
  // One result per frame of a batch of two (their classes 2 and 3).
  static std::vector<Message> classify(InferStage& stage, uint64_t first_seq) {
    Message b;
    b.kind = MessageKind::kBatch;
    b.items.push_back(tensor(0, first_seq, 2));
    b.items.push_back(tensor(0, first_seq + 1, 3));
    CollectingEmitter out;
    EXPECT_TRUE(stage.process(std::move(b), out).ok());
    return std::move(out.messages);
  }

  std::string copy_;
  std::map<std::string, Model> models_;
  std::vector<std::string> loaded_paths_;
};

TEST_F(InferReloadTest, ANewModelClassifiesEveryBatchAfterItIsReadyAndTheRunningOneUntilThen) {
  auto stage = open_following();
  ASSERT_EQ(classify(*stage, 0)[0].prediction.model, "model");
  std::ofstream(dir_ / "labels-v2.txt") << "cat\ndog\nbird\n";
  models_[path("v2.pt")] = Model{3, std::chrono::milliseconds(400)};
  write_copy("model: " + path("v2.pt") + ", labels: " + path("labels-v2.txt") + ", top_k: 2");
  look_at_the_copy(*stage);
  EXPECT_TRUE(stage->loading_model());
  EXPECT_EQ(stage->facts().back(), (std::pair<std::string, std::string>{"loading", path("v2.pt")}));
  // Meanwhile: the running model.
  const std::vector<Message> during = classify(*stage, 2);
  ASSERT_EQ(during.size(), 2u);
  EXPECT_EQ(during[0].prediction.model, "model");
  EXPECT_EQ(during[0].prediction.top_k[0].label, "two");
  ASSERT_TRUE(wait_loaded(*stage));
  const std::vector<Message> after = classify(*stage, 4);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0].env.seq, 4u);
  EXPECT_EQ(after[0].prediction.model, "v2");  // its file's name: the reload set no model_name
  EXPECT_EQ(after[0].prediction.top_k[0].label, "bird");
  EXPECT_EQ(after[1].prediction.top_k[0].label, "cat");  // (3 mod 3 classes)
  EXPECT_FALSE(stage->loading_model());
  EXPECT_EQ(loaded_paths_, (std::vector<std::string>{path("model.pt"), path("v2.pt")}));
  EXPECT_EQ(options_.warmup_batch_size, 4u);
  EXPECT_EQ(counter(*stage, "model_reloads"), 1);
  EXPECT_EQ(counter(*stage, "model_reload_failures"), 0);
  EXPECT_EQ(stage->facts(), (StageFacts{{"model", "v2"}, {"model_file", path("v2.pt")},
                                        {"labels_file", path("labels-v2.txt")},
                                        {"config_copy", file_identity(copy_)}}));  // (the copy as last looked at)
}

// A model that cannot be used (it does not load; its classes are not its labels'; a label the config
// names is not among them) is said, and the running one goes on; fixed under the same path, it is
// tried again.
TEST_F(InferReloadTest, AModelThatCannotBeUsedLeavesTheRunningOneClassifying) {
  auto stage = open_following();
  models_[path("broken.pt")] = Model{0};
  write_copy("model: " + path("broken.pt") + ", labels: " + path("labels.txt") + ", top_k: 2");
  look_at_the_copy(*stage);
  ASSERT_TRUE(wait_loaded(*stage));
  std::vector<Message> out = classify(*stage, 0);
  EXPECT_EQ(out[0].prediction.model, "model");
  EXPECT_EQ(out[0].prediction.top_k[0].label, "two");
  EXPECT_EQ(counter(*stage, "model_reload_failures"), 1);

  models_[path("three.pt")] = Model{3};
  write_copy("model: " + path("three.pt") + ", labels: " + path("labels.txt") + ", top_k: 2");
  look_at_the_copy(*stage);
  ASSERT_TRUE(wait_loaded(*stage));
  out = classify(*stage, 2);
  EXPECT_EQ(out[0].prediction.model, "model");
  EXPECT_EQ(counter(*stage, "model_reload_failures"), 2);
  EXPECT_EQ(counter(*stage, "model_reloads"), 0);
  const StageFacts failed = stage->facts();
  ASSERT_EQ(failed.size(), 5u);
  EXPECT_EQ(failed[0], (std::pair<std::string, std::string>{"model", "model"}));
  EXPECT_EQ(failed[4].first, "last_reload_error");
  EXPECT_NE(failed[4].second.find("has 3 outputs but labels file"), std::string::npos) << failed[4].second;

  // The file fixed under the same path (the config, unchanged, makes no reload): tried again as it
  // changes, and taken.
  models_[path("three.pt")] = Model{4};
  std::ofstream(path("three.pt")) << "fixed";
  look_at_the_copy(*stage);
  ASSERT_TRUE(wait_loaded(*stage));
  EXPECT_EQ(classify(*stage, 4)[0].prediction.model, "three");
  EXPECT_EQ(counter(*stage, "model_reloads"), 1);
  const StageFacts fixed = stage->facts();
  EXPECT_TRUE(std::none_of(fixed.begin(), fixed.end(), [](const auto& f) { return f.first == "last_reload_error"; }));
  EXPECT_EQ(fixed[3].first, "model_file_modified");  // (three.pt is a file: when it was written)
  look_at_the_copy(*stage);
  EXPECT_FALSE(stage->loading_model()) << "tried again once, not at every look";

  // Another model, named: taken.
  write_copy("model: " + path("four.pt") + ", labels: " + path("labels.txt") + ", top_k: 2, model_name: door-v3");
  look_at_the_copy(*stage);
  ASSERT_TRUE(wait_loaded(*stage));
  EXPECT_EQ(classify(*stage, 6)[0].prediction.model, "door-v3");
  EXPECT_EQ(counter(*stage, "model_reloads"), 2);
}

// model_name and top_k alone need no new model: taken at the next batch. A copy rewritten with no
// change of infer's (another section's reload) loads nothing.
TEST_F(InferReloadTest, ANameOrTopKAloneIsTakenAtTheNextBatchWithoutANewModel) {
  auto stage = open_following();
  write_copy("model: " + path("model.pt") + ", labels: " + path("labels.txt") + ", model_name: gate, top_k: 1");
  look_at_the_copy(*stage);
  EXPECT_FALSE(stage->loading_model());
  const std::vector<Message> out = classify(*stage, 0);
  EXPECT_EQ(out[0].prediction.model, "gate");
  EXPECT_EQ(out[0].prediction.top_k.size(), 1u);
  write_copy("model: " + path("model.pt") + ", labels: " + path("labels.txt") + ", model_name: gate, top_k: 1",
             "publish: {segments_min_frames: 5}\n");
  look_at_the_copy(*stage);
  EXPECT_FALSE(stage->loading_model());
  EXPECT_EQ(loaded_paths_.size(), 1u);
  EXPECT_EQ(counter(*stage, "model_reloads"), 0);
}

// A new model copied over the running one's file (the same path, so the config is the same): a reload,
// which the supervisor then writes as the same text again, has it loaded; the labels file too. The copy
// rewritten with both files as they were loads nothing, nor does a file replaced without a reload.
TEST_F(InferReloadTest, AModelFileReplacedUnderTheSamePathIsLoadedAgainAtAReload) {
  std::ofstream(path("model.pt")) << "v1";
  auto stage = open_following();
  const std::string same =
      "model: " + path("model.pt") + ", labels: " + path("labels.txt") + ", model_name: model, top_k: 2";
  write_copy(same);
  look_at_the_copy(*stage);
  EXPECT_FALSE(stage->loading_model()) << "the files are as they were";

  models_[path("model.pt")] = Model{3};
  std::ofstream(path("model.pt")) << "v2, three classes";
  std::ofstream(path("labels.txt")) << "cat\ndog\nbird\n";
  look_at_the_copy(*stage);
  EXPECT_FALSE(stage->loading_model()) << "a file replaced is loaded at a reload, not before";
  EXPECT_EQ(classify(*stage, 0)[0].prediction.top_k[0].label, "two");
  write_copy(same);
  look_at_the_copy(*stage);
  ASSERT_TRUE(wait_loaded(*stage));
  std::vector<Message> out = classify(*stage, 2);
  EXPECT_EQ(out[0].prediction.model, "model");
  EXPECT_EQ(out[0].prediction.top_k[0].label, "bird");  // class 2 of the new labels, from the new model
  EXPECT_EQ(out[1].prediction.top_k[0].label, "cat");   // (3 mod 3 classes)
  EXPECT_EQ(counter(*stage, "model_reloads"), 1);
  EXPECT_EQ(loaded_paths_, (std::vector<std::string>{path("model.pt"), path("model.pt")}));
  const StageFacts facts = stage->facts();
  ASSERT_EQ(facts.size(), 5u);
  EXPECT_EQ(facts[3].first, "model_file_modified");
  EXPECT_TRUE(std::regex_match(facts[3].second, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"))) << facts[3].second;
  write_copy(same);
  look_at_the_copy(*stage);
  EXPECT_FALSE(stage->loading_model()) << "the replaced files were loaded: nothing more to load";

  // Replaced by one that cannot be used: said, and the running model goes on. A later reload with it
  // as it was does not try it again; fixed under the same path, it is tried again as it changes.
  models_[path("model.pt")] = Model{0};
  std::ofstream(path("model.pt")) << "not TorchScript";
  write_copy(same);
  look_at_the_copy(*stage);
  ASSERT_TRUE(wait_loaded(*stage));
  out = classify(*stage, 4);
  EXPECT_EQ(out[0].prediction.top_k[0].label, "bird");
  EXPECT_EQ(counter(*stage, "model_reload_failures"), 1);
  write_copy(same);
  look_at_the_copy(*stage);
  EXPECT_FALSE(stage->loading_model()) << "the same file that could not be used";
  EXPECT_EQ(loaded_paths_.size(), 3u);
  models_[path("model.pt")] = Model{3};
  std::ofstream(path("model.pt")) << "v3, fixed";
  look_at_the_copy(*stage);
  ASSERT_TRUE(wait_loaded(*stage));
  EXPECT_EQ(classify(*stage, 6)[0].prediction.top_k[0].label, "bird");
  EXPECT_EQ(counter(*stage, "model_reloads"), 2);
  EXPECT_EQ(loaded_paths_.size(), 4u);
}

TEST_F(InferStageTest, ModelWhoseClassesDoNotMatchItsLabelsIsAStartUpError) {
  InferStage stage([](const ClassifierOptions& o) -> Result<std::unique_ptr<Classifier>> {
    return std::unique_ptr<Classifier>(std::make_unique<FakeClassifier>(10, o.input));
  });
  Status s = stage.open(StageContext{config_});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("has 10 outputs but labels file"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("4 labels"), std::string::npos) << s.message();
}

// A labels file that is not there (a README example's path kept, a typo) is said with why, its key and
// the config's line, as the config's own errors are; so is a model file that is not there.
TEST_F(InferStageTest, AMissingLabelsOrModelFileIsNamedByItsKeyAndLine) {
  config_.source = "/jobs/cams.yaml";
  config_.infer.labels = (dir_ / "labelz.txt").string();
  config_.infer.labels_line = 5;
  InferStage stage([](const ClassifierOptions& o) -> Result<std::unique_ptr<Classifier>> {
    return std::unique_ptr<Classifier>(std::make_unique<FakeClassifier>(4, o.input));
  });
  Status s = stage.open(StageContext{config_});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "/jobs/cams.yaml:5: infer.labels: labels file " + config_.infer.labels +
                             ": cannot be opened (No such file or directory)");
  config_.infer.labels = dir_.string();
  Status folder = InferStage([](const ClassifierOptions& o) -> Result<std::unique_ptr<Classifier>> {
                    return std::unique_ptr<Classifier>(std::make_unique<FakeClassifier>(4, o.input));
                  }).open(StageContext{config_});
  EXPECT_NE(folder.message().find(": cannot be opened (it is a folder)"), std::string::npos) << folder.message();

  config_.infer.labels = (dir_ / "labels.txt").string();
  config_.infer.model = "/models/modle.pt";
  config_.infer.model_line = 4;
  Status model = InferStage([](const ClassifierOptions& o) -> Result<std::unique_ptr<Classifier>> {
                   return NotFound("model " + o.model_path + ": file not found");
                 }).open(StageContext{config_});
  EXPECT_EQ(model.message(), "/jobs/cams.yaml:4: infer.model: model /models/modle.pt: file not found");
}

// publish.segments_min_score_by_label names labels by themselves: one the labels file lacks (a typo)
// would never match, so infer refuses to start, naming the config's file and line and the labels.
TEST_F(InferStageTest, ALabelTheConfigNamesThatTheLabelsFileLacksIsAStartUpError) {
  config_.source = "job.yaml";
  config_.publish.segments_min_score_by_label["two"] = {0.3, 11};
  config_.publish.segments_min_score_by_label["thre"] = {0.7, 12};
  InferStage stage([](const ClassifierOptions& o) -> Result<std::unique_ptr<Classifier>> {
    return std::unique_ptr<Classifier>(std::make_unique<FakeClassifier>(4, o.input));
  });
  Status s = stage.open(StageContext{config_});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "job.yaml:12: publish.segments_min_score_by_label: 'thre' is not a label of " +
                             config_.infer.labels + " (its 4 labels: zero, one, two, three)");
  config_.publish.segments_min_score_by_label.erase("thre");
  config_.publish.segments_min_score_by_label["three"] = {0.7, 12};
  // A webhook's labels (its alerts' only) are checked the same way.
  WebhookConfig hook;
  hook.url = "http://127.0.0.1:9/hook";
  hook.labels = {"one", "tow"};
  hook.labels_line = 17;
  config_.publish.webhooks = {WebhookConfig{}, hook};
  InferStage webhook_stage([](const ClassifierOptions& o) -> Result<std::unique_ptr<Classifier>> {
    return std::unique_ptr<Classifier>(std::make_unique<FakeClassifier>(4, o.input));
  });
  s = webhook_stage.open(StageContext{config_});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "job.yaml:17: publish.webhooks[1].labels: 'tow' is not a label of " + config_.infer.labels +
                             " (its 4 labels: zero, one, two, three)");
  config_.publish.webhooks[1].labels = {"one", "two"};
  open_stage();  // every one a label: it opens
}

// Batches that queued while the model was busy go through it together, up to max_batch_size (4
// here); a stream event keeps its place between the results.
TEST_F(InferStageTest, QueuedBatchesAreMergedUpToTheBatchSizeAndEventsKeepTheirPlace) {
  auto stage = open_stage();
  EXPECT_GT(stage->max_inputs_at_once(), 1u);
  auto batch_of = [](std::vector<Message> items) {
    Message b;
    b.kind = MessageKind::kBatch;
    b.items = std::move(items);
    return b;
  };
  std::vector<Message> queued;
  queued.push_back(batch_of({tensor(0, 0, 0), tensor(1, 0, 1)}));
  queued.push_back(batch_of({tensor(0, 1, 2)}));
  queued.push_back(batch_of({tensor(1, 1, 3), tensor(0, 2, 0)}));  // 3 + 2 > 4: a forward of its own
  queued.push_back(testing::end_message(1));
  queued.push_back(batch_of({tensor(0, 3, 1)}));
  CollectingEmitter out;
  ASSERT_TRUE(stage->process_many(std::move(queued), out).ok());
  EXPECT_EQ(fake_->batch_sizes, (std::vector<size_t>{3, 2, 1}));
  ASSERT_EQ(out.messages.size(), 7u);
  const std::vector<int32_t> classes{0, 1, 2, 3, 0};
  for (size_t i = 0; i < 5; ++i) {
    ASSERT_EQ(out.messages[i].kind, MessageKind::kResult) << i;
    EXPECT_EQ(out.messages[i].prediction.top_k[0].class_id, classes[i]) << i;
  }
  EXPECT_EQ(out.messages[5].kind, MessageKind::kStreamEnd);
  EXPECT_EQ(out.messages[6].kind, MessageKind::kResult);
  EXPECT_EQ(out.messages[6].env.seq, 3u);
}

TEST_F(InferStageTest, PaddedBatchShapesAreFixedAtStartExactOnesAreNot) {
  config_.batch.max_batch_size = 20;
  config_.infer.batch_shapes = "padded";
  auto padded = open_stage();
  EXPECT_EQ(fake_->fixed_sizes, (std::vector<size_t>{1, 2, 3, 4, 6, 8, 12, 16, 20}));
  // auto: padded on CUDA only; the fake runs on "fake".
  config_.infer.batch_shapes = "auto";
  auto automatic = open_stage();
  EXPECT_TRUE(fake_->fixed_sizes.empty());
  config_.infer.batch_shapes = "exact";
  auto exact = open_stage();
  EXPECT_TRUE(fake_->fixed_sizes.empty());
}

TEST_F(InferStageTest, CudaGraphsOnNeedAModelOnCudaAutoGoesToTheClassifier) {
  config_.infer.cuda_graphs = "auto";
  auto automatic = open_stage();
  EXPECT_EQ(options_.cuda_graphs, "auto");
  // The fake runs on "fake", not CUDA: `on` cannot hold and says so.
  config_.infer.cuda_graphs = "on";
  InferStage stage([this](const ClassifierOptions& o) -> Result<std::unique_ptr<Classifier>> {
    return std::unique_ptr<Classifier>(std::make_unique<FakeClassifier>(4, o.input));
  });
  Status s = stage.open(StageContext{config_});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("infer.cuda_graphs is 'on' but the model runs on fake"), std::string::npos) << s.message();
}

TEST_F(InferStageTest, BatchesReplayedAsCudaGraphsAreCounted) {
  config_.batch.max_batch_size = 4;
  config_.infer.batch_shapes = "padded";
  auto stage = open_stage();
  fake_->graphs = true;
  CollectingEmitter out;
  Message batch;
  batch.kind = MessageKind::kBatch;
  for (uint64_t i = 0; i < 3; ++i) batch.items.push_back(tensor(0, i, 1.f));  // padded to 3: a graph size
  ASSERT_TRUE(stage->process(std::move(batch), out).ok());
  auto counters = stage->counters();
  auto value = [&](const std::string& name) {
    for (const auto& [k, v] : counters) {
      if (k == name) return v;
    }
    return -1.0;
  };
  EXPECT_EQ(value("batches"), 1);
  EXPECT_EQ(value("cuda_graph_batches"), 1);  // vapipe_infer_cuda_graph_batches_total
  fake_->graphs = false;
  Message plain;
  plain.kind = MessageKind::kBatch;
  plain.items.push_back(tensor(0, 3, 1.f));
  ASSERT_TRUE(stage->process(std::move(plain), out).ok());
  counters = stage->counters();
  EXPECT_EQ(value("batches"), 2);
  EXPECT_EQ(value("cuda_graph_batches"), 1);
}

TEST_F(InferStageTest, StreamEventsPassThrough) {
  auto stage = open_stage();
  CollectingEmitter out;
  ASSERT_TRUE(stage->process(testing::end_message(1), out).ok());
  ASSERT_EQ(out.messages.size(), 1u);
  EXPECT_EQ(out.messages[0].kind, MessageKind::kStreamEnd);
}

TEST_F(InferStageTest, LabelsFileErrorsNameTheFileAndLine) {
  EXPECT_EQ(load_labels((dir_ / "missing.txt").string()).status().code(), StatusCode::kNotFound);
  {
    std::ofstream out(dir_ / "gap.txt");
    out << "a\n\nb\n";
  }
  auto gap = load_labels((dir_ / "gap.txt").string());
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.status().message().find("gap.txt:2: empty label"), std::string::npos) << gap.status().message();
  {
    std::ofstream out(dir_ / "ok.txt");
    out << "a\r\nb \n";
  }
  auto ok = load_labels((dir_ / "ok.txt").string());
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (std::vector<std::string>{"a", "b"}));
  {
    std::ofstream out(dir_ / "windows.txt", std::ios::binary);
    out << "\xEF\xBB\xBF" "caf\xC3\xA9\r\nstra\xC3\x9F" "e\r\n";  // UTF-8 with a byte order mark, CRLF
  }
  auto windows = load_labels((dir_ / "windows.txt").string());
  ASSERT_TRUE(windows.ok()) << windows.status().message();
  EXPECT_EQ(*windows, (std::vector<std::string>{"caf\xC3\xA9", "stra\xC3\x9F" "e"}));
  {
    std::ofstream out(dir_ / "latin1.txt", std::ios::binary);
    out << "cat\nGeb\xE4ude\n";  // Latin-1: one byte for the umlaut, not UTF-8
  }
  auto latin1 = load_labels((dir_ / "latin1.txt").string());
  ASSERT_FALSE(latin1.ok());
  EXPECT_NE(latin1.status().message().find("latin1.txt:2: not UTF-8 text (byte 0xE4 at column 4): save the file as UTF-8"),
            std::string::npos)
      << latin1.status().message();
}

}  // namespace
}  // namespace vapipe
