"""What changing one camera's settings costs a running live job: K real RTSP cameras on loopback
(640x360, 30 fps, H.264, a key frame every 15 frames) in one live job, and a (K+1)-th server, the
replacement camera. One camera's `uri` is changed to the replacement's in the config, two ways:

- reload: the file is edited and `vapipe run` gets SIGHUP; the stream keeps its id and connects to the
  new camera at once (StreamReader::reconfigure). Printed: SIGHUP -> its `reconnecting` event, -> its
  first result from the new camera; the longest gap between two of its results; the longest gap of
  each other camera over the 5 s around it, and their `reconnecting` events (none expected).
- restart: what it took before 2026-12-04 (a reload refused a changed uri): the job is stopped
  (SIGINT) and started again with the new config. Printed: the stop -> every camera's first result
  again (each camera's gap).

With --comeback, cameras that have ended come back under their ids instead (2026-12-05):

- gave up: cam00's server is killed, the camera gives up (ingest.reconnect_attempts 2), the server
  starts again on its port, and `vapipe run` gets SIGHUP with the config unchanged. Printed: SIGHUP ->
  its `started` event, -> its first result; whether its seq went on from its last (no gap, no repeat).
- listed again: cam01 is removed by one reload and listed again by the next. Printed the same way.
- for both: the other cameras' longest gap over the 5 s around each SIGHUP, and their reconnections.

With --comeback --soak N, one job instead: cam01 is removed and listed again N times in a row, and
ingest's memory (VmRSS), threads and open files are printed every tenth time, with whether cam01's
seq went on without a gap or a repeat across all of them (what each comeback leaves behind).

With --outputs, publish's outputs change instead (2026-12-05): the job's webhook, which takes every
result (topics results/), is replaced by another receiver's, and `vapipe run` gets SIGHUP; the running
publish takes it. Printed: SIGHUP -> the new receiver's first message, -> the old one's last; of the
results the bus had over the 8 s around the SIGHUP, how many neither receiver got, and how many both
got (each should have gone to exactly one); and the cameras' longest gap on the bus meanwhile.

With --sampling, the job's ingest.max_fps changes instead (2026-12-05): every camera but cam00 takes the
job's (cam00 sets its own, every frame), and `vapipe run` gets SIGHUP with ingest.max_fps 5 and
rtsp_latency_ms 400; cam00 is also turned upside down (rotate: 180, taken as it goes since 2026-12-05),
and cam01 is given a new uri (the same camera, a new password), so it connects again (a witness of what a
new connection costs with a key frame every --gop frames: another client watches each camera, as an NVR
does, so a new connection joins mid-GOP). Printed: SIGHUP -> the last sampled camera's `changed` event; the
sampled cameras' (cam02 on) longest gap between results, their reconnections (none expected), their
results a second over the 3 s before and the 3 s after; whether their seq went on without a repeat;
cam01's and cam00's longest gap and reconnections, and the turn cam00's `changed` event says; the job's
results a second before and after.

With --model, infer's model changes instead (2026-12-05): `vapipe run` gets SIGHUP with infer.model
naming a copy of the running model's file (or --model-file's model, and its labels), which each lane's
infer loads beside the running one and takes between batches. Printed: SIGHUP -> the last camera's
first result of the new model; how long infer said the load and warm-up took; the cameras' longest gap
between results over the change; the frames the live queues dropped a second over the 3 s before and
while the new model loaded (the load shares the cores with the running model); the job's results a
second before, while loading and after; whether each camera's seq went on without a repeat, and its
results switched model once (the old model's, then only the new one's).

With --model --in-place (stop 54), the job runs copies of the model and labels files, which the round
replaces under the same paths (labels upper-cased, so results say which model made them) before
`vapipe reload` of the unchanged config; the command's time to return (it waits for each lane's infer)
is said too.

Usage (after tools/build.sh): /usr/bin/python3 tools/reload-bench.py [--cameras 4] [--rounds 3] [--comeback [--soak N] | --outputs | --sampling [--gop 15] | --model [--model-file M.pt --labels-file M.txt] [--in-place]]
Needs Debian's python3-zmq.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from importlib import import_module  # noqa: E402

recovery = import_module("recovery-bench")
soak = import_module("soak")  # its /proc readers: memory, threads, open files
PATTERNS = ["smpte", "ball", "snow", "pinwheel", "colors", "spokes", "gradient", "red"]


def result_times(bus, sid, since, until):
    with bus.lock:
        return [t for t, topic, p in bus.messages if topic == f"results/{sid}" and since <= t <= until]


def longest_gap(times):
    return max((b - a for a, b in zip(times, times[1:])), default=float("nan"))


def wait_results(bus, sids, after, timeout=60):
    """The time each of `sids` has a result after `after`."""
    return {sid: bus.first(after, recovery.is_result(sid), timeout) for sid in sids}


def write(path, cfg):
    with open(path, "w") as f:
        json.dump(cfg, f)


def one_round(k, warmup=3):
    with tempfile.TemporaryDirectory(prefix="vapipe-reload-") as workdir:
        cams = {f"cam{i:02d}": recovery.Camera(PATTERNS[i % len(PATTERNS)]) for i in range(k)}
        spare = recovery.Camera(PATTERNS[k % len(PATTERNS)])
        changed = "cam00"
        others = [sid for sid in cams if sid != changed]
        proc, bus = recovery.start_job(workdir, cams)
        path = os.path.join(workdir, "recovery.yaml")
        with open(path) as f:
            cfg = json.load(f)
        first = wait_results(bus, cams, 0)
        if None in first.values():
            sys.exit("not every camera gave results: " + proc.stderr.read()[-3000:])
        time.sleep(warmup)
        # In place: the uri edited, SIGHUP.
        cfg["streams"][0]["uri"] = spare.uri
        write(path, cfg)
        sighup = time.time()
        proc.send_signal(signal.SIGHUP)
        reconnecting = bus.first(sighup, lambda t, p: t == f"events/{changed}" and p.get("event") == "reconnecting")
        resumed = bus.first(sighup, lambda t, p: t == f"events/{changed}" and p.get("event") == "resumed")
        back = bus.first(resumed or sighup, recovery.is_result(changed))
        time.sleep(3)
        window = (sighup - 2, sighup + 3)
        own_gap = longest_gap(result_times(bus, changed, *window))
        other_gaps = [longest_gap(result_times(bus, sid, *window)) for sid in others]
        with bus.lock:
            others_reconnecting = sum(1 for t, topic, p in bus.messages if t >= sighup and p.get("event") == "reconnecting"
                                      and topic.startswith("events/") and topic != f"events/{changed}")
        # The old way: stop the job, start it again with the edited config.
        stop = time.time()
        recovery.stop_job(proc, bus)
        stopped = time.time()
        bus = recovery.Bus(cfg["publish"]["endpoint"])
        time.sleep(0.3)
        proc = subprocess.Popen([recovery.VAPIPE, "run", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        again = wait_results(bus, cams, stop)
        recovery.stop_job(proc, bus)
        for cam in list(cams.values()) + [spare]:
            cam.kill()
        restart_gaps = [t - stop for t in again.values() if t]
        return {
            "reconnecting_s": (reconnecting or float("nan")) - sighup,
            "first_result_s": (back or float("nan")) - sighup,
            "own_gap_s": own_gap,
            "others_gap_s": max(other_gaps) if other_gaps else float("nan"),
            "others_reconnecting": others_reconnecting,
            "restart_stop_s": stopped - stop,
            "restart_gap_s": (min(restart_gaps), max(restart_gaps)) if restart_gaps else None,
            "restart_missing": sum(1 for t in again.values() if not t),
        }


def event_time(bus, sid, event, since, timeout=30):
    return bus.first(since, lambda t, p: t == f"events/{sid}" and p.get("event") == event, timeout)


def seqs_of(bus, sid):
    with bus.lock:
        return [p["seq"] for t, topic, p in bus.messages if topic == f"results/{sid}"]


def comeback_round(k):
    with tempfile.TemporaryDirectory(prefix="vapipe-comeback-") as workdir:
        cams = {f"cam{i:02d}": recovery.Camera(PATTERNS[i % len(PATTERNS)]) for i in range(k)}
        proc, bus = recovery.start_job(workdir, cams, ingest={"reconnect_attempts": 2, "reconnect_delay_s": 0.2,
                                                              "reconnect_max_delay_s": 0.2})
        path = os.path.join(workdir, "recovery.yaml")
        with open(path) as f:
            cfg = json.load(f)
        if None in wait_results(bus, cams, 0).values():
            sys.exit("not every camera gave results: " + proc.stderr.read()[-3000:])
        time.sleep(2)
        row = {}

        def measure(sid, sighup, key):
            started = event_time(bus, sid, "started", sighup)
            back = bus.first(started or sighup, recovery.is_result(sid))
            time.sleep(3)
            window = (sighup - 2, sighup + 3)
            with bus.lock:
                reconnecting = sum(1 for t, topic, p in bus.messages if t >= sighup and p.get("event") == "reconnecting"
                                   and topic.startswith("events/") and topic != f"events/{sid}")
            row[key] = {"started_s": (started or float("nan")) - sighup, "first_result_s": (back or float("nan")) - sighup,
                        "others_gap_s": max(longest_gap(result_times(bus, o, *window)) for o in cams if o != sid),
                        "others_reconnecting": reconnecting}

        # Gave up: the server goes, the camera gives up, the server comes back on its port; SIGHUP, unchanged.
        gone = "cam00"
        killed = time.time()
        cams[gone].kill()
        if not event_time(bus, gone, "error", killed, timeout=60):
            sys.exit("cam00 did not give up: " + proc.stderr.read()[-3000:])
        before = seqs_of(bus, gone)
        cams[gone] = recovery.Camera(cams[gone].pattern, port=cams[gone].port)
        sighup = time.time()
        proc.send_signal(signal.SIGHUP)
        measure(gone, sighup, "gave_up")
        after = seqs_of(bus, gone)[len(before):]
        row["gave_up"]["numbered_on"] = bool(after) and after[0] == before[-1] + 1 and after == sorted(set(after))
        # Listed again: removed by one reload, listed by the next.
        relisted = "cam01"
        removed = dict(cfg, streams=[e for e in cfg["streams"] if e["id"] != relisted])
        write(path, removed)
        sighup = time.time()
        proc.send_signal(signal.SIGHUP)
        if not event_time(bus, relisted, "eos", sighup):
            sys.exit("cam01 was not removed: " + proc.stderr.read()[-3000:])
        time.sleep(2)
        before = seqs_of(bus, relisted)
        write(path, cfg)
        sighup = time.time()
        proc.send_signal(signal.SIGHUP)
        measure(relisted, sighup, "listed_again")
        after = seqs_of(bus, relisted)[len(before):]
        row["listed_again"]["numbered_on"] = bool(after) and after[0] == before[-1] + 1 and after == sorted(set(after))
        recovery.stop_job(proc, bus)
        for cam in cams.values():
            cam.kill()
        return row


def comeback_soak(k, cycles):
    with tempfile.TemporaryDirectory(prefix="vapipe-comeback-soak-") as workdir:
        cams = {f"cam{i:02d}": recovery.Camera(PATTERNS[i % len(PATTERNS)]) for i in range(k)}
        proc, bus = recovery.start_job(workdir, cams)
        # Its log, read as it comes: a long run would fill the pipe and hold up every process that logs.
        log = []
        reader = threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True)
        reader.start()
        path = os.path.join(workdir, "recovery.yaml")
        with open(path) as f:
            cfg = json.load(f)
        if None in wait_results(bus, cams, 0).values():
            sys.exit("not every camera gave results: " + "".join(log[-40:]))
        ingest = recovery.stage_pid(proc.pid, "ingest")
        time.sleep(3)
        print(f"# reload-bench --comeback --soak {cycles} {datetime.date.today()}: {k} cameras 640x360 30 fps H.264 "
              "in one live job; cam01 removed and listed again, over and over")
        print("| comebacks | ingest VmRSS (MB) | ingest threads | ingest open files | SIGHUP -> first result (s) |")
        print("|---|---|---|---|---|")
        sid = "cam01"
        removed = dict(cfg, streams=[e for e in cfg["streams"] if e["id"] != sid])
        first_results = []

        def row(n):
            threads, fds = soak.threads_and_fds(ingest)
            last = first_results[-10:] or [float("nan")]
            print(f"| {n} | {soak.rss_kb(ingest) / 1024:.1f} | {threads} | {fds} | "
                  f"{statistics.median(last):.2f} (median of the last {len(last)}) |", flush=True)

        row(0)
        for n in range(1, cycles + 1):
            write(path, removed)
            t = time.time()
            proc.send_signal(signal.SIGHUP)
            if not event_time(bus, sid, "eos", t):
                sys.exit(f"{sid} was not removed (comeback {n}): " + "".join(log[-40:]))
            time.sleep(0.3)
            write(path, cfg)
            t = time.time()
            proc.send_signal(signal.SIGHUP)
            back = bus.first(t, recovery.is_result(sid), 60)
            if not back:
                sys.exit(f"{sid} did not come back (comeback {n}): " + "".join(log[-40:]))
            first_results.append(back - t)
            time.sleep(0.5)
            if n % 10 == 0:
                row(n)
        seqs = seqs_of(bus, sid)
        whole = seqs == sorted(set(seqs)) and seqs[-1] - seqs[0] + 1 - len(seqs) == 0
        recovery.stop_job(proc, bus)
        for cam in cams.values():
            cam.kill()
        print(f"{sid}: {len(seqs)} results over {cycles + 1} lives, seq {seqs[0]}..{seqs[-1]}: "
              + ("no gap, no repeat" if whole else "GAPS OR REPEATS (a live queue's drops count as gaps)"))


def receiver():
    """A webhook's receiver on loopback (the e2e tests'): each POST with its arrival time."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
    from e2e.common import WebhookReceiver
    return WebhookReceiver()


