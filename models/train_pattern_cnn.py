#!/usr/bin/python3
"""Train the small videotestsrc-pattern classifier shipped as models/pattern_cnn.pt.

The model recognises GStreamer ``videotestsrc`` patterns so that the pipeline's
end-to-end results can be checked: encode ``videotestsrc pattern=NAME``, run it
through vapipe, and the top-1 label must be NAME.

Usage (Debian python with torch 1.13 CPU; the pyenv python3 on PATH has no torch)::

    /usr/bin/python3 models/train_pattern_cnn.py                 # full run, ~6-9 min on 1 core
    /usr/bin/python3 models/train_pattern_cnn.py --cache /tmp/pc # keep/reuse generated frames
    /usr/bin/python3 models/train_pattern_cnn.py --out-dir /tmp/m --epochs 20

Options: ``--out-dir`` (default: the directory of this script), ``--epochs``
(default 14), ``--seed`` (default 0), ``--cache DIR`` (store the generated
224x224 frames as .npz and reuse them on later runs), ``--threads`` (torch
threads, default 1).

Requirements: gst-launch-1.0 (GStreamer 1.22) with videotestsrc, videoconvert,
x264enc, avdec_h264, h264parse, mp4mux/qtdemux, matroskamux/matroskademux.

Outputs (in --out-dir):
  pattern_cnn.pt          TorchScript; input float32 [N,3,224,224] RGB, NCHW,
                          (pixel/255 - mean)/std with ImageNet mean/std;
                          output logits [N, num_classes] (no softmax).
  pattern_cnn.labels.txt  line i = label of class i (videotestsrc nicknames).
  pattern_cnn.eval.json   held-out metrics (overall / per class / per condition / e2e-like).

Data: frames are produced by gst-launch-1.0 at their NATIVE resolution as
packed RGB (``videoconvert ! video/x-raw,format=RGB ! fdsink fd=1``; rows are
padded to a multiple of 4 bytes, as GStreamer does) and resized in torch with
exactly the pipeline's resize: ``F.interpolate(x, (224,224), mode='bilinear',
align_corners=False)`` (half-pixel centres, no antialias).  Conditions: raw
videotestsrc frames (RGB painted directly, or painted as I420 and converted),
and frames that went through x264enc (both the default negotiated input format,
which with this GStreamer is Y444_10LE / High 4:4:4, and I420) and back through
avdec_h264.  Training and held-out clips use disjoint resolutions, bitrates and
speed presets.  The "e2e-like" evaluation muxes 1280x720 / 640x480 / 320x240
clips into mp4 (x264enc ! mp4mux) and mkv (matroskamux) files, decodes them with
``filesrc ! qtdemux|matroskademux ! h264parse ! avdec_h264`` and classifies
every decoded frame.

Seeds are fixed (numpy/torch); only videotestsrc's own snow noise is not
seedable, so regenerated data differs slightly in the snow class.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CLASSES = ["smpte", "snow", "black", "white", "red", "green", "blue",
           "ball", "pinwheel", "spokes", "gradient", "colors"]
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
SIZE = 224

# Disjoint settings for training and held-out evaluation.
TRAIN_RES = [(160, 120), (320, 240), (640, 480), (854, 480), (1280, 720),
             (1920, 1080), (400, 300), (720, 576), (352, 288), (1024, 768)]
HELD_RES = [(176, 144), (480, 360), (960, 540), (800, 600), (1366, 768), (1600, 900)]
TRAIN_BITRATES = [200, 300, 500, 800, 1200, 2000, 4000]
HELD_BITRATES = [250, 400, 1000, 1500, 2500, 3000]
TRAIN_PRESETS = ["ultrafast", "superfast", "veryfast", "faster"]
HELD_PRESETS = ["fast", "medium"]
SPEEDS = [0, 0, 3, -7, 11, -2]
BALL_MOTIONS = ["wavy", "wavy", "sweep", "hsweep"]  # wavy (default) twice as often
E2E_RES = [(1280, 720), (640, 480), (320, 240)]


# --------------------------------------------------------------------------
# Data generation
# --------------------------------------------------------------------------
def resize_to_input(frame_hwc_uint8):
    """Exactly the pipeline's resize; returns uint8 HWC 224x224 (rounded)."""
    t = torch.from_numpy(frame_hwc_uint8).permute(2, 0, 1).unsqueeze(0).float()
    r = F.interpolate(t, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    return r[0].round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0).numpy()


