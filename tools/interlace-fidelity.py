#!/usr/bin/env python3
# ingest.deinterlace, measured: how close a 224x224 bilinear resize (what preprocessing does) of each
# decoded interlaced frame is to the same resize of the progressive frame its first field was taken
# from: the woven frame (deinterlace: off) against its first field alone (first_field). A 50 frames/s
# 1080p test pattern is interlaced to 1080i25 (top field first), encoded with x264 and decoded; luma
# only, mean absolute difference in 0-255 units. Needs Debian's python3-gi, python3-torch (or pip's).
#   /usr/bin/python3 tools/interlace-fidelity.py PATTERN HORIZONTAL_SPEED FRAMES
#   e.g. tools/interlace-fidelity.py pinwheel 10 100
import os, sys, subprocess, tempfile, numpy as np, torch, torch.nn.functional as F
import gi
gi.require_version('Gst', '1.0'); from gi.repository import Gst
Gst.init(None)
pattern, speed, frames = sys.argv[1], sys.argv[2], int(sys.argv[3])
W, H = 1920, 1080
src = f"videotestsrc pattern={pattern} horizontal-speed={speed} num-buffers={frames} ! video/x-raw,format=I420,width={W},height={H},framerate=50/1"
path = os.path.join(tempfile.mkdtemp(prefix="vapipe-interlace-"), f"{pattern}_{speed}_1080i.ts")
subprocess.run(f"gst-launch-1.0 -q {src} ! interlace field-pattern=1:1 top-field-first=true ! x264enc interlaced=true speed-preset=ultrafast qp-max=20 ! h264parse ! mpegtsmux ! filesink location={path}", shell=True, check=True)
def lumas(desc):
    p = Gst.parse_launch(desc + " ! appsink name=s sync=false max-buffers=1000 emit-signals=false")
    s = p.get_by_name("s"); p.set_state(Gst.State.PLAYING); out = []
    while True:
        smp = s.emit("try-pull-sample", 5 * Gst.SECOND)
        if smp is None: break
        b = smp.get_buffer(); ok, m = b.map(Gst.MapFlags.READ)
        out.append(np.frombuffer(m.data, np.uint8, W * H).reshape(H, W).astype(np.float32).copy()); b.unmap(m)
    p.set_state(Gst.State.NULL); return out
ref = lumas(src)[0::2]
dec = lumas(f"filesrc location={path} ! tsdemux ! h264parse ! avdec_h264 ! videoconvert ! video/x-raw,format=I420")
def resize(y): return F.interpolate(torch.from_numpy(y)[None, None], size=(224, 224), mode="bilinear", align_corners=False)[0, 0]
n = min(len(ref), len(dec)); woven = field = 0.0
for r, d in zip(ref[:n], dec[:n]):
    rr = resize(r); woven += (resize(d) - rr).abs().mean().item(); field += (resize(d[0::2]) - rr).abs().mean().item()
print(f"{pattern} speed {speed}: {n} frames; mean |difference| to the progressive frame: woven {woven/n:.2f}, first field {field/n:.2f}")