def hook_of(r):
    return {"url": f"http://127.0.0.1:{r.port}/hook", "topics": ["results/"]}


def results_got(r):
    """(stream, seq) of each result a receiver got, and when it got each."""
    got = [(m["at"], m["json"]["payload"]) for m in list(r.received) if m["json"]]
    return {(p["stream_id"], p["seq"]) for _, p in got}, [t for t, _ in got]


def running_job(workdir, cams, **extra):
    """recovery.start_job, its log drained (a full pipe would stop the job), once every camera has a
    result: (process, bus, config path, config)."""
    proc, bus = recovery.start_job(workdir, cams, **extra)
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    path = os.path.join(workdir, "recovery.yaml")
    with open(path) as f:
        cfg = json.load(f)
    if None in wait_results(bus, cams, 0).values():
        sys.exit("not every camera gave results")
    return proc, bus, path, cfg


def outputs_round(k):
    with tempfile.TemporaryDirectory(prefix="vapipe-outputs-") as workdir:
        cams = {f"cam{i:02d}": recovery.Camera(PATTERNS[i % len(PATTERNS)]) for i in range(k)}
        old, new = receiver(), receiver()
        proc, bus, path, cfg = running_job(workdir, cams, publish={"webhooks": [hook_of(old)]})
        time.sleep(3)
        cfg["publish"]["webhooks"] = [hook_of(new)]
        write(path, cfg)
        sighup = time.time()
        proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 30
        while time.time() < deadline and not new.received:
            time.sleep(0.01)
        time.sleep(5)
        (old_keys, old_times), (new_keys, new_times) = results_got(old), results_got(new)
        window = (sighup - 4, sighup + 4)
        with bus.lock:
            on_bus = {(p["stream_id"], p["seq"]) for t, topic, p in bus.messages
                      if topic.startswith("results/") and window[0] <= t <= window[1]}
        gaps = [longest_gap(result_times(bus, sid, *window)) for sid in cams]
        recovery.stop_job(proc, bus)
        for cam in cams.values():
            cam.kill()
        old.close()
        new.close()
        return {"first_new_s": min(new_times, default=float("nan")) - sighup,
                "last_old_s": max(old_times, default=float("nan")) - sighup, "on_bus": len(on_bus),
                "neither": len(on_bus - old_keys - new_keys), "both": len(on_bus & old_keys & new_keys),
                "gap_s": max(gaps)}


