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
torchvision's "ResNet v1.5", same module names as torchvision.models.resnet50) is defined here.

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


def conv3x3(i, o, stride=1):
    return nn.Conv2d(i, o, 3, stride, 1, bias=False)


def conv1x1(i, o, stride=1):
    return nn.Conv2d(i, o, 1, stride, bias=False)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv1x1(inplanes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet50(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(64, 3)
        self.layer2 = self._make_layer(128, 4, stride=2)
        self.layer3 = self._make_layer(256, 6, stride=2)
        self.layer4 = self._make_layer(512, 3, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * Bottleneck.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * Bottleneck.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * Bottleneck.expansion, stride),
                                       nn.BatchNorm2d(planes * Bottleneck.expansion))
        layers = [Bottleneck(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * Bottleneck.expansion
        layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


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
    labels = args.labels
    if labels is None:
        base = args.model[:-3] if args.model.endswith(".pt") else args.model
        labels = base + ".labels.txt"

    torch.set_num_threads(min(4, os.cpu_count() or 1))
    torch.manual_seed(args.seed)
    model = ResNet50(1000)
    calibrate_batchnorm(model)
    try:
        scripted = torch.jit.script(model)
    except Exception as e:  # TorchScript is in maintenance in PyTorch 2.x; tracing gives the same graph here
        print(f"make_resnet50: torch.jit.script failed ({e}); tracing instead", file=sys.stderr)
        scripted = torch.jit.trace(model, torch.randn(1, 3, 224, 224))
    for p in (args.model, labels):
        d = os.path.dirname(p)
        if d:
            os.makedirs(d, exist_ok=True)
    scripted.save(args.model)
    with open(labels, "w") as f:
        f.write("".join(f"class_{i}\n" for i in range(1000)))

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