def src_desc(spec):
    props = f"pattern={spec['pattern']} num-buffers={spec['n']}"
    if spec["pattern"] == "ball":
        props += f" motion={spec.get('motion', 'wavy')}"
    elif spec.get("speed", 0):
        props += f" horizontal-speed={spec['speed']}"
    caps = f"video/x-raw,width={spec['w']},height={spec['h']},framerate=30/1"
    if spec.get("fmt"):
        caps = caps.replace("video/x-raw", f"video/x-raw,format={spec['fmt']}")
    return f"videotestsrc {props} ! {caps}"


def enc_desc(spec):
    e = "x264enc"
    if spec.get("bitrate"):
        e += f" bitrate={spec['bitrate']}"
    if spec.get("preset"):
        e += f" speed-preset={spec['preset']}"
    if spec.get("keyint"):
        e += f" key-int-max={spec['keyint']}"
    if spec.get("tune"):
        e += f" tune={spec['tune']}"
    e += f" threads={spec.get('threads', 1)}"
    return e


RGB_SINK = "videoconvert ! video/x-raw,format=RGB ! fdsink fd=1"


def rgb_sink(spec):
    """Optionally keep only every d-th frame (videorate, after decoding) so long
    clips (the wavy ball needs 200 frames for one period) stay cheap to convert."""
    d = spec.get("decim", 1)
    if d > 1:
        return f"videorate drop-only=true ! video/x-raw,framerate=30/{d} ! {RGB_SINK}"
    return RGB_SINK


def read_rgb_frames(pipeline, w, h, keep):
    """Run gst-launch-1.0, read packed RGB frames from stdout, keep some indices
    (None = all), return uint8 [k,224,224,3]."""
    stride = (w * 3 + 3) & ~3
    fsize = stride * h
    cmd = ["gst-launch-1.0", "-q"] + shlex.split(pipeline)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, i = [], 0
    while True:
        buf = p.stdout.read(fsize)
        if not buf:
            break
        if len(buf) != fsize:
            raise RuntimeError(f"short frame ({len(buf)} of {fsize} bytes): {pipeline}")
        if keep is None or i in keep:
            a = np.frombuffer(buf, np.uint8).reshape(h, stride)[:, : w * 3].reshape(h, w, 3).copy()
            out.append(resize_to_input(a))
        i += 1
    err = p.stderr.read()
    if p.wait() != 0:
        raise RuntimeError(f"gst-launch failed: {pipeline}\n{err.decode(errors='replace')}")
    if not out:
        raise RuntimeError(f"no frames: {pipeline}")
    return np.stack(out)