def sampling_round(k, gop):
    with tempfile.TemporaryDirectory(prefix="vapipe-sampling-") as workdir:
        cams = {f"cam{i:02d}": recovery.Camera(PATTERNS[i % len(PATTERNS)], x264_options=f"key-int-max={gop}")
                for i in range(k)}
        # Another client watches each camera, as an NVR does: the test server's encoder then runs on between
        # the job's connections (shared media), and a new connection joins mid-GOP, as with a real camera.
        viewers = [subprocess.Popen(["gst-launch-1.0", "-q", "rtspsrc", f"location={cam.uri}", "!", "fakesink"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for cam in cams.values()]
        time.sleep(1)
        proc, bus, path, cfg = running_job(workdir, cams)
        # cam00's own max_fps, the job's value it took: every frame, untouched by the job's new one (this
        # reload changes nothing: nothing reconnects).
        cfg["streams"][0]["max_fps"] = 0
        write(path, cfg)
        proc.send_signal(signal.SIGHUP)
        time.sleep(4)
        # The job's max_fps and jitter buffer change; cam00 takes the jitter buffer only, and is turned
        # upside down too (remounted), which it takes as it goes, every frame. cam01 gets a new uri in the same reload
        # (the same camera; a setting its connection is made with): it connects again, a witness of what a
        # new connection costs at this GOP.
        control, witness, sampled = "cam00", "cam01", [sid for sid in cams if sid not in ("cam00", "cam01")]
        cfg["ingest"] = {"max_fps": 5, "rtsp_latency_ms": 400}
        # A new password (the test server asks for none): the same shared media, joined mid-GOP. (A new
        # query would be another media to the server: a fresh encoder, key frame first.)
        cfg["streams"][1]["uri"] = cams[witness].uri.replace("rtsp://", "rtsp://viewer:new-password@")
        cfg["streams"][0]["rotate"] = 180
        write(path, cfg)
        sighup = time.time()
        proc.send_signal(signal.SIGHUP)
        changed = [event_time(bus, sid, "changed", sighup) for sid in sampled]
        time.sleep(5)
        settled = max((t for t in changed if t), default=sighup) + 0.5
        rate = lambda sid, a, b: len(result_times(bus, sid, a, b)) / (b - a)

        def reconnections(sid):
            with bus.lock:
                return sum(1 for t, topic, p in bus.messages if t >= sighup and topic == f"events/{sid}"
                           and p.get("event") == "reconnecting")

        def turn_said(sid):  # the turn its `changed` event says its frames have from then on
            with bus.lock:
                return next((p.get("turn") for t, topic, p in bus.messages if t >= sighup and
                             topic == f"events/{sid}" and p.get("event") == "changed"), None)

        row = {"changed_s": max((t or float("nan")) - sighup for t in changed),
               "turned": turn_said(control),
               "gap_s": max(longest_gap(result_times(bus, sid, sighup - 2, settled + 2)) for sid in sampled),
               "reconnecting": sum(reconnections(sid) for sid in sampled),
               "before": statistics.mean(rate(sid, sighup - 3, sighup) for sid in sampled),
               "after": statistics.mean(rate(sid, settled, settled + 3) for sid in sampled),
               "numbered_on": all(seqs_of(bus, sid) == sorted(set(seqs_of(bus, sid))) for sid in sampled),
               "witness_gap_s": longest_gap(result_times(bus, witness, sighup - 2, sighup + 5)),
               "witness_reconnecting": reconnections(witness),
               "control_gap_s": longest_gap(result_times(bus, control, sighup - 2, settled + 2)),
               "control_reconnecting": reconnections(control),
               "job_before": sum(rate(sid, sighup - 3, sighup) for sid in cams),
               "job_after": sum(rate(sid, settled, settled + 3) for sid in cams)}
        recovery.stop_job(proc, bus)
        for viewer in viewers:
            viewer.kill()
            viewer.wait()
        for cam in cams.values():
            cam.kill()
        return row


def model_round(k, model_file, labels_file, in_place=False):
    with tempfile.TemporaryDirectory(prefix="vapipe-model-") as workdir:
        cams = {f"cam{i:02d}": recovery.Camera(PATTERNS[i % len(PATTERNS)]) for i in range(k)}
        model_file = model_file or os.path.join(recovery.ROOT, "models", "pattern_cnn.pt")
        labels_file = labels_file or os.path.join(recovery.ROOT, "models", "pattern_cnn.labels.txt")
        if in_place:  # the job runs copies, which the round replaces under the same paths
            shutil.copyfile(model_file, os.path.join(workdir, "live.pt"))
            shutil.copyfile(labels_file, os.path.join(workdir, "live.labels.txt"))
            model_file, labels_file = os.path.join(workdir, "live.pt"), os.path.join(workdir, "live.labels.txt")
        proc, bus = recovery.start_job(workdir, cams, infer={"model": model_file, "labels": labels_file})
        log = []
        threading.Thread(target=lambda: log.append(proc.stderr.read()), daemon=True).start()
        path = os.path.join(workdir, "recovery.yaml")
        with open(path) as f:
            cfg = json.load(f)
        if None in wait_results(bus, cams, 0).values():
            sys.exit("not every camera gave results")
        time.sleep(4)
        command = {}
        if in_place:
            # The model and its labels (upper-case: results say which made them) copied beside the running
            # ones and moved over them; `vapipe reload` of the same config, which waits for infer's word.
            for src, dst, upper in ((model_file, model_file, False), (labels_file, labels_file, True)):
                with open(src, "rb") as f:
                    data = f.read()
                with open(dst + ".new", "wb") as f:
                    f.write(data.upper() if upper else data)
                os.rename(dst + ".new", dst)
            is_new = lambda p: p.get("label", "").isupper()
            sighup = time.time()
            done = subprocess.run([recovery.VAPIPE, "reload", path], capture_output=True, text=True, timeout=180)
            command = {"reload_s": time.time() - sighup, "rc": done.returncode,
                       "lane": next((l.strip() for l in done.stdout.splitlines() if l.startswith("  lane 0:")), "?")}
        else:
            # A copy under another name: results say which model made them (its file's name).
            new_model = os.path.join(workdir, "model_v2.pt")
            shutil.copyfile(cfg["infer"]["model"], new_model)
            cfg["infer"] = dict(cfg["infer"], model=new_model)
            write(path, cfg)
            is_new = lambda p: p.get("model") == "model_v2"
            sighup = time.time()
            proc.send_signal(signal.SIGHUP)
        by_new = lambda sid: (lambda t, p: t == f"results/{sid}" and is_new(p))
        firsts = [bus.first(sighup, by_new(sid), 120) for sid in cams]
        switched = max((t for t in firsts if t), default=float("nan"))
        time.sleep(4)
        rate = lambda a, b: sum(len(result_times(bus, sid, a, b)) for sid in cams) / (b - a)

        def dropped(a, b):  # frames numbered in [a, b] that have no result: the live queues' drops
            lost = 0
            for sid in cams:
                with bus.lock:
                    seqs = [p["seq"] for t, topic, p in bus.messages if topic == f"results/{sid}" and a <= t <= b]
                lost += (max(seqs) - min(seqs) + 1 - len(seqs)) if seqs else 0
            return lost / (b - a)

        def switched_once(sid):
            with bus.lock:
                new = [is_new(p) for t, topic, p in bus.messages if topic == f"results/{sid}"]
            first_new = new.index(True) if True in new else len(new)
            return 0 < first_new < len(new) and all(new[first_new:]) and not any(new[:first_new])

        row = {"switch_s": switched - sighup,
               "gap_s": max(longest_gap(result_times(bus, sid, sighup - 2, switched + 2)) for sid in cams),
               "dropped_before": dropped(sighup - 3, sighup), "dropped_during": dropped(sighup, switched),
               "before": rate(sighup - 3, sighup), "during": rate(sighup, switched), "after": rate(switched, switched + 3),
               "numbered_on": all(seqs_of(bus, sid) == sorted(set(seqs_of(bus, sid))) for sid in cams),
               "switched_once": all(switched_once(sid) for sid in cams)}
        recovery.stop_job(proc, bus)
        for cam in cams.values():
            cam.kill()
        time.sleep(0.5)
        loaded = [float(x) for x in re.findall(r"loaded and warmed up in ([0-9.]+) s", "".join(log))]
        row["load_s"] = max(loaded) if loaded else float("nan")
        row.update(command)
        return row


def main_model(args):
    model = args.model_file or "models/pattern_cnn.pt (shipped, 102k parameters)"
    print(f"# reload-bench --model {datetime.date.today()}: {args.cameras} cameras 640x360 30 fps H.264 in one live "
          f"job, batch 8; infer.model changed on SIGHUP to a copy of {model}, loaded beside the running one")
    print("| round | SIGHUP -> last camera's first result of the new model (s) | load and warm-up, infer's log (s) | "
          "cameras' longest gap (s) | frames dropped a second: before, while loading | the job's results a second: "
          "before, loading, after | seq numbered on | each switched once |")
    print("|---|---|---|---|---|---|---|---|")
    if args.in_place:
        print("# --in-place: the running model's file and its labels (upper-cased) moved over under the same paths, "
              "then `vapipe reload` of the same config; the first column is from the command's start, and the last "
              "says when it returned, its exit status and lane 0's line")
    for r in range(args.rounds):
        m = model_round(args.cameras, args.model_file, args.labels_file, args.in_place)
        print(f"| {r + 1} | {m['switch_s']:.2f} | {m['load_s']:.2f} | {m['gap_s']:.2f} | {m['dropped_before']:.1f}, "
              f"{m['dropped_during']:.1f} | {m['before']:.0f}, {m['during']:.0f}, {m['after']:.0f} | "
              f"{'yes' if m['numbered_on'] else 'NO'} | {'yes' if m['switched_once'] else 'NO'} |" +
              (f" `vapipe reload` returned after {m['reload_s']:.2f} s, exit {m['rc']}: {m['lane']} |" if args.in_place
               else ""), flush=True)


def main_sampling(args):
    if args.cameras < 3:
        sys.exit("--sampling needs 3 cameras or more (a control, a witness, the sampled)")
    print(f"# reload-bench --sampling {datetime.date.today()}: {args.cameras} cameras 640x360 30 fps H.264, a key "
          f"frame every {args.gop} frames, in one live job; ingest.max_fps 0 -> 5 and rtsp_latency_ms 200 -> 400 on "
          "SIGHUP, taken as they go by cam02 on; cam01 takes them with a new uri of "
          "its own (a new connection); "
          "cam00 keeps its own max_fps 0 and takes the jitter buffer and a rotate: 180 of its own, as it goes")
    print("| round | SIGHUP -> last sampled camera's `changed` (s) | sampled cameras' longest gap (s) | their "
          "reconnections | their results/s before -> after | seq numbered on | cam01 (new connection): longest gap "
          "(s), reconnections | cam00 (every frame, turned): longest gap (s), reconnections, turn after | the job's results/s before -> after |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in range(args.rounds):
        m = sampling_round(args.cameras, args.gop)
        print(f"| {r + 1} | {m['changed_s']:.2f} | {m['gap_s']:.2f} | {m['reconnecting']} | {m['before']:.1f} -> "
              f"{m['after']:.1f} | {'yes' if m['numbered_on'] else 'NO'} | {m['witness_gap_s']:.2f}, "
              f"{m['witness_reconnecting']} | {m['control_gap_s']:.2f}, {m['control_reconnecting']}, {m['turned']} | "
              f"{m['job_before']:.0f} -> {m['job_after']:.0f} |", flush=True)


def main_outputs(args):
    print(f"# reload-bench --outputs {datetime.date.today()}: {args.cameras} cameras 640x360 30 fps H.264 in one live "
          "job, every result to a webhook; the webhook replaced by another receiver's on SIGHUP")
    print("| round | SIGHUP -> the new receiver's first message (s) | SIGHUP -> the old one's last (s) | results on the "
          "bus in the 8 s around it | got by neither | got by both | cameras' longest gap on the bus (s) |")
    print("|---|---|---|---|---|---|---|")
    for r in range(args.rounds):
        m = outputs_round(args.cameras)
        print(f"| {r + 1} | {m['first_new_s']:.2f} | {m['last_old_s']:.2f} | {m['on_bus']} | {m['neither']} | "
              f"{m['both']} | {m['gap_s']:.2f} |", flush=True)


def main_comeback(args):
    if args.soak:
        return comeback_soak(args.cameras, args.soak)
    print(f"# reload-bench --comeback {datetime.date.today()}: {args.cameras} cameras 640x360 30 fps H.264 in one "
          "live job; cam00 gives up and is tried again by a reload that changes nothing; cam01 is removed and "
          "listed again")
    print("| round | case | SIGHUP -> started (s) | SIGHUP -> first result (s) | seq numbered on | other cameras' "
          "longest gap (s) | their reconnections |")
    print("|---|---|---|---|---|---|---|")
    for r in range(args.rounds):
        row = comeback_round(args.cameras)
        for case, m in row.items():
            print(f"| {r + 1} | {case.replace('_', ' ')} | {m['started_s']:.2f} | {m['first_result_s']:.2f} | "
                  f"{'yes' if m['numbered_on'] else 'NO'} | {m['others_gap_s']:.2f} | {m['others_reconnecting']} |",
                  flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cameras", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--comeback", action="store_true", help="cameras that ended come back under their ids")
    ap.add_argument("--soak", type=int, default=0, help="with --comeback: one job, this many comebacks in a row")
    ap.add_argument("--outputs", action="store_true", help="publish's webhook replaced by a reload")
    ap.add_argument("--sampling", action="store_true", help="the job's ingest.max_fps changed by a reload")
    ap.add_argument("--gop", type=int, default=15, help="with --sampling: the cameras' key frame interval, in frames")
    ap.add_argument("--model", action="store_true", help="infer's model changed by a reload")
    ap.add_argument("--model-file", help="with --model: the job's model (default: the shipped pattern_cnn)")
    ap.add_argument("--labels-file", help="with --model-file: its labels")
    ap.add_argument("--in-place", action="store_true",
                    help="with --model: the model and labels files replaced under the same paths, `vapipe reload`")
    args = ap.parse_args()
    if args.model:
        return main_model(args)
    if args.sampling:
        return main_sampling(args)
    if args.outputs:
        return main_outputs(args)
    if args.comeback:
        return main_comeback(args)
    print(f"# reload-bench {datetime.date.today()}: {args.cameras} cameras 640x360 30 fps H.264 in one live job; "
          "cam00's uri changed to another camera's")
    print("| round | SIGHUP -> reconnecting (s) | SIGHUP -> first result of the new camera (s) | its longest gap (s) | "
          "other cameras' longest gap (s) | their reconnections | restart: stop took (s) | restart: gap of each camera (s) |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for r in range(args.rounds):
        row = one_round(args.cameras)
        rows.append(row)
        gap = row["restart_gap_s"]
        print(f"| {r + 1} | {row['reconnecting_s']:.2f} | {row['first_result_s']:.2f} | {row['own_gap_s']:.2f} | "
              f"{row['others_gap_s']:.2f} | {row['others_reconnecting']} | {row['restart_stop_s']:.2f} | "
              f"{gap[0]:.2f} to {gap[1]:.2f}" + (f" ({row['restart_missing']} never)" if row["restart_missing"] else "") +
              " |", flush=True)
    if len(rows) > 1:
        med = lambda key: statistics.median(r[key] for r in rows)
        print(f"median: first result of the new camera {med('first_result_s'):.2f} s after SIGHUP, other cameras' "
              f"longest gap {med('others_gap_s'):.2f} s; a restart left every camera without results for "
              f"{statistics.median(r['restart_gap_s'][1] for r in rows if r['restart_gap_s']):.2f} s")


if __name__ == "__main__":
    main()
