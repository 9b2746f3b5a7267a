"""Writes tests/media/anim-32x24.gif: an animated GIF89a that loops for ever (a NETSCAPE2.0 extension, as
most do), 12 frames of 32x24 in 4 colours, a red bar moving right over a blue and white ground. Its
frames' delays (hundredths of a second): 10 for frames 0 to 3, 0 for frame 4 (players show it for 10),
5 for frames 5 to 11; so its frames are at 0, 100, ..., 500, 550, ..., 800 ms, and it lasts 850 ms.
Python's standard library only (the LZW data is written without compression: a clear code before
every two pixels keeps the codes 3 bits wide)."""
import os
import struct
import sys


def lzw_uncompressed(pixels, min_code=2):
    clear, end = 1 << min_code, (1 << min_code) + 1
    width = min_code + 1
    codes = []
    for i in range(0, len(pixels), 2):
        codes.append(clear)
        codes.extend(pixels[i:i + 2])
    codes.append(end)
    bits = nbits = 0
    out = bytearray()
    for c in codes:
        bits |= c << nbits
        nbits += width
        while nbits >= 8:
            out.append(bits & 0xff)
            bits >>= 8
            nbits -= 8
    if nbits:
        out.append(bits & 0xff)
    return bytes(out)


def sub_blocks(data):
    out = bytearray()
    for i in range(0, len(data), 255):
        chunk = data[i:i + 255]
        out.append(len(chunk))
        out += chunk
    out.append(0)
    return bytes(out)


def gif(delays_cs, w=32, h=24, loop=True):
    g = bytearray(b"GIF89a")
    g += struct.pack("<HHBBB", w, h, 0x80 | 0x01, 0, 0)  # a global table of 4 colours
    g += bytes([0, 0, 0, 255, 0, 0, 0, 0, 255, 255, 255, 255])
    if loop:
        g += b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00"
    for f, delay in enumerate(delays_cs):
        if delay is not None:  # a Graphic Control Extension with the frame's delay
            g += b"\x21\xf9\x04\x04" + struct.pack("<H", delay) + b"\x00\x00"
        g += b"\x2c" + struct.pack("<HHHHB", 0, 0, w, h, 0)
        x0 = f * (w - 4) // max(1, len(delays_cs) - 1)
        pixels = [1 if x0 <= x < x0 + 4 else (2 if y < h // 2 else 3) for y in range(h) for x in range(w)]
        g.append(2)
        g += sub_blocks(lzw_uncompressed(pixels))
    g += b"\x3b"
    return bytes(g)


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "anim-32x24.gif")
    with open(path, "wb") as f:
        f.write(gif([10, 10, 10, 10, 0] + [5] * 7))