def gen_clip(spec, keep):
    """spec['mode']: raw | x264 | mp4 | mkv."""
    mode = spec["mode"]
    if mode == "raw":
        return read_rgb_frames(f"{src_desc(spec)} ! {rgb_sink(spec)}", spec["w"], spec["h"], keep)
    if mode == "x264":
        pl = f"{src_desc(spec)} ! {enc_desc(spec)} ! avdec_h264 ! {rgb_sink(spec)}"
        return read_rgb_frames(pl, spec["w"], spec["h"], keep)
    mux, demux, ext = {"mp4": ("mp4mux", "qtdemux", "mp4"),
                       "mkv": ("matroskamux", "matroskademux", "mkv")}[mode]
    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "clip." + ext)
        enc = f"{src_desc(spec)} ! {enc_desc(spec)} ! {mux} ! filesink location={path}"
        r = subprocess.run(["gst-launch-1.0", "-q", "-e"] + shlex.split(enc),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise RuntimeError(f"encode failed: {enc}\n{r.stderr.decode(errors='replace')}")
        dec = f"filesrc location={path} ! {demux} ! h264parse ! avdec_h264 ! {rgb_sink(spec)}"
        return read_rgb_frames(dec, spec["w"], spec["h"], keep)


def condition(spec):
    if spec["mode"] == "raw":
        return "raw"
    return "x264-" + ("i420" if spec.get("fmt") == "I420" else "default")


def make_specs(rng, split):
    """Clip specs for 'train' or 'held'.  Each entry: (spec, keep_indices)."""
    res_list = TRAIN_RES if split == "train" else HELD_RES
    rates = TRAIN_BITRATES if split == "train" else HELD_BITRATES
    presets = TRAIN_PRESETS if split == "train" else HELD_PRESETS
    specs = []
    for ci, pat in enumerate(CLASSES):
        # Frames kept per clip: the moving ball needs many positions (it is only
        # a few pixels wide at 224x224 for HD sources); snow changes every frame.
        if pat == "ball":
            k = 12 if split == "train" else 8
        elif pat == "snow":
            k = 6
        else:
            k = 5 if split == "train" else 4
        for (w, h) in res_list:
            variants = [
                {"mode": "raw", "fmt": rng.choice([None, None, "I420"])},
                {"mode": "x264", "fmt": None},
                {"mode": "x264", "fmt": "I420"},
            ]
            hd = w * h >= 1024 * 768
            if split == "train":
                # Textured patterns get an extra low-bitrate coded clip (lowest
                # bitrates at HD, where they are hardest).
                if pat not in ("black", "white", "red", "green", "blue"):
                    variants.append({"mode": "x264", "fmt": rng.choice([None, "I420"]),
                                     "bitrate": int(rng.choice(rates[:2] if hd else rates[:3]))})
                # The ball is smallest (5-8 px) at HD: two more clips there.
                if pat == "ball" and hd:
                    variants += [{"mode": "raw", "fmt": rng.choice([None, "I420"])},
                                 {"mode": "x264", "fmt": rng.choice([None, "I420"])}]
            for v in variants:
                s = {"pattern": pat, "w": w, "h": h, "label": ci, **v}
                if pat == "ball":
                    s["motion"] = str(rng.choice(BALL_MOTIONS))
                else:
                    s["speed"] = int(rng.choice(SPEEDS))
                if s["mode"] != "raw":
                    s.setdefault("bitrate", int(rng.choice(rates)))
                    s["preset"] = str(rng.choice(presets))
                    s["keyint"] = int(rng.choice([0, 15, 30, 60]))  # 0: x264enc default
                    s["threads"] = int(rng.choice([1, 2]))
                if pat == "ball":
                    # long clips (wavy has a 200-frame period), every d-th frame decoded
                    n = int(rng.randint(80, 241))
                    s["decim"] = d = int(rng.choice([4, 5, 7]))
                    avail = n // d
                else:
                    # cheaper clips at large resolutions
                    nmax = 24 if w * h >= 1280 * 720 else 40
                    n = avail = int(rng.randint(k + 1, nmax + 1))
                s["n"] = n
                keep = set(int(x) for x in rng.choice(avail, size=k, replace=False))
                specs.append((s, keep))
    return specs


def make_e2e_specs():
    """E2E-test-like clips: 3 resolutions x {mp4, mkv} x {default x264enc input
    format (Y444_10LE) with default encoder settings, I420 with bitrate 1000};
    every decoded frame is evaluated.  Clips are 30 frames, the ball 200 frames
    (one full period of the default wavy motion)."""
    specs = []
    for ci, pat in enumerate(CLASSES):
        for (w, h) in E2E_RES:
            for cont in ("mp4", "mkv"):
                for fmt, extra in ((None, {}), ("I420", {"bitrate": 1000, "tune": "zerolatency",
                                                         "preset": "veryfast"})):
                    s = {"pattern": pat, "w": w, "h": h, "label": ci, "mode": cont,
                         "fmt": fmt, "n": 200 if pat == "ball" else 30, "threads": 0, **extra}
                    specs.append((s, None))
    return specs


def build_set(specs, name, cache):
    if cache:
        path = os.path.join(cache, f"{name}.npz")
        if os.path.exists(path):
            d = np.load(path, allow_pickle=True)
            print(f"[data] {name}: loaded {len(d['y'])} frames from {path}", flush=True)
            return d["x"], d["y"], list(d["meta"])
    t0 = time.time()
    xs, ys, meta = [], [], []
    for i, (s, keep) in enumerate(specs):
        fr = gen_clip(s, keep)
        xs.append(fr)
        ys += [s["label"]] * len(fr)
        m = {"clip": i, "cond": condition(s), "res": f"{s['w']}x{s['h']}",
             "mode": s["mode"], "fmt": s.get("fmt") or "default"}
        meta += [m] * len(fr)
        if (i + 1) % 50 == 0:
            print(f"[data] {name}: {i + 1}/{len(specs)} clips, {time.time() - t0:.0f}s", flush=True)
    x = np.concatenate(xs)
    y = np.array(ys, np.int64)
    print(f"[data] {name}: {len(y)} frames from {len(specs)} clips in {time.time() - t0:.0f}s", flush=True)
    if cache:
        os.makedirs(cache, exist_ok=True)
        np.savez(os.path.join(cache, f"{name}.npz"), x=x, y=y, meta=np.array(meta, dtype=object))
    return x, y, meta


# --------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------
def cbr(i, o, k, s):
    return [nn.Conv2d(i, o, k, s, k // 2, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True)]


class PatternCNN(nn.Module):
    """4 conv layers (strides 4,2,2,2: 224 -> 56 -> 28 -> 14 -> 7), pooled at two scales:
    global average + global max of the 7x7x128 output, plus global max of the
    28x28x32 stem output; one linear layer on the 288 pooled features.

    The stem max pool is what makes the ball reliable: from a 1080p/720p source
    the ball is only ~5x8 px at 224x224 and lies on black, so its evidence is a
    single strong local response that a global average (or even a max over the
    coarse 7x7 map) does not separate well from the plain black class."""

    def __init__(self, num_classes):
        super().__init__()
        self.stem = nn.Sequential(*cbr(3, 16, 5, 4), *cbr(16, 32, 3, 2))
        self.body = nn.Sequential(*cbr(32, 64, 3, 2), *cbr(64, 128, 3, 2))
        self.fc = nn.Linear(128 + 128 + 32, num_classes)

    def forward(self, x):
        a = self.stem(x)
        x = self.body(a)
        x = torch.cat([x.mean(dim=(2, 3)), x.amax(dim=(2, 3)), a.amax(dim=(2, 3))], dim=1)
        return self.fc(x)


def _fold_seq(seq):
    layers = []
    mods = list(seq)
    for i in range(0, len(mods), 3):
        conv, bn = mods[i], mods[i + 1]
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        fused = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size,
                          conv.stride, conv.padding, bias=True)
        with torch.no_grad():
            fused.weight.copy_(conv.weight * scale.view(-1, 1, 1, 1))
            fused.bias.copy_(bn.bias - bn.running_mean * scale)
        layers += [fused, nn.ReLU()]
    return nn.Sequential(*layers)


class _Folded(nn.Module):
    """Same computation as PatternCNN in eval mode, BatchNorm folded into the convs."""

    def __init__(self, stem, body, fc):
        super().__init__()
        self.stem = stem
        self.body = body
        self.fc = fc

    def forward(self, x):
        a = self.stem(x)
        x = self.body(a)
        x = torch.cat([x.mean(dim=(2, 3)), x.amax(dim=(2, 3)), a.amax(dim=(2, 3))], dim=1)
        return self.fc(x)


def fold_bn(model):
    """Return an equivalent eval-only module with BatchNorm folded into the convs."""
    return _Folded(_fold_seq(model.stem), _fold_seq(model.body), model.fc).eval()


_MEAN_T = torch.tensor(MEAN).view(1, 3, 1, 1) * 255.0
_STD_T = torch.tensor(STD).view(1, 3, 1, 1) * 255.0


def to_input(xb_uint8_nhwc):
    x = xb_uint8_nhwc.permute(0, 3, 1, 2).float()
    return (x - _MEAN_T) / _STD_T


def augment(xb, g):
    """Mild photometric jitter on uint8 NHWC -> float NCHW in 0..255."""
    x = xb.permute(0, 3, 1, 2).float()
    n = x.shape[0]
    r = lambda *s: torch.rand(*s, generator=g)
    contrast = 0.85 + 0.3 * r(n, 1, 1, 1)
    bright = (r(n, 1, 1, 1) - 0.5) * 30.0
    gain = 0.95 + 0.1 * r(n, 3, 1, 1)
    m = x.mean(dim=(1, 2, 3), keepdim=True)
    x = (x - m) * contrast + m + bright
    x = x * gain
    sigma = r(n, 1, 1, 1) * 4.0
    x = x + torch.randn(x.shape, generator=g) * sigma
    return x.clamp(0, 255)


def predict(model, x_uint8, bs=256):
    model.eval()
    outs = []
    with torch.no_grad():
        for i in range(0, len(x_uint8), bs):
            xb = torch.from_numpy(x_uint8[i:i + bs])
            outs.append(model(to_input(xb)))
    return torch.cat(outs)


def report(name, y, pred, meta):
    y = np.asarray(y)
    pred = np.asarray(pred)
    ok = y == pred
    res = {"frames": int(len(y)), "accuracy": float(ok.mean())}
    res["per_class"] = {c: float(ok[y == i].mean()) for i, c in enumerate(CLASSES) if (y == i).any()}
    for key in ("cond", "res", "mode"):
        vals = sorted(set(m[key] for m in meta))
        res["per_" + key] = {v: float(ok[np.array([m[key] == v for m in meta])].mean()) for v in vals}
    conf = {}
    for t, p in zip(y[~ok], pred[~ok]):
        k = f"{CLASSES[t]}->{CLASSES[p]}"
        conf[k] = conf.get(k, 0) + 1
    res["confusions"] = conf
    print(f"[eval] {name}: {ok.sum()}/{len(y)} = {100 * ok.mean():.2f}%", flush=True)
    print("        per class: " + ", ".join(f"{c} {100 * v:.1f}" for c, v in res["per_class"].items()))
    for key in ("cond", "res", "mode"):
        print(f"        per {key}: " + ", ".join(f"{c} {100 * v:.1f}" for c, v in res["per_" + key].items()))
    if conf:
        print(f"        confusions: {conf}")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--epochs", type=int, default=14)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cache", default=None, help="directory to store/reuse generated frames")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    rng = np.random.RandomState(args.seed)
    t_start = time.time()

    train_specs = make_specs(rng, "train")
    held_specs = make_specs(rng, "held")
    xtr, ytr, _ = build_set(train_specs, "train", args.cache)
    xho, yho, mho = build_set(held_specs, "held", args.cache)
    xe2e, ye2e, me2e = build_set(make_e2e_specs(), "e2e", args.cache)
    t_data = time.time() - t_start

    model = PatternCNN(len(CLASSES))
    nparams = sum(p.numel() for p in model.parameters())
    print(f"[model] {nparams} parameters", flush=True)
    bs = 64
    steps_per_epoch = (len(ytr) + bs - 1) // bs
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, epochs=args.epochs,
                                                steps_per_epoch=steps_per_epoch, pct_start=0.2)
    g = torch.Generator().manual_seed(args.seed)
    xtr_t = torch.from_numpy(xtr)
    ytr_t = torch.from_numpy(ytr)
    t0 = time.time()
    for ep in range(args.epochs):
        model.train()
        perm = torch.randperm(len(ytr), generator=g)
        tot, correct, n = 0.0, 0, 0
        for i in range(0, len(perm), bs):
            idx = perm[i:i + bs]
            x = augment(xtr_t[idx], g)
            x = (x - _MEAN_T) / _STD_T
            yb = ytr_t[idx]
            out = model(x)
            loss = F.cross_entropy(out, yb, label_smoothing=0.05)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            tot += loss.item() * len(idx)
            correct += (out.argmax(1) == yb).sum().item()
            n += len(idx)
        msg = f"[train] epoch {ep + 1}/{args.epochs} loss {tot / n:.4f} acc {100 * correct / n:.2f}%"
        if ep == args.epochs - 1 or (ep + 1) % 4 == 0:
            acc = (predict(model, xho).argmax(1).numpy() == yho).mean()
            msg += f" held-out {100 * acc:.2f}%"
        print(msg + f" ({time.time() - t0:.0f}s)", flush=True)
    t_train = time.time() - t0

    model.eval()
    folded = fold_bn(model)
    scripted = torch.jit.script(folded)
    os.makedirs(args.out_dir, exist_ok=True)
    pt = os.path.join(args.out_dir, "pattern_cnn.pt")
    scripted.save(pt)
    with open(os.path.join(args.out_dir, "pattern_cnn.labels.txt"), "w") as f:
        f.write("\n".join(CLASSES) + "\n")

    # Evaluate the exported file itself.
    loaded = torch.jit.load(pt)
    loaded.eval()
    with torch.no_grad():
        xb = to_input(torch.from_numpy(xho[:8]))
        diff = (loaded(xb) - model(xb)).abs().max().item()
        one = loaded(xb[:1])
    assert one.shape == (1, len(CLASSES)), one.shape
    print(f"[export] {pt}: {os.path.getsize(pt)} bytes, max |folded - bn| = {diff:.2e}", flush=True)
    results = {
        "classes": CLASSES, "parameters": nparams, "model_bytes": os.path.getsize(pt),
        "train_frames": int(len(ytr)), "train_clips": len(train_specs),
        "data_seconds": round(t_data, 1), "train_seconds": round(t_train, 1), "epochs": args.epochs,
        "train_accuracy": float((predict(loaded, xtr).argmax(1).numpy() == ytr).mean()),
        "held_out": report("held-out", yho, predict(loaded, xho).argmax(1).numpy(), mho),
        "e2e_like": report("e2e-like (mp4/mkv)", ye2e, predict(loaded, xe2e).argmax(1).numpy(), me2e),
        "torch": torch.__version__,
    }
    results["total_seconds"] = round(time.time() - t_start, 1)
    with open(os.path.join(args.out_dir, "pattern_cnn.eval.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"[done] data {t_data:.0f}s, train {t_train:.0f}s, total {results['total_seconds']:.0f}s")


if __name__ == "__main__":
    sys.exit(main())
