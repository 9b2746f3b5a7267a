#!/usr/bin/env python3
"""What each H.264 picture refers to, from its first slice's header: a research aid for following damage
picture by picture in H.264 (as RefPicSetGaps does for H.265 in stages/ingest/h26x_access_unit.h).

  gst-launch-1.0 -q filesrc location=FILE.ts ! tsdemux ! h264parse ! \\
      video/x-h264,stream-format=byte-stream,alignment=au ! filesink location=/tmp/x.h264
  tools/h264-slice-headers.py /tmp/x.h264 [--first N]

Prints, per picture in decoding order: NAL type and nal_ref_idc, slice type, frame_num, POC lsb (POC type
0 only), the active reference list sizes (num_ref_idx_l0/l1_active, after the slice's override) and the
ref_pic_list_modification operations (list, modification_of_pic_nums_idc, value). Reads Annex B with
SPS/PPS in band; no slice groups (FMO); frames only, not fields. Not a decoder: the lists themselves
(DPB sliding window, MMCO) are not built.

Seen with it (2026-12-06): x264 with an open GOP and b-pyramid (tools' cut file `og.ts`) codes every
P-frame with one active L0 entry and a modification (idc 0, abs_diff_pic_num_minus1 1) that skips the
B-reference just before it: its P-frames never use a B-frame, so a lost reference B-frame smears only the
B-frames around it. That is why the stretch model marks 12 whole pictures after one. (Since stop 65
ingest builds the lists itself: RefPicListGaps, stages/ingest/h264_reference_lists.h.)
"""
import argparse
import sys

HIGH_PROFILES = (100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135)


def nal_units(data):
    """The NAL units of an Annex B byte stream (start codes of 3 or 4 bytes)."""
    starts = []
    i, n = 0, len(data)
    while i < n - 3:
        if data[i] == 0 and data[i + 1] == 0 and data[i + 2] == 1:
            starts.append((i, i + 3))
            i += 3
        elif data[i] == 0 and data[i + 1] == 0 and data[i + 2] == 0 and data[i + 3] == 1:
            starts.append((i, i + 4))
            i += 4
        else:
            i += 1
    for k, (_, payload) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else n
        yield data[payload:end]


def rbsp(payload):
    """Emulation prevention bytes removed."""
    out, zeros = bytearray(), 0
    for b in payload:
        if zeros >= 2 and b == 3:
            zeros = 0
            continue
        out.append(b)
        zeros = zeros + 1 if b == 0 else 0
    return bytes(out)


class Bits:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def u(self, n):
        v = 0
        for _ in range(n):
            v = (v << 1) | ((self.data[self.pos >> 3] >> (7 - (self.pos & 7))) & 1)
            self.pos += 1
        return v

    def ue(self):
        zeros = 0
        while self.u(1) == 0:
            zeros += 1
        return (1 << zeros) - 1 + self.u(zeros)

    def se(self):
        k = self.ue()
        return (k + 1) // 2 if k & 1 else -(k // 2)


def skip_scaling_list(r, size):
    last = nxt = 8
    for _ in range(size):
        if nxt != 0:
            nxt = (last + r.se() + 256) % 256
        last = last if nxt == 0 else nxt


def read_sps(r):
    profile = r.u(8)
    r.u(16)
    sps_id = r.ue()
    chroma = 1
    if profile in HIGH_PROFILES:
        chroma = r.ue()
        if chroma == 3:
            r.u(1)
        r.ue()
        r.ue()
        r.u(1)
        if r.u(1):
            for j in range(8 if chroma != 3 else 12):
                if r.u(1):
                    skip_scaling_list(r, 16 if j < 6 else 64)
    sps = {"log2_max_frame_num": r.ue() + 4, "poc_type": r.ue()}
    if sps["poc_type"] == 0:
        sps["log2_max_poc_lsb"] = r.ue() + 4
    elif sps["poc_type"] == 1:
        r.u(1)
        r.se()
        r.se()
        for _ in range(r.ue()):
            r.se()
    sps["max_num_ref_frames"] = r.ue()
    r.u(1)
    r.ue()
    r.ue()
    sps["frame_mbs_only"] = r.u(1)
    return sps_id, sps


def read_pps(r):
    pps_id, sps_id = r.ue(), r.ue()
    r.u(1)  # entropy_coding_mode_flag
    bottom_field_poc = r.u(1)
    if r.ue() != 0:
        raise ValueError("slice groups (FMO) are not read")
    l0, l1 = r.ue() + 1, r.ue() + 1
    r.u(1)  # weighted_pred_flag
    r.u(2)  # weighted_bipred_idc
    r.se()
    r.se()
    r.se()
    r.u(1)
    r.u(1)
    redundant = r.u(1)
    return pps_id, {"sps": sps_id, "bottom_field_poc": bottom_field_poc, "l0": l0, "l1": l1, "redundant": redundant}


def first_slices(data):
    sps, pps = {}, {}
    for nal in nal_units(data):
        if not nal:
            continue
        kind, ref_idc = nal[0] & 31, (nal[0] >> 5) & 3
        r = Bits(rbsp(nal[1:]))
        if kind == 7:
            sid, s = read_sps(r)
            sps[sid] = s
        elif kind == 8:
            pid, p = read_pps(r)
            pps[pid] = p
        elif kind in (1, 5):
            first_mb, slice_type, pid = r.ue(), r.ue() % 5, r.ue()
            if first_mb != 0 or pid not in pps or pps[pid]["sps"] not in sps:
                continue
            p, s = pps[pid], sps[pps[pid]["sps"]]
            frame_num = r.u(s["log2_max_frame_num"])
            if not s["frame_mbs_only"] and r.u(1):
                raise ValueError("field pictures are not read")
            if kind == 5:
                r.ue()  # idr_pic_id
            poc_lsb = None
            if s["poc_type"] == 0:
                poc_lsb = r.u(s["log2_max_poc_lsb"])
                if p["bottom_field_poc"]:
                    r.se()
            elif s["poc_type"] == 1:
                raise ValueError("POC type 1 is not read")
            if p["redundant"]:
                r.ue()
            if slice_type == 1:
                r.u(1)  # direct_spatial_mv_pred_flag
            l0, l1 = p["l0"], p["l1"]
            if slice_type in (0, 1, 3) and r.u(1):
                l0 = r.ue() + 1
                if slice_type == 1:
                    l1 = r.ue() + 1
            mods = []
            if slice_type not in (2, 4):
                for lst in ([0, 1] if slice_type == 1 else [0]):
                    if r.u(1):
                        while True:
                            idc = r.ue()
                            if idc == 3:
                                break
                            mods.append((lst, idc, r.ue()))
            yield {"nal": kind, "ref_idc": ref_idc, "type": "PBI"[slice_type] if slice_type < 3 else str(slice_type),
                   "frame_num": frame_num, "poc_lsb": poc_lsb, "l0": l0 if slice_type in (0, 1, 3) else 0,
                   "l1": l1 if slice_type == 1 else 0, "modifications": mods}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", help="an H.264 Annex B byte stream")
    ap.add_argument("--first", type=int, default=0, help="only the first N pictures")
    args = ap.parse_args()
    with open(args.file, "rb") as f:
        data = f.read()
    for k, s in enumerate(first_slices(data)):
        if args.first and k >= args.first:
            break
        print(k, s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
