#!/usr/bin/env python3
"""Test images and goldens for Spark's image preprocessing (runtime/src/image/image.cc).

What Spark must reproduce is what transformers 5 does with an image file for Gemma 4:
  load_image (image_utils.py):        PIL.Image.open, ImageOps.exif_transpose, .convert("RGB")
  Gemma4ImageProcessorPil (image_processing_pil_gemma4.py):
      get_aspect_ratio_preserving_size, PIL resize BICUBIC when the size changes,
      rescale (uint8 -> float64 * (1/255) -> float32), convert_image_to_patches, positions (x, y).
This script replicates those steps with PIL + numpy (transformers itself is not needed) and writes,
into --out (default test/data/images):
  * two real photographs, committed as scikit-image ships them (chelsea.png, rocket.jpg; CC0 and
    public domain: test/data/images/SOURCES.md), checked, not written;
  * small synthetic images (numpy patterns: no third-party pictures, no licence questions) in the
    formats and colour types Spark reads: baseline / progressive / 4:2:0 / 4:2:2 / 4:4:4 /
    grayscale / CMYK JPEGs, JPEGs with every EXIF orientation, and PNGs written by hand (this
    script's own encoder) for what PIL cannot write: palette with out-of-range indices and tRNS,
    1/2-bit gray, 16-bit RGB / RGBA / gray+alpha, Adam7 interlacing, eXIf after IDAT, XMP and
    ImageMagick "Raw profile type exif" orientations;
  * goldens.txt: one case per line (the gtest reads it), hashes instead of pixel dumps so that the
    directory stays small (a resized 280-token image alone is ~2 MB of float32):
      decode FILE WIDTH HEIGHT CRC           RGB8 after load_image (exif_transpose + convert)
      decode-error FILE MESSAGE...           PIL reads it but Spark refuses it on purpose
      resize FILE OUT_W OUT_H CRC SUM_R SUM_G SUM_B   PIL Image.resize(BICUBIC) of the decoded image
      preprocess FILE TOKENS RESIZED_W RESIZED_H GRID_W GRID_H SOFT_TOKENS CRC_PIXELS CRC_POSITIONS
      target HEIGHT WIDTH TOKENS TARGET_H TARGET_W   (or ... TOKENS error)
    CRC is zlib's CRC-32 of the raw little-endian bytes (uint8 RGB rows; float32 patches [P, 768];
    int32 positions [P, 2]).
Run with Debian's python3 (PIL 9.4, numpy):  /usr/bin/python3 tools/reference/make_image_goldens.py
The output is deterministic; re-running it rewrites the same bytes.
"""
import argparse
import io
import math
import os
import random
import struct
import zlib

import numpy as np
import PIL
from PIL import Image, ImageOps

PATCH = 16
POOL = 3
SUPPORTED_TOKENS = (70, 140, 280, 560, 1120)


# ----------------------------------------------------------------------------------------------
# transformers 5, replicated


