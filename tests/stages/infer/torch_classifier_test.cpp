// The real LibTorch path: the shipped TorchScript model, models made from it here, and models that must
// be refused.
#include <cstdint>
#include <gtest/gtest.h>
#include <torch/script.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "pipeline/cuda/gpu_info.h"
#include "stages/infer/classifier.h"
#include "stages/infer/labels.h"

namespace vapipe {
namespace {

const std::string kModels = std::string(VAPIPE_SOURCE_DIR) + "/models/";
const TensorInfo kInput{DType::kFloat32, 3, 224, 224};

ClassifierOptions options_for(const std::string& path) {
  ClassifierOptions o;
  o.model_path = path;
  o.device = "cpu";
  o.input = kInput;
  o.warmup_batch_size = 2;
  o.warmup_batches = 1;
  return o;
}

TEST(TorchClassifier, ShippedModelLoadsWarmsUpAndMatchesItsLabels) {
  auto c = load_torchscript_classifier(options_for(kModels + "pattern_cnn.pt"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto labels = load_labels(kModels + "pattern_cnn.labels.txt");
  ASSERT_TRUE(labels.ok());
  EXPECT_EQ((*c)->num_classes(), static_cast<int64_t>(labels->size()));
  EXPECT_GE(labels->size(), 8u);
  EXPECT_EQ((*c)->device(), "cpu");

  std::vector<float> batch(3 * kInput.elements(), 0.5f);
  auto r = (*c)->classify(reinterpret_cast<const std::byte*>(batch.data()), 3, 3);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 3u);
  for (const TopK& t : *r) {
    ASSERT_EQ(t.class_ids.size(), 3u);
    EXPECT_GE(t.scores[0], t.scores[1]);
    EXPECT_GT(t.scores[0], 0.f);
    EXPECT_LE(t.scores[0], 1.f);
  }
}

TEST(TorchClassifier, Float16InputIsAccepted) {
  ClassifierOptions o = options_for(kModels + "pattern_cnn.pt");
  o.input.dtype = DType::kFloat16;
  auto c = load_torchscript_classifier(o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  std::vector<uint16_t> batch(kInput.elements(), 0x3c00);  // 1.0
  auto r = (*c)->classify(reinterpret_cast<const std::byte*>(batch.data()), 1, 1);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->size(), 1u);
}

TEST(TorchClassifier, MissingAndCorruptModelsAreClearErrors) {
  auto missing = load_torchscript_classifier(options_for("/nonexistent/model.pt"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/model.pt"), std::string::npos);

  const std::string junk = std::filesystem::temp_directory_path() / ("vapipe-junk-" + std::to_string(getpid()) + ".pt");
  std::ofstream(junk) << "this is not a model";
  auto corrupt = load_torchscript_classifier(options_for(junk));
  std::filesystem::remove(junk);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.status().message().find(junk), std::string::npos) << corrupt.status().message();
  EXPECT_NE(corrupt.status().message().find("TorchScript"), std::string::npos) << corrupt.status().message();
}

// The usual mistake: the file of torch.save(model.state_dict()) (Python's format, written here by
// torch::pickle_save), an old pickled one, or another framework's model. Each error says what the file
// is and how to export TorchScript.
TEST(TorchClassifier, AStateDictOrAnotherFrameworksModelIsRefusedSayingHowToExportTorchScript) {
  const std::string base = std::filesystem::temp_directory_path() / ("vapipe-not-ts-" + std::to_string(getpid()));
  c10::Dict<std::string, torch::Tensor> state;
  state.insert("conv1.weight", torch::zeros({4, 3, 3, 3}));
  const std::vector<char> saved = torch::jit::pickle_save(c10::IValue(state));
  std::ofstream(base + "-state.pt", std::ios::binary).write(saved.data(), static_cast<std::streamsize>(saved.size()));
  std::ofstream(base + "-old.pt", std::ios::binary) << "\x80\x02}q\x00.";
  std::ofstream(base + ".onnx", std::ios::binary) << "\x08\x07\x12\x07pytorch";
  for (const auto& [file, expected] : std::vector<std::pair<std::string, std::string>>{
           {base + "-state.pt", "it is a file of torch.save (a state_dict, or a module pickled with its Python class)"},
           {base + "-old.pt", "it is a Python pickle (torch.save of PyTorch before 1.6"},
           {base + ".onnx", "TorchScript files are zip archives and this one is not (an ONNX model?)"}}) {
    auto c = load_torchscript_classifier(options_for(file));
    std::filesystem::remove(file);
    ASSERT_FALSE(c.ok()) << file;
    EXPECT_NE(c.status().message().find(expected), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("torch.jit.script(model).save(path)"), std::string::npos)
        << c.status().message();
  }
}

TEST(TorchClassifier, ModelThatRejectsTheInputShapeIsAStartUpError) {
  ClassifierOptions o = options_for(kModels + "pattern_cnn.pt");
  o.input = TensorInfo{DType::kFloat32, 5, 224, 224};  // five channels: the first conv refuses
  auto c = load_torchscript_classifier(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("forward on [2, 5, 224, 224]"), std::string::npos) << c.status().message();
}

TEST(TorchClassifier, CudaRequestWithoutCudaIsAClearError) {
  ClassifierOptions o = options_for(kModels + "pattern_cnn.pt");
  o.device = "cuda";
  auto c = load_torchscript_classifier(o);
  if (c.ok()) GTEST_SKIP() << "this machine has CUDA";
  EXPECT_NE(c.status().message().find("infer.device"), std::string::npos) << c.status().message();
}

TEST(TorchClassifier, Fp16AndChannelsLastAskedForOnTheCpuRunFp32WithTheSameAnswers) {
  ClassifierOptions half = options_for(kModels + "pattern_cnn.pt");
  half.precision = DType::kFloat16;
  half.channels_last = true;
  auto a = load_torchscript_classifier(options_for(kModels + "pattern_cnn.pt"));
  auto b = load_torchscript_classifier(half);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().message();
  EXPECT_EQ((*b)->device(), "cpu");
  std::vector<float> batch(2 * kInput.elements());
  for (size_t i = 0; i < batch.size(); ++i) batch[i] = static_cast<float>(i % 251) / 125.f - 1.f;
  auto ra = (*a)->classify(reinterpret_cast<const std::byte*>(batch.data()), 2, 3);
  auto rb = (*b)->classify(reinterpret_cast<const std::byte*>(batch.data()), 2, 3);
  ASSERT_TRUE(ra.ok() && rb.ok());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*ra)[i].class_ids, (*rb)[i].class_ids);
    EXPECT_FLOAT_EQ((*ra)[i].scores[0], (*rb)[i].scores[0]);
  }
  // Tensors in GPU memory cannot be classified without a GPU: a clear refusal, not a crash.
  if (probe_gpus(false).devices.empty()) {
    std::vector<const std::byte*> items = {reinterpret_cast<const std::byte*>(batch.data())};
    auto r = (*a)->classify_device(items, 0, 3);
    ASSERT_FALSE(r.ok());
    EXPECT_FALSE(r.status().message().empty());
  }
}

TEST(TorchClassifier, TimesAForwardPassPerBatchSize) {
  auto c = load_torchscript_classifier(options_for(kModels + "pattern_cnn.pt"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto one = (*c)->time_forward(1, 2);
  auto eight = (*c)->time_forward(8, 2);
  ASSERT_TRUE(one.ok() && eight.ok());
  EXPECT_GT(*one, 0.0);
  EXPECT_GT(*eight, 0.0);
}

TEST(TorchClassifier, PaddedBatchesGiveTheSameAnswersAsExactOnes) {
  auto exact = load_torchscript_classifier(options_for(kModels + "pattern_cnn.pt"));
  auto padded = load_torchscript_classifier(options_for(kModels + "pattern_cnn.pt"));
  ASSERT_TRUE(exact.ok() && padded.ok());
  ASSERT_TRUE((*padded)->use_batch_sizes({1, 2, 4, 8}).ok());
  EXPECT_EQ((*padded)->run_size(3), 4u);
  EXPECT_EQ((*padded)->run_size(8), 8u);
  EXPECT_EQ((*padded)->run_size(9), 9u);  // larger than every size: as it is
  EXPECT_EQ((*exact)->run_size(3), 3u);
  // Five different images (each its own pattern), then the first three alone.
  std::vector<float> batch(5 * kInput.elements());
  for (size_t i = 0; i < batch.size(); ++i) {
    const size_t image = i / kInput.elements();
    batch[i] = static_cast<float>((i * (image + 3)) % 97) / 48.f - 1.f;
  }
  for (size_t n : {size_t{5}, size_t{3}}) {
    auto a = (*exact)->classify(reinterpret_cast<const std::byte*>(batch.data()), n, 3);
    auto b = (*padded)->classify(reinterpret_cast<const std::byte*>(batch.data()), n, 3);
    ASSERT_TRUE(a.ok() && b.ok()) << b.status().message();
    ASSERT_EQ(b->size(), n);  // the padding rows' results are dropped
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ((*a)[i].class_ids, (*b)[i].class_ids) << "image " << i << " of " << n;
      for (size_t k = 0; k < 3; ++k) EXPECT_NEAR((*a)[i].scores[k], (*b)[i].scores[k], 1e-5) << "image " << i;
    }
  }
}

TEST(TorchClassifier, CudaGraphsAreForCudaOnlyAutoRunsPlainOnTheCpu) {
  ClassifierOptions o = options_for(kModels + "pattern_cnn.pt");
  o.device = "cpu";
  o.cuda_graphs = "auto";
  auto automatic = load_torchscript_classifier(o);
  ASSERT_TRUE(automatic.ok()) << automatic.status().message();
  ASSERT_TRUE((*automatic)->use_batch_sizes({1, 2, 4}).ok());
  EXPECT_FALSE((*automatic)->replays_cuda_graphs());
  o.cuda_graphs = "on";
  auto required = load_torchscript_classifier(o);
  ASSERT_TRUE(required.ok()) << required.status().message();
  Status s = (*required)->use_batch_sizes({1, 2, 4});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("infer.cuda_graphs: on, but the model runs on cpu"), std::string::npos) << s.message();
}

// The shipped model wrapped by `forward_source` (TorchScript, calling self.inner), saved as TorchScript
// into a temporary file whose path is returned.
std::string save_wrapped_shipped_model(const std::string& name, const std::string& forward_source) {
  const std::string path =
      std::filesystem::temp_directory_path() / ("vapipe-" + name + "-" + std::to_string(getpid()) + ".pt");
  torch::jit::Module wrapped("__torch__." + name);
  wrapped.register_module("inner", torch::jit::load(kModels + "pattern_cnn.pt"));
  wrapped.define(forward_source);
  wrapped.save(path);
  return path;
}

// The shipped model with a softmax at its end, as models are often exported.
std::string save_shipped_model_with_softmax() {
  return save_wrapped_shipped_model("WithSoftmax", R"(
def forward(self, x):
    return torch.softmax(self.inner.forward(x), 1)
)");
}

// infer.output: a model that ends in its own softmax gives the same scores as the shipped one under
// auto (found at warm-up; no second softmax) and probabilities; logits forced on it takes a second
// softmax, which flattens the scores (the order of the classes stays).
TEST(TorchClassifier, AModelThatEndsInASoftmaxGivesTheSameScoresUnderAutoAsOneOfLogits) {
  const std::string path = save_shipped_model_with_softmax();
  std::vector<float> batch(2 * kInput.elements());
  for (size_t i = 0; i < batch.size(); ++i) batch[i] = static_cast<float>((i * 7919) % 255) / 255.f - 0.5f;
  auto classify = [&](const std::string& model, const std::string& output) {
    ClassifierOptions o = options_for(model);
    o.output = output;
    auto c = load_torchscript_classifier(o);
    EXPECT_TRUE(c.ok()) << c.status().message();
    if (!c.ok()) return std::pair{false, std::vector<TopK>{}};
    auto r = (*c)->classify(reinterpret_cast<const std::byte*>(batch.data()), 2, 3);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return std::pair{(*c)->outputs_probabilities(), r.ok() ? *r : std::vector<TopK>{}};
  };
  const auto [shipped_as_is, reference] = classify(kModels + "pattern_cnn.pt", "auto");
  EXPECT_FALSE(shipped_as_is) << "the shipped model's rows are logits";
  ASSERT_EQ(reference.size(), 2u);
  EXPECT_GT(reference[0].scores[0], 0.3f) << "the check below needs a score well above 1/classes";
  for (const std::string output : {"auto", "probabilities"}) {
    const auto [as_is, got] = classify(path, output);
    EXPECT_TRUE(as_is) << output;
    ASSERT_EQ(got.size(), 2u) << output;
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(got[i].class_ids, reference[i].class_ids) << output << ", frame " << i;
      for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(got[i].scores[k], reference[i].scores[k], 1e-5) << output;
    }
  }
  const auto [as_is, twice] = classify(path, "logits");
  EXPECT_FALSE(as_is);
  ASSERT_EQ(twice.size(), 2u);
  EXPECT_EQ(twice[0].class_ids, reference[0].class_ids);
  EXPECT_LT(twice[0].scores[0], 0.5f * reference[0].scores[0]) << "a softmax of probabilities is flat";
  std::filesystem::remove(path);
}

