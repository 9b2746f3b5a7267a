#!/usr/bin/python3
"""Write a randomly initialised ResNet-18 as TorchScript plus a 1000-line labels file.

Used for throughput/latency tests of the inference stage with a realistically
sized model (about 11.7M parameters, ~45 MB); the predictions are meaningless.

Usage (Debian python with torch; the pyenv python3 on PATH has no torch)::

    /usr/bin/python3 tools/make_resnet18.py [MODEL_PT [LABELS_TXT]] [--seed N]

Defaults: build/models/resnet18_random.pt and build/models/resnet18_random.labels.txt
(the labels path defaults to MODEL_PT with .pt replaced by .labels.txt).

Model contract: input float32 [N,3,224,224] (NCHW), output logits float32 [N,1000].
Labels: class_0 ... class_999, one per line.

torchvision is not required: the standard ResNet-18 (BasicBlock, layers [2,2,2,2],
same module names as torchvision.models.resnet18) is defined in tools/resnet.py.
"""
import argparse
import os
import sys

import torch

from resnet import BasicBlock, ResNet, labels_path, save  # tools/resnet.py, beside this script


def main():
    ap = argparse.ArgumentParser(description="Write a random-weight ResNet-18 TorchScript model.")
    ap.add_argument("model", nargs="?", default="build/models/resnet18_random.pt")
    ap.add_argument("labels", nargs="?", default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    labels = labels_path(args.model, args.labels)

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    model = ResNet(BasicBlock, [2, 2, 2, 2], 1000).eval()
    save(torch.jit.script(model), args.model, labels)

    loaded = torch.jit.load(args.model).eval()
    with torch.no_grad():
        x = torch.randn(2, 3, 224, 224)
        out = loaded(x)
        ref = model(x)
    assert out.shape == (2, 1000), out.shape
    assert torch.allclose(out, ref, atol=1e-4), (out - ref).abs().max()
    nparams = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.model} ({os.path.getsize(args.model)} bytes, {nparams} parameters) "
          f"and {labels} (1000 labels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
