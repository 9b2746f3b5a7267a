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
same module names as torchvision.models.resnet18) is defined here.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn


def conv3x3(i, o, stride=1):
    return nn.Conv2d(i, o, 3, stride, 1, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(64, 2)
        self.layer2 = self._make_layer(128, 2, stride=2)
        self.layer3 = self._make_layer(256, 2, stride=2)
        self.layer4 = self._make_layer(512, 2, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride, bias=False),
                                       nn.BatchNorm2d(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def main():
    ap = argparse.ArgumentParser(description="Write a random-weight ResNet-18 TorchScript model.")
    ap.add_argument("model", nargs="?", default="build/models/resnet18_random.pt")
    ap.add_argument("labels", nargs="?", default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    labels = args.labels
    if labels is None:
        base = args.model[:-3] if args.model.endswith(".pt") else args.model
        labels = base + ".labels.txt"

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    model = ResNet18(1000).eval()
    scripted = torch.jit.script(model)
    for p in (args.model, labels):
        d = os.path.dirname(p)
        if d:
            os.makedirs(d, exist_ok=True)
    scripted.save(args.model)
    with open(labels, "w") as f:
        f.write("".join(f"class_{i}\n" for i in range(1000)))

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