def get_aspect_ratio_preserving_size(height, width, patch_size, max_patches, pooling_kernel_size):
    # image_processing_pil_gemma4.py, verbatim logic.
    total_px = height * width
    target_px = max_patches * (patch_size**2)
    factor = math.sqrt(target_px / total_px)
    ideal_height = factor * height
    ideal_width = factor * width
    side_mult = pooling_kernel_size * patch_size
    target_height = int(math.floor(ideal_height / side_mult)) * side_mult
    target_width = int(math.floor(ideal_width / side_mult)) * side_mult
    if target_height == 0 and target_width == 0:
        raise ValueError("0 x 0")
    max_side_length = (max_patches // pooling_kernel_size**2) * side_mult
    if target_height == 0:
        target_height = side_mult
        target_width = min(int(math.floor(width / height)) * side_mult, max_side_length)
    elif target_width == 0:
        target_width = side_mult
        target_height = min(int(math.floor(height / width)) * side_mult, max_side_length)
    if target_height * target_width > target_px:
        raise ValueError("exceeds max_patches")
    return target_height, target_width


def load_image(path):
    # image_utils.load_image for a local path.
    image = Image.open(path)
    image = ImageOps.exif_transpose(image)
    return image.convert("RGB")


def pil_resize(rgb, width, height):
    # image_transforms.resize: to_pil_image (uint8, no rescale) then Image.resize.
    return np.array(Image.fromarray(rgb, "RGB").resize((width, height), resample=Image.BICUBIC,
                                                        reducing_gap=None))


def preprocess(rgb, tokens):
    image = rgb.transpose(2, 0, 1)  # process_image: channels first
    height, width = image.shape[-2], image.shape[-1]
    th, tw = get_aspect_ratio_preserving_size(height, width, PATCH, tokens * POOL * POOL, POOL)
    if (th, tw) != (height, width):
        image = pil_resize(image.transpose(1, 2, 0), tw, th).transpose(2, 0, 1)
    image = (image.astype(np.float64) * (1 / 255)).astype(np.float32)  # image_transforms.rescale
    c, h, w = image.shape
    patches = image.reshape(c, h // PATCH, PATCH, w // PATCH, PATCH).transpose(1, 3, 2, 4, 0)
    patches = patches.reshape((h // PATCH) * (w // PATCH), -1)
    gx, gy = np.meshgrid(np.arange(w // PATCH), np.arange(h // PATCH), indexing="xy")
    positions = np.stack([gx, gy], axis=-1).reshape(patches.shape[0], 2)
    return (tw, th, w // PATCH, h // PATCH, patches.shape[0] // (POOL * POOL),
            np.ascontiguousarray(patches, dtype="<f4"), np.ascontiguousarray(positions, dtype="<i4"))


def crc(data):
    # zlib's CRC-32 (the gtest links zlib too): fast in both languages, and any difference in a
    # few bytes changes it.
    return "%08x" % (zlib.crc32(bytes(data)) & 0xFFFFFFFF)


# ----------------------------------------------------------------------------------------------
# synthetic pictures


def photo(width, height, seed):
    """A photograph-like RGB8 picture: smooth light, blobs, hard edges, texture and sensor noise."""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    u, v = x / max(width, 1), y / max(height, 1)
    img = np.zeros((height, width, 3))
    base = rng.uniform(40, 200, 3)
    for c in range(3):
        img[..., c] = base[c] + 50 * np.sin(2 * math.pi * (rng.uniform(0.3, 1.5) * u + rng.uniform(0, 1))) \
            * np.cos(2 * math.pi * rng.uniform(0.2, 1.2) * v)
    for _ in range(6):  # soft blobs
        cx, cy, r = rng.uniform(0, 1), rng.uniform(0, 1), rng.uniform(0.05, 0.3)
        blob = np.exp(-((u - cx) ** 2 + (v - cy) ** 2) / (2 * r * r))
        img += blob[..., None] * rng.uniform(-90, 90, 3)
    for _ in range(4):  # hard-edged shapes
        x0, y0 = rng.uniform(0, 0.8, 2)
        x1, y1 = x0 + rng.uniform(0.05, 0.4), y0 + rng.uniform(0.05, 0.4)
        mask = (u >= x0) & (u < x1) & (v >= y0) & (v < y1)
        img[mask] = rng.uniform(0, 255, 3)
    img += 12 * np.sin(x * 0.9 + y * 0.4)[..., None]  # fine texture
    img += rng.normal(0, 4, img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def gradient(width, height):
    """Every pixel distinct enough to tell the eight EXIF transposes apart after JPEG."""
    y, x = np.mgrid[0:height, 0:width]
    r = (x * 255) // max(width - 1, 1)
    g = (y * 255) // max(height - 1, 1)
    b = ((x + y) * 37) % 256
    return np.stack([r, g, b], axis=-1).astype(np.uint8)


# ----------------------------------------------------------------------------------------------
# a PNG encoder for what PIL cannot write (palettes with out-of-range indices, 1/2-bit gray with
# tRNS, 16-bit RGBA / gray+alpha, Adam7, chunks placed after IDAT)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def pack_row(samples, bit_depth):
    """samples: 1-D integer array (pixels x channels flattened) -> scanline bytes."""
    if bit_depth == 16:
        return samples.astype(">u2").tobytes()
    if bit_depth == 8:
        return samples.astype(np.uint8).tobytes()
    per_byte = 8 // bit_depth
    out = bytearray((len(samples) + per_byte - 1) // per_byte)
    for i, s in enumerate(samples):
        out[i // per_byte] |= int(s) << (8 - bit_depth * (i % per_byte + 1))
    return bytes(out)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def write_png(path, pixels, bit_depth, color_type, interlace=False, plte=None, trns=None,
              before_idat=(), after_idat=()):
    """pixels: [H, W, C] integer array of sample values."""
    height, width = pixels.shape[:2]
    raw = bytearray()
    if interlace:
        for x0, y0, dx, dy in ADAM7:
            sub = pixels[y0::dy, x0::dx]
            if sub.shape[0] == 0 or sub.shape[1] == 0:
                continue
            for row in sub:
                raw += b"\0" + pack_row(row.reshape(-1), bit_depth)
    else:
        for row in pixels:
            raw += b"\0" + pack_row(row.reshape(-1), bit_depth)
    data = b"\x89PNG\r\n\x1a\n"
    data += png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0,
                                           1 if interlace else 0))
    for chunk in before_idat:
        data += chunk
    if plte is not None:
        data += png_chunk(b"PLTE", bytes(np.asarray(plte, dtype=np.uint8).reshape(-1)))
    if trns is not None:
        data += png_chunk(b"tRNS", trns)
    compressed = zlib.compress(bytes(raw), 9)
    half = len(compressed) // 2  # two IDAT chunks, as encoders that stream do
    data += png_chunk(b"IDAT", compressed[:half]) + png_chunk(b"IDAT", compressed[half:])
    for chunk in after_idat:
        data += chunk
    data += png_chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(data)


def exif_orientation_payload(orientation, big_endian=False):
    """A TIFF structure (no "Exif\\0\\0" prefix) whose IFD0 holds Orientation and one other tag."""
    e = ">" if big_endian else "<"
    head = (b"MM" if big_endian else b"II") + struct.pack(e + "HI", 42, 8)
    entries = [(0x010F, 2, 4, b"Sp\0\0"), (0x0112, 3, 1, struct.pack(e + "HH", orientation, 0))]
    ifd = struct.pack(e + "H", len(entries))
    for tag, typ, count, value in entries:
        ifd += struct.pack(e + "HHI", tag, typ, count) + value
    return head + ifd + struct.pack(e + "I", 0)


# ----------------------------------------------------------------------------------------------


REAL_PHOTOS = ("chelsea.png", "rocket.jpg")


def make_images(out):
    files = []

    def save(name, image, **kwargs):
        image.save(os.path.join(out, name), **kwargs)
        files.append(name)

    # JPEG: PIL's encoder (libjpeg-turbo), its default 4:2:0 and the other samplings.
    save("photo.jpg", Image.fromarray(photo(320, 240, 1)), quality=90)
    save("photo_444_progressive.jpg", Image.fromarray(photo(251, 167, 2)), quality=85, subsampling=0,
         progressive=True)
    save("photo_422.jpg", Image.fromarray(photo(199, 101, 3)), quality=88, subsampling=1)
    save("gray.jpg", Image.fromarray(photo(200, 150, 4)).convert("L"), quality=90)
    # CMYK: PIL writes Adobe-inverted CMYK with an APP14 marker and inverts again when reading.
    cmyk = np.concatenate([photo(64, 48, 5), photo(64, 48, 6)[..., :1]], axis=-1)
    save("cmyk.jpg", Image.fromarray(cmyk, "CMYK"), quality=92)
    # Every EXIF orientation, written the way cameras do (APP1 Exif before the image data).
    for orientation in range(1, 9):
        exif = Image.Exif()
        exif[0x0112] = orientation
        exif[0x010F] = "Spark"
        save("orient%d.jpg" % orientation, Image.fromarray(gradient(13, 7)), quality=95,
             exif=exif.tobytes())
    # Extreme aspect ratios (the 48-pixel side rule of get_aspect_ratio_preserving_size).
    save("wide.png", Image.fromarray(photo(1000, 10, 7)))
    save("tall.jpg", Image.fromarray(photo(12, 700, 8)), quality=90)
    # Already at a target size for 70 tokens (480 x 336 = 630 patches): no resize.
    save("exact_70.jpg", Image.fromarray(photo(480, 336, 9)), quality=80)
    # PIL-written PNGs: RGBA with every alpha level, a palette image with a transparency index.
    rgba = np.concatenate([photo(97, 61, 10), (np.arange(97 * 61) % 256).reshape(61, 97, 1)], axis=-1)
    save("rgba.png", Image.fromarray(rgba.astype(np.uint8), "RGBA"))
    pal = Image.fromarray(photo(90, 70, 11)).quantize(colors=50)
    pal.info["transparency"] = 3
    save("palette.png", pal, transparency=3)
    save("gray_alpha.png", Image.fromarray(np.stack([photo(40, 30, 12)[..., 0],
                                                     np.full((30, 40), 77, np.uint8)], axis=-1), "LA"))

    # Hand-written PNGs.
    rng = np.random.RandomState(20)

    def hand(name, *args, **kwargs):
        write_png(os.path.join(out, name), *args, **kwargs)
        files.append(name)

    idx = rng.randint(0, 16, (19, 33, 1))
    hand("palette4_oob_interlaced.png", idx, 4, 3, interlace=True,
         plte=[[200, 10, 10], [10, 200, 10], [10, 10, 200], [250, 250, 0], [0, 0, 0]],
         trns=bytes([0, 128, 255]))
    hand("gray1.png", rng.randint(0, 2, (9, 31, 1)), 1, 0)
    hand("gray2_trns_interlaced.png", rng.randint(0, 4, (17, 29, 1)), 2, 0, interlace=True,
         trns=struct.pack(">H", 2))
    hand("gray4.png", rng.randint(0, 16, (11, 21, 1)), 4, 0)
    hand("rgb16_trns.png", rng.randint(0, 65536, (15, 23, 3)), 16, 2, trns=struct.pack(">HHH", 1, 2, 3))
    hand("rgba16_interlaced.png", rng.randint(0, 65536, (13, 21, 4)), 16, 6, interlace=True)
    hand("gray_alpha16.png", rng.randint(0, 65536, (11, 19, 2)), 16, 4)
    hand("gray16.png", rng.randint(0, 65536, (8, 8, 1)), 16, 0)
    hand("rgb_exif_after_idat.png", gradient(12, 9), 8, 2,
         after_idat=[png_chunk(b"eXIf", exif_orientation_payload(8, big_endian=True))])
    xmp = (b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><rdf:Description '
           b'tiff:Orientation="5"/></rdf:RDF></x:xmpmeta>')
    hand("rgb_xmp_orientation.png", gradient(12, 9), 8, 2,
         before_idat=[png_chunk(b"iTXt", b"XML:com.adobe.xmp\0\0\0\0\0" + xmp)])
    hexed = (b"Exif\0\0" + exif_orientation_payload(7)).hex()
    profile = "\nexif\n%8d\n" % (len(hexed) // 2) + "\n".join(hexed[i:i + 72] for i in range(0, len(hexed), 72)) + "\n"
    hand("rgb_raw_profile_exif.png", gradient(12, 9), 8, 2,
         before_idat=[png_chunk(b"zTXt", b"Raw profile type exif\0\0" + zlib.compress(profile.encode()))])
    # Two real photographs, committed as scikit-image ships them (test/data/images/SOURCES.md):
    # not written here, only checked.
    for name in REAL_PHOTOS:
        if not os.path.exists(os.path.join(out, name)):
            raise SystemExit("missing %s: copy it from scikit-image (test/data/images/SOURCES.md)" % name)
        files.append(name)
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "test", "data",
                                                      "images"))
    args = parser.parse_args()
    out = os.path.normpath(args.out)
    os.makedirs(out, exist_ok=True)
    files = make_images(out)

    lines = ["# written by tools/reference/make_image_goldens.py (Pillow %s, numpy %s); do not edit"
             % (PIL.__version__, np.__version__)]
    decoded = {}
    for name in files:
        image = load_image(os.path.join(out, name))
        rgb = np.array(image)
        if name == "gray16.png":
            # Pillow opens 16-bit gray as mode I and convert("RGB") clips each sample to 0..255
            # instead of scaling it (a nearly white picture); Spark refuses such files.
            lines.append("decode-error %s 16-bit grayscale PNG" % name)
            continue
        decoded[name] = rgb
        lines.append("decode %s %d %d %s" % (name, rgb.shape[1], rgb.shape[0], crc(rgb.tobytes())))

    # Resize: down, up, odd, degenerate and one-axis-only sizes of a few decoded images.
    resize_cases = {
        "photo.jpg": [(1, 1), (7, 5), (320, 97), (97, 240), (333, 251), (160, 120), (1000, 13), (13, 1000),
                      (960, 720), (48, 48), (319, 241)],
        "photo_444_progressive.jpg": [(250, 166), (502, 334), (17, 500), (96, 48)],
        "gray.jpg": [(199, 149), (66, 50), (624, 480)],
        "wide.png": [(3360, 48), (100, 1), (1000, 11)],
        "tall.jpg": [(48, 3360), (1, 700), (11, 699)],
        "rgba.png": [(96, 60), (194, 122)],
        "orient6.jpg": [(49, 97), (3, 5)],
        "chelsea.png": [(432, 288), (912, 624)],
        "rocket.jpg": [(624, 432), (48, 32)],
    }
    for name, sizes in resize_cases.items():
        for width, height in sizes:
            resized = pil_resize(decoded[name], width, height)
            sums = resized.reshape(-1, 3).astype(np.int64).sum(axis=0)
            lines.append("resize %s %d %d %s %d %d %d" % (name, width, height, crc(resized.tobytes()), *sums))

    # Preprocessing: every decodable file at 70 tokens, some at other budgets.
    more_tokens = {"chelsea.png": (280, 1120), "rocket.jpg": (280,), "photo.jpg": (140, 280, 560, 1120), "photo_444_progressive.jpg": (280,), "orient6.jpg": (280,),
                   "wide.png": (280, 1120), "tall.jpg": (140,), "exact_70.jpg": (280,), "rgba.png": (560,)}
    for name in files:
        if name not in decoded:
            continue
        for tokens in (70,) + more_tokens.get(name, ()):
            tw, th, gw, gh, soft, patches, positions = preprocess(decoded[name], tokens)
            lines.append("preprocess %s %d %d %d %d %d %d %s %s" % (name, tokens, tw, th, gw, gh, soft,
                                                                  crc(patches.tobytes()),
                                                                  crc(positions.tobytes())))

    # Target sizes: the worked example, extremes, and random shapes.
    rng = random.Random(7)
    shapes = [(1080, 1920), (1920, 1080), (1, 1), (1, 100000), (100000, 1), (3, 70000), (48, 48), (336, 480),
              (10, 1000), (700, 12), (4000, 3000), (12000, 9000), (1, 2), (2, 1), (47, 1), (1, 47),
              (16383, 16384), (65500, 65500), (1, 178956970), (178956970, 1), (13, 13371)]
    for _ in range(300):
        kind = rng.random()
        if kind < 0.5:
            shapes.append((rng.randint(1, 5000), rng.randint(1, 5000)))
        elif kind < 0.8:
            shapes.append((rng.randint(1, 60), rng.randint(1, 20000)))
        else:
            shapes.append((rng.randint(1, 20000), rng.randint(1, 60)))
    for height, width in shapes:
        for tokens in SUPPORTED_TOKENS:
            try:
                th, tw = get_aspect_ratio_preserving_size(height, width, PATCH, tokens * 9, POOL)
                lines.append("target %d %d %d %d %d" % (height, width, tokens, th, tw))
            except ValueError:
                lines.append("target %d %d %d error" % (height, width, tokens))

    with open(os.path.join(out, "goldens.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    # Only this script's files (the directory also holds make_vision_models.py's).
    total = sum(os.path.getsize(os.path.join(out, n)) for n in files + ["goldens.txt"])
    print("wrote %d images and %d golden lines to %s (%d bytes)" % (len(files), len(lines) - 1, out, total))


if __name__ == "__main__":
    main()