// A model that returns more than its logits: a tuple (logits, features), as torchvision's GoogLeNet and
// many others; a list; a dict with "logits" (Hugging Face's style). Each is read from its logits and
// answers as the shipped model does. One that returns something else is refused at start-up, saying
// what it returned.
TEST(TorchClassifier, AModelThatReturnsATupleListOrDictIsReadFromItsLogits) {
  std::vector<float> batch(2 * kInput.elements());
  for (size_t i = 0; i < batch.size(); ++i) batch[i] = static_cast<float>((i * 7919) % 255) / 255.f - 0.5f;
  auto classify = [&](const std::string& model) {
    auto c = load_torchscript_classifier(options_for(model));
    EXPECT_TRUE(c.ok()) << c.status().message();
    if (!c.ok()) return std::vector<TopK>{};
    auto r = (*c)->classify(reinterpret_cast<const std::byte*>(batch.data()), 2, 3);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : std::vector<TopK>{};
  };
  const std::vector<TopK> reference = classify(kModels + "pattern_cnn.pt");
  ASSERT_EQ(reference.size(), 2u);
  for (const auto& [name, source] : std::vector<std::pair<std::string, std::string>>{
           {"ReturnsATuple", "def forward(self, x):\n    y = self.inner.forward(x)\n    return y, x.mean(dim=[1, 2, 3])\n"},
           {"ReturnsAList", "def forward(self, x):\n    y = self.inner.forward(x)\n    return [y, y * 2.0]\n"},
           {"ReturnsADict", "def forward(self, x):\n    y = self.inner.forward(x)\n"
                            "    return {'pooled': x.mean(dim=[2, 3]), 'logits': y}\n"}}) {
    const std::string path = save_wrapped_shipped_model(name, source);
    const std::vector<TopK> got = classify(path);
    ASSERT_EQ(got.size(), 2u) << name;
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(got[i].class_ids, reference[i].class_ids) << name;
      for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(got[i].scores[k], reference[i].scores[k], 1e-5) << name;
    }
    std::filesystem::remove(path);
  }
  const std::string odd = save_wrapped_shipped_model("ReturnsANumber", R"(
def forward(self, x):
    return int(self.inner.forward(x).argmax())
)");
  auto refused = load_torchscript_classifier(options_for(odd));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("it returns a value of kind 'Int', expected a tensor [N, classes], or a tuple"),
            std::string::npos)
      << refused.status().message();
  std::filesystem::remove(odd);
}

