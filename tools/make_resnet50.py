#!/usr/bin/python3
"""Write a randomly initialised ResNet-50 as TorchScript plus a 1000-line labels file.

For the GPU benchmark (tools/gpu-bench.py): a classifier of realistic size and cost (25.6M
parameters, about 4.1 GFLOPs per 224x224 image, ~100 MB); the predictions are meaningless.

Usage (any python3 with torch; works with torch 1.13 and 2.x; torchvision is not needed)::

    python3 tools/make_resnet50.py [MODEL_PT [LABELS_TXT]] [--seed N] [--check-fp16]

Defaults: build/models/resnet50_random.pt and build/models/resnet50_random.labels.txt
(the labels path defaults to MODEL_PT with .pt replaced by .labels.txt).

Model contract: input float32 [N,3,224,224] (NCHW), output logits float32 [N,1000]. The file holds
fp32 weights; vapipe converts the model to fp16 at load when `infer.precision: fp16`.
Labels: class_0 ... class_999, one per line.

The standard ResNet-50 (Bottleneck blocks, layers [3,4,6,3], stride on the 3x3 convolution as in
torchvision's "ResNet v1.5", same module names as torchvision.models.resnet50) is defined in
tools/resnet.py.

Random weights and fp16: with plain random initialisation (BatchNorm at identity) activations grow
through the 16 residual blocks (measured here: up to about 515, logits up to about 112, on random
inputs), which fits fp16 (max 65504) but with little precision left and a margin that depends on the
seed. The script therefore sets the BatchNorm running statistics from a few forward passes over random
inputs (as training would), which keeps activations of order 10 (about 26), and checks that the
largest activation of the fp32 model stays below 1000. With --check-fp16 and a CUDA device it also
runs the saved model in fp16 on the GPU and compares it with fp32.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn

from resnet import Bottleneck, ResNet, labels_path, save  # tools/resnet.py, beside this script


def calibrate_batchnorm(model, batches=2, batch_size=8, size=224):
    """Sets BatchNorm running mean/var from forward passes over random (normalised-image-like) inputs."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(batch_size, 3, size, size))
    model.eval()


def max_activation(model, x):
    """Largest absolute value of any module's output (fp32), to check the fp16 range."""
    peak = [0.0]

    def hook(_module, _inputs, output):
        if isinstance(output, torch.Tensor):
            peak[0] = max(peak[0], float(output.detach().abs().max()))

    handles = [m.register_forward_hook(hook) for m in model.modules() if m is not model]
    with torch.no_grad():
        out = model(x)
    for h in handles:
        h.remove()
    return max(peak[0], float(out.abs().max()))


def check_fp16_on_cuda(path, x, ref):
    """Runs the saved model in fp16 on the GPU (if there is one); returns a line for the log."""
    if not torch.cuda.is_available():
        return "fp16 check skipped: no CUDA device"
    m = torch.jit.load(path, map_location="cuda").eval().half()
    with torch.no_grad():
        out = m(x.cuda().half()).float().cpu()
    if not torch.isfinite(out).all():
        raise SystemExit("make_resnet50: fp16 output on CUDA is not finite")
    diff = float((out - ref).abs().max())
    agree = float((out.argmax(1) == ref.argmax(1)).float().mean())
    scale = float(ref.abs().max())
    if diff > 0.05 * max(scale, 1.0):
        raise SystemExit(f"make_resnet50: fp16 on CUDA differs from fp32 by {diff} (logit scale {scale})")
    return f"fp16 on {torch.cuda.get_device_name(0)}: max |fp16 - fp32| = {diff:.4g} (logits up to {scale:.3g}), top-1 agrees on {agree:.0%}"


def main():
    ap = argparse.ArgumentParser(description="Write a random-weight ResNet-50 TorchScript model.")
    ap.add_argument("model", nargs="?", default="build/models/resnet50_random.pt")
    ap.add_argument("labels", nargs="?", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check-fp16", action="store_true", help="also run the saved model in fp16 on CUDA (if available)")
    args = ap.parse_args()
    labels = labels_path(args.model, args.labels)

    torch.set_num_threads(min(4, os.cpu_count() or 1))
    torch.manual_seed(args.seed)
    model = ResNet(Bottleneck, [3, 4, 6, 3], 1000)
    calibrate_batchnorm(model)
    try:
        scripted = torch.jit.script(model)
    except Exception as e:  # TorchScript is in maintenance in PyTorch 2.x; tracing gives the same graph here
        print(f"make_resnet50: torch.jit.script failed ({e}); tracing instead", file=sys.stderr)
        scripted = torch.jit.trace(model, torch.randn(1, 3, 224, 224))
    save(scripted, args.model, labels)

    x = torch.randn(2, 3, 224, 224)
    loaded = torch.jit.load(args.model, map_location="cpu").eval()
    with torch.no_grad():
        out = loaded(x)
        ref = model(x)
    assert out.shape == (2, 1000), out.shape
    assert out.dtype == torch.float32, out.dtype
    assert torch.isfinite(out).all()
    assert torch.allclose(out, ref, atol=1e-3, rtol=1e-3), (out - ref).abs().max()
    peak = max_activation(model, x)
    assert peak < 1000.0, f"largest activation {peak} is too close to the fp16 limit"
    nparams = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.model} ({os.path.getsize(args.model)} bytes, {nparams} parameters, torch {torch.__version__}) "
          f"and {labels} (1000 labels); output {list(out.shape)}, largest fp32 activation {peak:.3g}")
    if args.check_fp16:
        print(check_fp16_on_cuda(args.model, x, ref))
    return 0


if __name__ == "__main__":
    sys.exit(main())
