// A classifier with a known answer: class = (first float of the item, rounded) mod classes, so a test
// chooses each frame's class through its tensor. Can be told to fail.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "stages/infer/auto_batch.h"
#include "stages/infer/classifier.h"

namespace vapipe::testing {

class FakeClassifier final : public Classifier {
 public:
  FakeClassifier(int64_t classes, TensorInfo input) : classes_(classes), input_(input) {}
  Result<std::vector<TopK>> classify(const std::byte* batch, size_t n, size_t top_k) override {
    batch_sizes.push_back(n);
    if (fail) return Internal("fake failure");
    std::vector<TopK> out(n);
    for (size_t i = 0; i < n; ++i) {
      float first;
      std::memcpy(&first, batch + i * input_.bytes(), sizeof first);
      const int32_t best = static_cast<int32_t>(std::lround(first)) % classes_;
      for (size_t k = 0; k < std::min<size_t>(top_k, classes_); ++k) {
        out[i].class_ids.push_back(static_cast<int32_t>((best + k) % classes_));
        out[i].scores.push_back(k == 0 ? 0.9f : 0.1f / static_cast<float>(k + 1));
      }
    }
    return out;
  }
  Status use_batch_sizes(const std::vector<size_t>& sizes) override {
    fixed_sizes = sizes;
    return Status::Ok();
  }
  size_t run_size(size_t n) const override { return padded_size_for(fixed_sizes, n); }
  // As a classifier that recorded a CUDA graph for each fixed size (infer.cuda_graphs).
  bool replays_cuda_graphs() const override { return graphs && !fixed_sizes.empty(); }
  bool replays_cuda_graph_at(size_t rows) const override {
    return graphs && std::find(fixed_sizes.begin(), fixed_sizes.end(), rows) != fixed_sizes.end();
  }
  int64_t num_classes() const override { return classes_; }
  std::string device() const override { return device_name; }

  std::vector<size_t> batch_sizes;
  std::vector<size_t> fixed_sizes;  // what use_batch_sizes was given
  bool fail = false;
  std::string device_name = "fake";  // "cuda:N": as a classifier on GPU N
  bool graphs = false;  // pretend each fixed size replays a CUDA graph

 private:
  int64_t classes_;
  TensorInfo input_;
};

}  // namespace vapipe::testing