// A multi-label model (each label's own probability: its sigmoid at its output, directly, in a
// submodule and through a dict's "logits") is found by its graph under auto: its scores are
// its rows, the sigmoid of the shipped model's logits, not softmaxed. multi_label_logits takes the
// sigmoid of a model exported without it: the same scores from the shipped model itself.
TEST(TorchClassifier, AMultiLabelModelsScoresAreEachLabelsOwnProbability) {
  std::vector<float> batch(2 * kInput.elements());
  for (size_t i = 0; i < batch.size(); ++i) batch[i] = static_cast<float>((i * 7919) % 255) / 255.f - 0.5f;
  torch::jit::Module shipped = torch::jit::load(kModels + "pattern_cnn.pt");
  shipped.eval();
  const torch::Tensor x = torch::from_blob(batch.data(), {2, 3, 224, 224}).clone();
  const auto [expected_scores, expected_ids] = [&] {
    torch::NoGradGuard no_grad;
    return torch::sigmoid(shipped.forward({x}).toTensor()).topk(3, 1);
  }();
  auto classify = [&](const std::string& model, const std::string& output) {
    ClassifierOptions o = options_for(model);
    o.output = output;
    auto c = load_torchscript_classifier(o);
    EXPECT_TRUE(c.ok()) << c.status().message();
    if (!c.ok()) return std::pair{false, std::vector<TopK>{}};
    auto r = (*c)->classify(reinterpret_cast<const std::byte*>(batch.data()), 2, 3);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return std::pair{(*c)->outputs_probabilities(), r.ok() ? *r : std::vector<TopK>{}};
  };
  auto expect_sigmoid_scores = [&](const std::vector<TopK>& got, const std::string& what) {
    ASSERT_EQ(got.size(), 2u) << what;
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t k = 0; k < 3; ++k) {
        EXPECT_EQ(got[i].class_ids[k], expected_ids[i][k].item<int64_t>()) << what << ", frame " << i;
        EXPECT_NEAR(got[i].scores[k], expected_scores[i][k].item<float>(), 1e-5) << what << ", frame " << i;
      }
    }
  };
  const std::string direct = save_wrapped_shipped_model("WithSigmoid", R"(
def forward(self, x):
    return torch.sigmoid(self.inner.forward(x))
)");
  const std::string nested =
      std::filesystem::temp_directory_path() / ("vapipe-NestedSigmoid-" + std::to_string(getpid()) + ".pt");
  {
    torch::jit::Module outer("__torch__.NestedSigmoid");
    outer.register_module("head", torch::jit::load(direct));
    outer.define("def forward(self, x):\n    return {'pooled': x.mean(dim=[2, 3]), 'logits': self.head.forward(x).contiguous()}\n");
    outer.save(nested);
  }
  for (const std::string& model : {direct, nested}) {
    const auto [as_is, got] = classify(model, "auto");
    EXPECT_TRUE(as_is) << model;
    expect_sigmoid_scores(got, model + " under auto");
  }
  const auto [shipped_as_is, from_logits] = classify(kModels + "pattern_cnn.pt", "multi_label_logits");
  EXPECT_FALSE(shipped_as_is);
  expect_sigmoid_scores(from_logits, "the shipped model under multi_label_logits");
  // Their scores are not a distribution: the shipped model's top three sigmoids sum past one.
  EXPECT_GT(from_logits[0].scores[0] + from_logits[0].scores[1] + from_logits[0].scores[2], 1.0f);
  std::filesystem::remove(direct);
  std::filesystem::remove(nested);
}

TEST(TorchClassifier, TheLanesGpuFallsBackToTheCpuOnlyWhenTheConfigSaidAuto) {
  // Debian's LibTorch is a CPU build: on a GPU machine `auto` still runs (on the CPU), `cuda` refuses.
  ClassifierOptions o = options_for(kModels + "pattern_cnn.pt");
  o.device = "cuda:0";
  auto strict = load_torchscript_classifier(o);
  o.cpu_fallback = true;
  auto fallback = load_torchscript_classifier(o);
  ASSERT_TRUE(fallback.ok()) << fallback.status().message();
  if ((*fallback)->device() != "cpu") GTEST_SKIP() << "this LibTorch has CUDA";
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("sees no CUDA device"), std::string::npos) << strict.status().message();
}

}  // namespace
}  // namespace vapipe
