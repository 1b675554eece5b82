// PNG/JPEG decoding, EXIF orientation, Pillow's bicubic resize and Gemma 4's patchify
// (spark/runtime/image.h). Each step mirrors one piece of the Python reference; the comments name
// the Pillow 9.4 / transformers 5 code whose behaviour they reproduce.
//
// libpng and libjpeg report errors by longjmp. A longjmp must not skip a C++ destructor, so every
// libpng/libjpeg call runs inside a small "phase" function whose only locals are plain C data:
// the C++ objects (vectors, strings, the library handles' owner) live in the caller, which runs
// the phases in turn and turns a failed phase's message into an absl::Status.

#include "spark/runtime/image.h"

#include <setjmp.h>
#include <sys/stat.h>

// Pillow computes its resampling coefficients with separate multiplies and adds; a fused
// multiply-add (formed on FMA targets, e.g. with -march=native) rounds differently and could move
// a coefficient's last fixed-point bit. Clang is told here; GCC has no such pragma, so the build
// compiles this file with -ffp-contract=off (the spark_image target).
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "file_util.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/status_macros.h"

// jpeglib.h needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

namespace spark {
namespace rt {
namespace {

constexpr char kReadableFormats[] = "Spark reads PNG and JPEG images";

std::string Origin(absl::string_view origin) { return PrintableText(origin); }

absl::Status DecodeError(absl::string_view origin, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Origin(origin), ": ", what));
}

absl::Status CheckDimensions(absl::string_view origin, absl::string_view format, uint64_t width,
                             uint64_t height, const ImageLimits& limits) {
  if (width == 0 || height == 0) {
    return DecodeError(origin, absl::StrCat(format, " header gives a ", width, "x", height,
                                            " image; an image needs at least one pixel"));
  }
  // Both are below 2^32 (PNG and JPEG store them in at most 31 and 16 bits), so the product fits.
  const uint64_t pixels = width * height;
  if (limits.max_pixels < 0 || pixels > static_cast<uint64_t>(limits.max_pixels)) {
    return DecodeError(
        origin, absl::StrCat("the ", format, " image is ", width, "x", height, " = ", pixels,
                             " pixels, more than the limit of ", limits.max_pixels,
                             " (ImageLimits::max_pixels; Pillow refuses more than "
                             "2 * Image.MAX_IMAGE_PIXELS = 178956970 as a decompression bomb)"));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Format sniffing: by content, as PIL.Image.open does (PNG: its 8-byte signature; JPEG: FF D8 FF).

enum class Format { kPng, kJpeg, kUnknown };

bool StartsWith(absl::Span<const uint8_t> bytes, absl::string_view prefix) {
  return bytes.size() >= prefix.size() &&
         std::memcmp(bytes.data(), prefix.data(), prefix.size()) == 0;
}

Format SniffFormat(absl::Span<const uint8_t> bytes) {
  if (StartsWith(bytes, absl::string_view("\x89PNG\r\n\x1a\n", 8))) return Format::kPng;
  if (StartsWith(bytes, "\xff\xd8\xff")) return Format::kJpeg;
  return Format::kUnknown;
}

// A name for a format Spark does not read, so that the error says what the file is.
std::string OtherFormatName(absl::Span<const uint8_t> bytes) {
  if (StartsWith(bytes, "GIF87a") || StartsWith(bytes, "GIF89a")) return "GIF";
  if (bytes.size() >= 12 && StartsWith(bytes, "RIFF") &&
      std::memcmp(bytes.data() + 8, "WEBP", 4) == 0) {
    return "WebP";
  }
  if (StartsWith(bytes, "BM")) return "BMP";
  if (StartsWith(bytes, absl::string_view("II*\0", 4)) ||
      StartsWith(bytes, absl::string_view("MM\0*", 4))) {
    return "TIFF";
  }
  if (bytes.size() >= 12 && std::memcmp(bytes.data() + 4, "ftyp", 4) == 0) {
    return "an ISO media file (HEIF/AVIF/MP4)";
  }
  if (StartsWith(bytes, absl::string_view("\0\0\0\x0cjP  ", 8)) ||
      StartsWith(bytes, "\xff\x4f\xff\x51")) {
    return "JPEG 2000";
  }
  if (StartsWith(bytes, "\xff\xd8")) return "a damaged JPEG (no marker after SOI)";
  if (StartsWith(bytes, "\x89PNG")) return "a damaged PNG (bad signature)";
  if (StartsWith(bytes, "%PDF")) return "PDF";
  if (StartsWith(bytes, "<") || StartsWith(bytes, "\xef\xbb\xbf<"))
    return "text (XML, SVG or HTML)";
  return "";
}

// ---------------------------------------------------------------------------------------------
// EXIF orientation, read as Pillow 9.4 reads it (Image.Exif.load + TiffImagePlugin's
// ImageFileDirectory_v2), because the reference applies whatever Pillow finds: IFD0 only; the
// last readable entry of the tag wins; an entry of an unknown type or with no data is skipped;
// data that runs past the end stops the reading (entries read so far count); the first value of
// the entry is used, and it transposes the image only when it equals an integer 2..8 (an integer
// type, a float, or a rational: 12/2 counts, x/0 is NaN). BYTE, ASCII and UNDEFINED values are
// bytes or text in Python and never match. Malformed EXIF is ignored (Pillow mostly ignores it
// too; see image.h).

struct Orientation {
  bool present = false;  // the tag was read (Pillow: 0x0112 in getexif())
  int value = 1;         // 2..8 when the image is to be transposed, else 1
};

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, bool little)
      : data_(data), size_(size), little_(little) {}
  bool Has(uint64_t offset, uint64_t n) const { return offset <= size_ && n <= size_ - offset; }
  uint64_t Uint(uint64_t offset, int n) const {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) {
      const uint64_t b = data_[offset + (little_ ? n - 1 - i : i)];
      v = (v << 8) | b;
    }
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  bool little_;
};

// The value of one Orientation entry as Python would compare it with the integers 2..8.
int OrientationValue(const ByteReader& r, uint64_t offset, int type) {
  auto usable = [](double v) {
    return v >= 2 && v <= 8 && v == std::floor(v) ? static_cast<int>(v) : 1;
  };
  switch (type) {
    case 3:  // SHORT
      return usable(static_cast<double>(r.Uint(offset, 2)));
    case 4:   // LONG
    case 13:  // IFD (read as LONG)
      return usable(static_cast<double>(r.Uint(offset, 4)));
    case 16:  // LONG8
      return usable(static_cast<double>(r.Uint(offset, 8)));
    case 6:  // SBYTE
      return usable(static_cast<int8_t>(r.Uint(offset, 1)));
    case 8:  // SSHORT
      return usable(static_cast<int16_t>(r.Uint(offset, 2)));
    case 9:  // SLONG
      return usable(static_cast<int32_t>(r.Uint(offset, 4)));
    case 5:     // RATIONAL
    case 10: {  // SRATIONAL
      int64_t num = static_cast<int64_t>(r.Uint(offset, 4));
      int64_t den = static_cast<int64_t>(r.Uint(offset + 4, 4));
      if (type == 10) {
        num = static_cast<int32_t>(num);
        den = static_cast<int32_t>(den);
      }
      if (den == 0 || num % den != 0) return 1;
      return usable(static_cast<double>(num / den));
    }
    case 11: {  // FLOAT
      const uint32_t bits = static_cast<uint32_t>(r.Uint(offset, 4));
      float f;
      std::memcpy(&f, &bits, sizeof(f));
      return usable(f);
    }
    case 12: {  // DOUBLE
      const uint64_t bits = r.Uint(offset, 8);
      double d;
      std::memcpy(&d, &bits, sizeof(d));
      return usable(d);
    }
    default:  // BYTE, ASCII, UNDEFINED: bytes / str in Python
      return 1;
  }
}

Orientation ParseExifOrientation(const uint8_t* data, size_t size) {
  Orientation result;
  // Exif.load: drop the "Exif\0\0" of a JPEG APP1 segment.
  if (size >= 6 && std::memcmp(data, "Exif\0\0", 6) == 0) {
    data += 6;
    size -= 6;
  }
  if (size < 8) return result;
  // TiffImagePlugin.PREFIXES without BigTIFF (which no EXIF writer produces).
  if (std::memcmp(data, "II*\0", 4) != 0 && std::memcmp(data, "MM\0*", 4) != 0 &&
      std::memcmp(data, "MM*\0", 4) != 0 && std::memcmp(data, "II\0*", 4) != 0) {
    return result;
  }
  const ByteReader r(data, size, data[0] == 'I');
  const uint64_t ifd = r.Uint(4, 4);
  if (!r.Has(ifd, 2)) return result;
  const uint64_t count = r.Uint(ifd, 2);
  // Unit sizes of ImageFileDirectory_v2._load_dispatch; 0 = a type it skips.
  static constexpr int kUnit[17] = {0, 1, 1, 2, 4, 8, 1, 1, 2, 4, 8, 4, 8, 4, 0, 0, 8};
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t entry = ifd + 2 + 12 * i;
    if (!r.Has(entry, 12)) break;  // _ensure_read fails: OSError ends the IFD
    const uint64_t tag = r.Uint(entry, 2);
    const uint64_t type = r.Uint(entry + 2, 2);
    const uint64_t n = r.Uint(entry + 4, 4);
    if (type >= 17 || kUnit[type] == 0) continue;  // unsupported type: skipped
    const uint64_t bytes = n * static_cast<uint64_t>(kUnit[type]);
    uint64_t value_offset = entry + 8;
    if (bytes > 4) {
      value_offset = r.Uint(entry + 8, 4);
      if (!r.Has(value_offset, bytes)) break;  // _safe_read fails: OSError ends the IFD
    }
    if (bytes == 0) continue;  // "if not data: continue"
    if (tag != 0x0112) continue;
    result.present = true;
    result.value = OrientationValue(r, value_offset, static_cast<int>(type));
  }
  return result;
}

// XMP (Image.getexif, only when the EXIF has no Orientation): the first match of
// r'tiff:Orientation(="|>)([0-9])'.
Orientation ParseXmpOrientation(absl::string_view xmp) {
  Orientation result;
  constexpr absl::string_view kKey = "tiff:Orientation";
  for (size_t pos = xmp.find(kKey); pos != absl::string_view::npos; pos = xmp.find(kKey, pos + 1)) {
    absl::string_view rest = xmp.substr(pos + kKey.size());
    if (rest.size() >= 3 && rest[0] == '=' && rest[1] == '"' && rest[2] >= '0' && rest[2] <= '9') {
      rest.remove_prefix(2);
    } else if (rest.size() >= 2 && rest[0] == '>' && rest[1] >= '0' && rest[1] <= '9') {
      rest.remove_prefix(1);
    } else {
      continue;
    }
    const int v = rest[0] - '0';
    result.present = true;
    result.value = v >= 2 && v <= 8 ? v : 1;
    return result;
  }
  return result;
}

// ImageMagick's "Raw profile type exif" PNG text: bytes.fromhex of the text after its third
// newline. Invalid hex (a ValueError in Pillow) gives no EXIF.
std::optional<std::vector<uint8_t>> DecodeRawProfile(absl::string_view text) {
  size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    pos = text.find('\n', pos);
    if (pos == absl::string_view::npos) return std::nullopt;
    ++pos;
  }
  std::vector<uint8_t> out;
  int high = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') continue;  // "".join(... .split("\n"))
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else if (high < 0 && (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f')) {
      continue;  // fromhex skips ASCII whitespace between bytes
    } else {
      return std::nullopt;
    }
    if (high < 0) {
      high = v;
    } else {
      out.push_back(static_cast<uint8_t>(high * 16 + v));
      high = -1;
    }
  }
  if (high >= 0) return std::nullopt;
  return out;
}

// ImageOps.exif_transpose: Image.transpose with FLIP_LEFT_RIGHT (2), ROTATE_180 (3),
// FLIP_TOP_BOTTOM (4), TRANSPOSE (5), ROTATE_270 (6), TRANSVERSE (7), ROTATE_90 (8).
RgbImage ApplyOrientation(RgbImage image, int orientation) {
  if (orientation < 2 || orientation > 8) return image;
  const int64_t w = image.width, h = image.height;
  const bool swap = orientation >= 5;
  RgbImage out;
  out.width = swap ? h : w;
  out.height = swap ? w : h;
  out.pixels.resize(image.pixels.size());
  for (int64_t y = 0; y < out.height; ++y) {
    for (int64_t x = 0; x < out.width; ++x) {
      int64_t sx = 0, sy = 0;  // the source pixel of output pixel (x, y)
      switch (orientation) {
        case 2:
          sx = w - 1 - x;
          sy = y;
          break;
        case 3:
          sx = w - 1 - x;
          sy = h - 1 - y;
          break;
        case 4:
          sx = x;
          sy = h - 1 - y;
          break;
        case 5:
          sx = y;
          sy = x;
          break;
        case 6:
          sx = y;
          sy = h - 1 - x;
          break;
        case 7:
          sx = w - 1 - y;
          sy = h - 1 - x;
          break;
        case 8:
          sx = w - 1 - y;
          sy = x;
          break;
      }
      std::memcpy(&out.pixels[(y * out.width + x) * 3], &image.pixels[(sy * w + sx) * 3], 3);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// PNG (libpng 1.6). Pixels become what Pillow's PngImagePlugin + convert("RGB") give:
//   gray 1/2/4/8-bit  -> L scaled to 8 bits (libpng's expansion scales the same way), replicated
//   gray+alpha        -> L replicated, alpha dropped
//   RGB / RGBA        -> R G B, alpha dropped
//   16-bit RGB(A) and gray+alpha -> the high byte of each sample (Pillow's RGB;16B / LA;16B)
//   palette           -> Pillow's 256-entry palette: entries past PLTE keep the gray ramp
//                        (i, i, i) it starts from, where libpng's expansion would give black
//   tRNS              -> ignored (convert("RGB") keeps the colours)
// gAMA, cHRM, sRGB, iCCP and sBIT are ignored, as Pillow ignores them.

struct PngContext {
  // Input.
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t pos = 0;
  bool truncated = false;  // a read went past the end of the data
  bool cut_short = false;  // the file ended early (see PreparePngData)
  // libpng.
  png_structp png = nullptr;
  png_infop info = nullptr;
  char message[256] = {0};
  // Header (phase 1).
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0, interlace = 0;
  // Pixels (phase 2): the caller's buffers.
  uint8_t palette[256][3];
  uint8_t* rgb = nullptr;             // width * height * 3
  uint8_t* rows = nullptr;            // one row (not interlaced)
  png_bytepp row_pointers = nullptr;  // every row of the image (interlaced)
  size_t row_bytes = 0;               // after the transforms: width * channels
  int channels = 0;
  png_uint_32 next_row = 0;   // the next row png_read_row delivers (not interlaced)
  uint64_t rows_decoded = 0;  // rows (of all passes) libpng has decompressed
  uint64_t rows_expected = 0;
  bool failed_after_rows = false;  // libpng failed past the last row (see PngReadPixels)
};

void PngError(png_structp png, png_const_charp message) {
  auto* ctx = static_cast<PngContext*>(png_get_error_ptr(png));
  std::snprintf(ctx->message, sizeof(ctx->message), "%s", message ? message : "unknown error");
  png_longjmp(png, 1);
}

void PngWarning(png_structp, png_const_charp) {}  // Pillow does not fail on what libpng warns of

void PngRead(png_structp png, png_bytep out, png_size_t n) {
  auto* ctx = static_cast<PngContext*>(png_get_io_ptr(png));
  if (n > ctx->size - ctx->pos) {
    ctx->truncated = true;
    png_error(png, "image file is truncated");
  }
  std::memcpy(out, ctx->data + ctx->pos, n);
  ctx->pos += n;
}

// Called by libpng for every decompressed row (a no-op "user transform"): once it has seen the
// last row, everything the image needs has been read.
void PngCountRow(png_structp png, png_row_infop, png_bytep) {
  ++static_cast<PngContext*>(png_get_error_ptr(png))->rows_decoded;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

bool IsChunkType(const uint8_t* type) {  // PngImagePlugin.is_cid: four \w characters
  for (int i = 0; i < 4; ++i) {
    const uint8_t c = type[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) {
      return false;
    }
  }
  return true;
}

// Walks the chunks before libpng sees them, for what Pillow's PngImagePlugin does differently:
//  * the IHDR size is checked against the limits before anything else is read;
//  * before the image data, every chunk must be whole and its CRC right (PngImageFile._open);
//    Pillow never checks the CRCs of IDAT and later chunks, so libpng is told to ignore all CRCs
//    (see PngReadHeader);
//  * a file cut short inside IDAT: Pillow feeds zlib whatever data there is and fails only if a
//    row is still missing then ("image file is truncated"). libpng reads whole blocks, so a cut
//    IDAT chunk is handed to it as a shorter, complete one followed by IEND (`repaired`); a row
//    missing then shows up as libpng's "Not enough image data";
//  * Pillow stops at a chunk type that is not four word characters: an error before the image
//    data, the end of the file after it;
//  * after the image data Pillow reads chunks until IEND, such a chunk type, or a header cut
//    short; a chunk whose data is cut short fails the image (its _safe_read raises).
absl::Status PreparePngData(PngContext* ctx, std::vector<uint8_t>* repaired,
                            const ImageLimits& limits, absl::string_view origin) {
  size_t pos = 8;
  if (ctx->size >= pos + 8 + 13 && BigEndian32(ctx->data + pos) >= 13 &&
      std::memcmp(ctx->data + pos + 4, "IHDR", 4) == 0) {
    SPARK_RETURN_IF_ERROR(CheckDimensions(origin, "PNG", BigEndian32(ctx->data + pos + 8),
                                          BigEndian32(ctx->data + pos + 12), limits));
  }  // else libpng says what is wrong
  const absl::Status truncated =
      DecodeError(origin, "PNG data ends early: image file is truncated");
  bool before_idat = true;
  while (true) {
    if (ctx->size - pos < 8) return before_idat ? truncated : absl::OkStatus();
    const uint32_t length = BigEndian32(ctx->data + pos);
    const uint8_t* type = ctx->data + pos + 4;
    const bool idat = std::memcmp(type, "IDAT", 4) == 0;
    const bool iend = std::memcmp(type, "IEND", 4) == 0;
    if (!IsChunkType(type)) {
      if (!before_idat) return absl::OkStatus();
      return DecodeError(origin,
                         "corrupt PNG: broken chunk structure (a chunk type that is not four "
                         "letters or digits)");
    }
    if (!before_idat && iend) return absl::OkStatus();
    if (idat) before_idat = false;
    const size_t available = ctx->size - pos - 8;  // data and CRC bytes present
    if (length > available && idat) {
      repaired->assign(ctx->data, ctx->data + ctx->size);
      const uint32_t kept = static_cast<uint32_t>(available);
      for (int i = 0; i < 4; ++i) (*repaired)[pos + i] = static_cast<uint8_t>(kept >> (24 - 8 * i));
      static constexpr uint8_t kCrcAndIend[16] = {0,   0,   0,   0,   0,    0,    0,    0,
                                                  'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
      repaired->insert(repaired->end(), kCrcAndIend, kCrcAndIend + sizeof(kCrcAndIend));
      ctx->data = repaired->data();
      ctx->size = repaired->size();
      ctx->cut_short = true;
      return absl::OkStatus();
    }
    if (length > available || (before_idat && length + size_t{4} > available)) return truncated;
    if (before_idat) {
      const uint32_t stored = BigEndian32(ctx->data + pos + 8 + length);
      const uint32_t computed = static_cast<uint32_t>(::crc32(0, type, length + 4));
      if (stored != computed) {
        return DecodeError(
            origin,
            absl::StrCat("corrupt PNG: bad CRC in the ",
                         PrintableText(absl::string_view(reinterpret_cast<const char*>(type), 4)),
                         " chunk"));
      }
      if (iend) return absl::OkStatus();  // libpng says what is wrong
    }
    if (length + size_t{4} > available) return absl::OkStatus();  // a cut CRC: nothing reads it
    pos += 12 + static_cast<size_t>(length);
  }
}

// Phase 1: create the reader, read everything up to the first IDAT. false on error.
bool PngReadHeader(PngContext* ctx) {
  ctx->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, ctx, PngError, PngWarning);
  if (ctx->png == nullptr) {
    std::snprintf(ctx->message, sizeof(ctx->message), "cannot create a libpng reader");
    return false;
  }
  if (setjmp(png_jmpbuf(ctx->png))) return false;
  ctx->info = png_create_info_struct(ctx->png);
  if (ctx->info == nullptr) png_error(ctx->png, "cannot create a libpng info struct");
  png_set_read_fn(ctx->png, ctx, PngRead);
  // Pillow has no per-side limit (only the pixel count, checked by the caller); libpng's default
  // refuses sides above 1000000.
  png_set_user_limits(ctx->png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
  // PreparePngData did Pillow's CRC checks; libpng uses every chunk as it is.
  png_set_crc_action(ctx->png, PNG_CRC_QUIET_USE, PNG_CRC_QUIET_USE);
  // zlib's answer can depend on how its input is cut: once the last row is out, it goes on to
  // check the stream's Adler-32 only if those bytes came in the same block. Pillow reads IDAT
  // data in blocks of 64 KiB (ImageFile.MAXBLOCK, restarting at each chunk); so does libpng now,
  // instead of its default 8 KiB.
  png_set_compression_buffer_size(ctx->png, 65536);
  png_read_info(ctx->png, ctx->info);
  png_get_IHDR(ctx->png, ctx->info, &ctx->width, &ctx->height, &ctx->bit_depth, &ctx->color_type,
               &ctx->interlace, nullptr, nullptr);
  return true;
}

void PngConvertRow(const PngContext* ctx, const uint8_t* in, uint8_t* out) {
  const size_t w = ctx->width;
  switch (ctx->color_type) {
    case PNG_COLOR_TYPE_PALETTE:
      for (size_t x = 0; x < w; ++x) std::memcpy(out + 3 * x, ctx->palette[in[x]], 3);
      break;
    case PNG_COLOR_TYPE_GRAY:
    case PNG_COLOR_TYPE_GRAY_ALPHA: {
      const int step = ctx->channels;
      for (size_t x = 0; x < w; ++x) out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = in[step * x];
      break;
    }
    default: {  // RGB, RGBA
      const int step = ctx->channels;
      for (size_t x = 0; x < w; ++x) std::memcpy(out + 3 * x, in + step * x, 3);
      break;
    }
  }
}

// Phase 2: the pixels, into ctx->rgb. false on error.
bool PngReadPixels(PngContext* ctx) {
  const size_t w3 = static_cast<size_t>(ctx->width) * 3;
  if (setjmp(png_jmpbuf(ctx->png))) {
    // libpng goes on reading after the last row (the end of the zlib stream, the chunk's CRC)
    // before png_read_row returns; Pillow stops at the last row. An error once every row has
    // been decompressed (a file cut short after its pixel data) is not an error of the image.
    if (ctx->rows_decoded != ctx->rows_expected) return false;
    ctx->failed_after_rows = true;
    if (ctx->row_pointers == nullptr) {
      PngConvertRow(ctx, ctx->rows, ctx->rgb + ctx->next_row * w3);
    } else {
      for (png_uint_32 y = 0; y < ctx->height; ++y) {
        PngConvertRow(ctx, ctx->row_pointers[y], ctx->rgb + y * w3);
      }
    }
    return true;
  }
  if (ctx->color_type == PNG_COLOR_TYPE_PALETTE) {
    png_set_packing(ctx->png);  // one index per byte
  } else if (ctx->bit_depth < 8) {
    png_set_expand_gray_1_2_4_to_8(ctx->png);
  }
  if (ctx->bit_depth == 16) png_set_strip_16(ctx->png);  // keeps the high byte
  png_set_read_user_transform_fn(ctx->png, PngCountRow);
  png_set_interlace_handling(ctx->png);
  png_read_update_info(ctx->png, ctx->info);
  if (png_get_rowbytes(ctx->png, ctx->info) != ctx->row_bytes ||
      png_get_channels(ctx->png, ctx->info) != ctx->channels) {
    png_error(ctx->png, "unexpected row layout after libpng's transforms");
  }
  if (ctx->row_pointers == nullptr) {
    ctx->rows_expected = ctx->height;
    for (; ctx->next_row < ctx->height; ++ctx->next_row) {
      png_read_row(ctx->png, ctx->rows, nullptr);
      PngConvertRow(ctx, ctx->rows, ctx->rgb + ctx->next_row * w3);
    }
  } else {
    // Adam7 fills rows in seven passes: the whole image has to be there first. Passes with no
    // pixel (a narrow or short image) hold no rows.
    for (int pass = 0; pass < 7; ++pass) {
      if (PNG_PASS_COLS(ctx->width, pass) != 0)
        ctx->rows_expected += PNG_PASS_ROWS(ctx->height, pass);
    }
    png_read_image(ctx->png, ctx->row_pointers);
    for (png_uint_32 y = 0; y < ctx->height; ++y) {
      PngConvertRow(ctx, ctx->row_pointers[y], ctx->rgb + y * w3);
    }
  }
  return true;
}

// Phase 3: the chunks after the image data (an eXIf or text chunk may follow IDAT; Pillow reads
// them when getexif() loads the image). A failure here loses only such metadata: Pillow, too,
// stops at a damaged chunk after the image data without failing the image.
bool PngReadEnd(PngContext* ctx) {
  if (setjmp(png_jmpbuf(ctx->png))) return false;
  png_read_end(ctx->png, ctx->info);
  return true;
}

class PngReader {
 public:
  explicit PngReader(PngContext* ctx) : ctx_(ctx) {}
  ~PngReader() {
    if (ctx_->png != nullptr)
      png_destroy_read_struct(&ctx_->png, ctx_->info ? &ctx_->info : nullptr, nullptr);
  }
  PngReader(const PngReader&) = delete;
  PngReader& operator=(const PngReader&) = delete;

 private:
  PngContext* ctx_;
};

absl::Status PngFailure(const PngContext& ctx, absl::string_view origin) {
  if (ctx.truncated || (ctx.cut_short && std::strcmp(ctx.message, "Not enough image data") == 0)) {
    return DecodeError(origin, "PNG data ends early: image file is truncated");
  }
  return DecodeError(origin, absl::StrCat("corrupt PNG: ", ctx.message));
}

absl::StatusOr<RgbImage> DecodePng(absl::Span<const uint8_t> bytes, absl::string_view origin,
                                   const ImageLimits& limits) {
  auto ctx = std::make_unique<PngContext>();
  ctx->data = bytes.data();
  ctx->size = bytes.size();
  std::vector<uint8_t> repaired;
  SPARK_RETURN_IF_ERROR(PreparePngData(ctx.get(), &repaired, limits, origin));
  PngReader reader(ctx.get());
  if (!PngReadHeader(ctx.get())) return PngFailure(*ctx, origin);
  SPARK_RETURN_IF_ERROR(CheckDimensions(origin, "PNG", ctx->width, ctx->height, limits));
  if (ctx->bit_depth == 16 && ctx->color_type == PNG_COLOR_TYPE_GRAY) {
    return absl::InvalidArgumentError(absl::StrCat(
        Origin(origin),
        ": 16-bit grayscale PNG is not supported: Pillow, which Hugging Face's processor reads "
        "images with, clips its samples to 0..255 instead of scaling them (most such pictures "
        "come out white), so there is no faithful reference to match; convert it to 8-bit first"));
  }
  switch (ctx->color_type) {
    case PNG_COLOR_TYPE_PALETTE:
    case PNG_COLOR_TYPE_GRAY:
      ctx->channels = 1;
      break;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      ctx->channels = 2;
      break;
    case PNG_COLOR_TYPE_RGB:
      ctx->channels = 3;
      break;
    case PNG_COLOR_TYPE_RGB_ALPHA:
      ctx->channels = 4;
      break;
    default:
      return DecodeError(origin, absl::StrCat("corrupt PNG: colour type ", ctx->color_type));
  }
  if (ctx->color_type == PNG_COLOR_TYPE_PALETTE) {
    // ImagingPaletteNew starts from a gray ramp; PLTE overwrites its first entries.
    for (int i = 0; i < 256; ++i) ctx->palette[i][0] = ctx->palette[i][1] = ctx->palette[i][2] = i;
    png_colorp plte = nullptr;
    int entries = 0;
    if (png_get_PLTE(ctx->png, ctx->info, &plte, &entries) == 0) {
      return DecodeError(origin, "corrupt PNG: a palette image without a PLTE chunk");
    }
    for (int i = 0; i < entries && i < 256; ++i) {
      ctx->palette[i][0] = plte[i].red;
      ctx->palette[i][1] = plte[i].green;
      ctx->palette[i][2] = plte[i].blue;
    }
  }
  ctx->row_bytes = static_cast<size_t>(ctx->width) * ctx->channels;
  RgbImage image;
  image.width = ctx->width;
  image.height = ctx->height;
  image.pixels.resize(static_cast<size_t>(ctx->width) * ctx->height * 3);
  const bool interlaced = ctx->interlace != PNG_INTERLACE_NONE;
  std::vector<uint8_t> rows(interlaced ? ctx->row_bytes * ctx->height : ctx->row_bytes);
  std::vector<png_bytep> row_pointers(interlaced ? ctx->height : 0);
  for (size_t y = 0; y < row_pointers.size(); ++y) row_pointers[y] = &rows[y * ctx->row_bytes];
  ctx->rgb = image.pixels.data();
  ctx->rows = rows.data();
  ctx->row_pointers = interlaced ? row_pointers.data() : nullptr;  // selects the read loop
  if (!PngReadPixels(ctx.get())) return PngFailure(*ctx, origin);
  rows = {};
  row_pointers = {};
  // Metadata only (see PngReadEnd); a reader that failed must not be used again.
  if (!ctx->failed_after_rows) PngReadEnd(ctx.get());

  // Image.getexif for a PNG: the eXIf chunk, else the "Raw profile type exif" text; then XMP
  // when that gave no Orientation. A key present twice keeps its last value (a Python dict).
  Orientation orientation;
  std::optional<std::vector<uint8_t>> exif;
  png_bytep exif_data = nullptr;
  png_uint_32 exif_size = 0;
  if (png_get_eXIf_1(ctx->png, ctx->info, &exif_size, &exif_data) != 0 && exif_data != nullptr) {
    exif.emplace(exif_data, exif_data + exif_size);
  }
  png_textp text = nullptr;
  int text_count = 0;
  png_get_text(ctx->png, ctx->info, &text, &text_count);
  std::optional<std::string> raw_profile, xmp;
  for (int i = 0; i < text_count; ++i) {
    const absl::string_view key = text[i].key;
    const char* value = text[i].text != nullptr ? text[i].text : "";
    const size_t length = text[i].compression == PNG_ITXT_COMPRESSION_NONE ||
                                  text[i].compression == PNG_ITXT_COMPRESSION_zTXt
                              ? text[i].itxt_length
                              : text[i].text_length;
    if (key == "Raw profile type exif") raw_profile.emplace(value, length);
    if (key == "XML:com.adobe.xmp") xmp.emplace(value, length);
  }
  if (!exif && raw_profile) exif = DecodeRawProfile(*raw_profile);
  if (exif) orientation = ParseExifOrientation(exif->data(), exif->size());
  if (!orientation.present && xmp) orientation = ParseXmpOrientation(*xmp);
  return ApplyOrientation(std::move(image), orientation.value);
}

// ---------------------------------------------------------------------------------------------
// JPEG (libjpeg-turbo, the library Pillow links), with Pillow's settings: libjpeg's defaults
// (islow DCT, fancy upsampling, block smoothing), output colour space from the SOF's component
// count (1: grayscale, 3: RGB, 4: CMYK; YCCK is converted to CMYK by libjpeg). CMYK is always
// read as Adobe-inverted ("CMYK;I": Pillow assumes Photoshop's convention) and turned into RGB by
// Pillow's cmyk2rgb. Warnings about corrupt data do not fail the image (Pillow ignores them);
// running out of data does (Pillow raises "image file is truncated"), except once the last
// scanline is out (Pillow's jpeg_finish_decompress then just stops); a fatal libjpeg error fails
// it anywhere, also in the markers after the image data.

struct JpegContext {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr error;
  jpeg_source_mgr source;
  jmp_buf jump;
  bool created = false;
  bool truncated = false;
  char message[JMSG_LENGTH_MAX] = {0};
  // Pixels (phase 2): the caller's buffer.
  uint8_t* rgb = nullptr;
};

JpegContext* JpegContextOf(j_common_ptr cinfo) {
  // `cinfo` is the first member of JpegContext.
  return reinterpret_cast<JpegContext*>(cinfo);
}

void JpegErrorExit(j_common_ptr cinfo) {
  JpegContext* ctx = JpegContextOf(cinfo);
  (*cinfo->err->format_message)(cinfo, ctx->message);
  longjmp(ctx->jump, 1);
}

void JpegOutputMessage(j_common_ptr) {}  // never print

void JpegInitSource(j_decompress_ptr) {}
void JpegTermSource(j_decompress_ptr) {}

// The whole file is in the buffer from the start, so libjpeg asks for more only past its end.
boolean JpegFillInputBuffer(j_decompress_ptr cinfo) {
  JpegContextOf(reinterpret_cast<j_common_ptr>(cinfo))->truncated = true;
  ERREXIT(cinfo, JERR_INPUT_EOF);
  return FALSE;
}

void JpegSkipInputData(j_decompress_ptr cinfo, long n) {
  if (n <= 0) return;
  if (static_cast<size_t>(n) > cinfo->src->bytes_in_buffer) {
    JpegFillInputBuffer(cinfo);
    return;
  }
  cinfo->src->next_input_byte += n;
  cinfo->src->bytes_in_buffer -= static_cast<size_t>(n);
}

// Phase 1: set up and read the header (markers up to the first scan). false on error.
bool JpegReadHeader(JpegContext* ctx, const uint8_t* data, size_t size) {
  ctx->cinfo.err = jpeg_std_error(&ctx->error);
  ctx->error.error_exit = JpegErrorExit;
  ctx->error.output_message = JpegOutputMessage;
  if (setjmp(ctx->jump)) return false;
  jpeg_create_decompress(&ctx->cinfo);
  ctx->created = true;
  ctx->source.next_input_byte = data;
  ctx->source.bytes_in_buffer = size;
  ctx->source.init_source = JpegInitSource;
  ctx->source.fill_input_buffer = JpegFillInputBuffer;
  ctx->source.skip_input_data = JpegSkipInputData;
  ctx->source.resync_to_restart = jpeg_resync_to_restart;
  ctx->source.term_source = JpegTermSource;
  ctx->cinfo.src = &ctx->source;
  jpeg_save_markers(&ctx->cinfo, JPEG_APP0 + 1, 0xffff);  // EXIF
  jpeg_read_header(&ctx->cinfo, TRUE);
  return true;
}

// Phase 2: decompress into ctx->rgb. false on error.
bool JpegReadPixels(JpegContext* ctx) {
  if (setjmp(ctx->jump)) return false;
  j_decompress_ptr cinfo = &ctx->cinfo;
  const int components = cinfo->num_components;
  cinfo->out_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_start_decompress(cinfo);
  if (cinfo->output_components != components || cinfo->output_width != cinfo->image_width ||
      cinfo->output_height != cinfo->image_height) {
    ERREXIT1(cinfo, JERR_BAD_J_COLORSPACE, cinfo->jpeg_color_space);  // cannot happen
  }
  const size_t w = cinfo->output_width;
  JSAMPARRAY row = (*cinfo->mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(cinfo), JPOOL_IMAGE,
                                               static_cast<JDIMENSION>(w * components), 1);
  while (cinfo->output_scanline < cinfo->output_height) {
    uint8_t* out = ctx->rgb + static_cast<size_t>(cinfo->output_scanline) * w * 3;
    if (jpeg_read_scanlines(cinfo, row, 1) != 1) {
      ERREXIT(cinfo, JERR_INPUT_EOF);  // cannot happen with a non-suspending source
    }
    const uint8_t* in = row[0];
    if (components == 1) {
      for (size_t x = 0; x < w; ++x) out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = in[x];
    } else if (components == 3) {
      std::memcpy(out, in, w * 3);
    } else {
      // Unpack "CMYK;I" (each v read as 255 - v), then Convert.c cmyk2rgb: nk = 255 - K,
      // channel = CLIP8(nk - MULDIV255(C, nk)) with
      // MULDIV255(a, b) = (((a * b + 128) >> 8) + a * b + 128) >> 8.
      for (size_t x = 0; x < w; ++x) {
        const int nk = 255 - (255 - in[4 * x + 3]);
        for (int c = 0; c < 3; ++c) {
          const int tmp = (255 - in[4 * x + c]) * nk + 128;
          const int muldiv = ((tmp >> 8) + tmp) >> 8;
          out[3 * x + c] = static_cast<uint8_t>(std::clamp(nk - muldiv, 0, 255));
        }
      }
    }
  }
  return true;
}

// Phase 3: jpeg_finish_decompress, as Pillow calls it: it reads on to the EOI marker. Running out
// of data there is fine (Pillow's suspending source just stops); a fatal error (a broken marker
// after the image data) is not.
bool JpegFinish(JpegContext* ctx) {
  if (setjmp(ctx->jump)) return ctx->truncated;
  jpeg_finish_decompress(&ctx->cinfo);
  return true;
}

class JpegReader {
 public:
  explicit JpegReader(JpegContext* ctx) : ctx_(ctx) {}
  ~JpegReader() {
    if (ctx_->created) jpeg_destroy_decompress(&ctx_->cinfo);
  }
  JpegReader(const JpegReader&) = delete;
  JpegReader& operator=(const JpegReader&) = delete;

 private:
  JpegContext* ctx_;
};

absl::Status JpegFailure(const JpegContext& ctx, absl::string_view origin) {
  if (ctx.truncated) {
    return DecodeError(origin, "JPEG data ends early: image file is truncated");
  }
  return DecodeError(origin, absl::StrCat("corrupt JPEG: ", ctx.message));
}

absl::StatusOr<RgbImage> DecodeJpeg(absl::Span<const uint8_t> bytes, absl::string_view origin,
                                    const ImageLimits& limits) {
  auto ctx = std::make_unique<JpegContext>();
  JpegReader reader(ctx.get());
  if (!JpegReadHeader(ctx.get(), bytes.data(), bytes.size())) return JpegFailure(*ctx, origin);
  const jpeg_decompress_struct& cinfo = ctx->cinfo;
  SPARK_RETURN_IF_ERROR(
      CheckDimensions(origin, "JPEG", cinfo.image_width, cinfo.image_height, limits));
  if (cinfo.data_precision != 8) {
    return DecodeError(origin, absl::StrCat("a ", cinfo.data_precision,
                                            "-bit JPEG; Pillow (and Spark) read 8-bit JPEGs only"));
  }
  if (cinfo.num_components != 1 && cinfo.num_components != 3 && cinfo.num_components != 4) {
    return DecodeError(origin, absl::StrCat("a JPEG with ", cinfo.num_components,
                                            " components; Pillow (and Spark) read 1 (gray), 3 "
                                            "(YCbCr/RGB) or 4 (CMYK/YCCK)"));
  }
  // JpegImagePlugin.APP: the first APP1 segment that starts with "Exif\0".
  Orientation orientation;
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m != nullptr; m = m->next) {
    if (m->marker == JPEG_APP0 + 1 && m->data_length >= 5 &&
        std::memcmp(m->data, "Exif\0", 5) == 0) {
      orientation = ParseExifOrientation(m->data, m->data_length);
      break;
    }
  }
  RgbImage image;
  image.width = cinfo.image_width;
  image.height = cinfo.image_height;
  image.pixels.resize(static_cast<size_t>(image.width) * image.height * 3);
  ctx->rgb = image.pixels.data();
  if (!JpegReadPixels(ctx.get()) || !JpegFinish(ctx.get())) return JpegFailure(*ctx, origin);
  return ApplyOrientation(std::move(image), orientation.value);
}

// ---------------------------------------------------------------------------------------------
// Pillow's resample (libImaging/Resample.c: precompute_coeffs, normalize_coeffs_8bpc,
// ImagingResampleHorizontal_8bpc / Vertical_8bpc, ImagingResampleInner), BICUBIC, box = the
// whole image, 8-bit channels. Two passes: horizontal into a temporary image of the rows the
// vertical pass reads, then vertical; each output sample is a fixed-point sum (22 fraction bits,
// rounding bias 1 << 21) clipped to 0..255. Pillow keeps the whole temporary image and every
// coefficient; here the vertical coefficients are computed per output row and the temporary
// rows live in a ring of as many rows as one output row reads, which gives the same integers
// with bounded memory (Pillow runs out of memory on extreme aspect ratios; this does not).

constexpr int kPrecisionBits = 32 - 8 - 2;

double BicubicFilter(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

constexpr double kBicubicSupport = 2.0;

// One axis of the resample: input size -> output size.
class ResampleAxis {
 public:
  ResampleAxis(int in_size, int out_size) : in_size_(in_size) {
    const float in0 = 0.0f, in1 = static_cast<float>(in_size);  // the box, as C floats
    scale_ = static_cast<double>(in1 - in0) / out_size;
    filterscale_ = scale_ < 1.0 ? 1.0 : scale_;
    support_ = kBicubicSupport * filterscale_;
    ksize_ = static_cast<int>(std::ceil(support_)) * 2 + 1;
    weights_.resize(ksize_);
  }
  int ksize() const { return ksize_; }

  // The first input index and the fixed-point coefficients of output index `xx`; returns the
  // number of coefficients (at most ksize()).
  int Taps(int xx, int* first, int32_t* k) {
    const double center = 0.0f + (xx + 0.5) * scale_;
    double ww = 0.0;
    const double ss = 1.0 / filterscale_;
    int xmin = static_cast<int>(center - support_ + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support_ + 0.5);
    if (xmax > in_size_) xmax = in_size_;
    xmax -= xmin;
    for (int x = 0; x < xmax; ++x) {
      const double w = BicubicFilter((x + xmin - center + 0.5) * ss);
      weights_[x] = w;
      ww += w;
    }
    for (int x = 0; x < xmax; ++x) {
      if (ww != 0.0) weights_[x] /= ww;
    }
    for (int x = 0; x < xmax; ++x) {
      const double v = weights_[x];
      k[x] = v < 0 ? static_cast<int32_t>(-0.5 + v * (1 << kPrecisionBits))
                   : static_cast<int32_t>(0.5 + v * (1 << kPrecisionBits));
    }
    *first = xmin;
    return xmax;
  }

 private:
  int in_size_;
  double scale_, filterscale_, support_;
  int ksize_;
  std::vector<double> weights_;
};

inline uint8_t Clip8(int32_t v) {
  const int32_t s = v >> kPrecisionBits;  // arithmetic shift, as Pillow's clip8
  return static_cast<uint8_t>(s < 0 ? 0 : s > 255 ? 255 : s);
}

// The horizontal taps of every output column, kept when they fit a modest table (they are
// reused for every row), else computed per row (only for inputs tens of millions of pixels
// wide, which are a few rows tall).
class HorizontalTaps {
 public:
  HorizontalTaps(int in_w, int out_w) : axis_(in_w, out_w), out_w_(out_w) {
    const int64_t table = static_cast<int64_t>(out_w) * axis_.ksize();
    if (table <= (int64_t{1} << 24)) {
      first_.resize(out_w);
      count_.resize(out_w);
      k_.resize(table);
      for (int xx = 0; xx < out_w; ++xx) {
        count_[xx] = axis_.Taps(xx, &first_[xx], &k_[static_cast<size_t>(xx) * axis_.ksize()]);
      }
    } else {
      scratch_.resize(axis_.ksize());
    }
  }

  void Row(const uint8_t* in, uint8_t* out) {
    for (int xx = 0; xx < out_w_; ++xx) {
      int first, count;
      const int32_t* k;
      if (!first_.empty()) {
        first = first_[xx];
        count = count_[xx];
        k = &k_[static_cast<size_t>(xx) * axis_.ksize()];
      } else {
        count = axis_.Taps(xx, &first, scratch_.data());
        k = scratch_.data();
      }
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      const uint8_t* p = in + static_cast<size_t>(first) * 3;
      for (int x = 0; x < count; ++x) {
        s0 += p[3 * x] * k[x];
        s1 += p[3 * x + 1] * k[x];
        s2 += p[3 * x + 2] * k[x];
      }
      out[3 * xx] = Clip8(s0);
      out[3 * xx + 1] = Clip8(s1);
      out[3 * xx + 2] = Clip8(s2);
    }
  }

 private:
  ResampleAxis axis_;
  int out_w_;
  std::vector<int> first_, count_;
  std::vector<int32_t> k_, scratch_;
};

absl::Status CheckRgbImage(const RgbImage& image, absl::string_view what) {
  // Sides below 2^31 (what Pillow's C ints hold): width * height * 3 fits in 64 bits.
  if (image.width <= 0 || image.height <= 0 || image.width > std::numeric_limits<int32_t>::max() ||
      image.height > std::numeric_limits<int32_t>::max() ||
      image.pixels.size() != static_cast<uint64_t>(image.width) * image.height * 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", image.width, "x", image.height, " image with ",
                     image.pixels.size(), " bytes of pixels; expected width * height * 3"));
  }
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------------------------------------------

absl::StatusOr<RgbImage> DecodeImage(absl::Span<const uint8_t> bytes, absl::string_view origin,
                                     const ImageLimits& limits) {
  if (bytes.empty()) {
    return DecodeError(origin, absl::StrCat("empty input (0 bytes); ", kReadableFormats));
  }
  switch (SniffFormat(bytes)) {
    case Format::kPng:
      return DecodePng(bytes, origin, limits);
    case Format::kJpeg:
      return DecodeJpeg(bytes, origin, limits);
    case Format::kUnknown:
      break;
  }
  const std::string other = OtherFormatName(bytes);
  return DecodeError(
      origin, absl::StrCat("not a PNG or JPEG image",
                           other.empty() ? "" : absl::StrCat(" (it looks like ", other, ")"), "; ",
                           kReadableFormats));
}

absl::StatusOr<RgbImage> ReadImageFile(const std::string& path, const ImageLimits& limits) {
  SPARK_RETURN_IF_ERROR(CheckRegularFile(path));
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return PathErrnoStatus(errno, "stat", path);
  if (limits.max_file_bytes >= 0 && st.st_size > limits.max_file_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        PrintableText(path), " is ", st.st_size, " bytes, more than the image file limit of ",
        limits.max_file_bytes, " bytes (ImageLimits::max_file_bytes)"));
  }
  SPARK_ASSIGN_OR_RETURN(const std::string contents, ReadFileToString(path));
  if (limits.max_file_bytes >= 0 && static_cast<int64_t>(contents.size()) > limits.max_file_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(PrintableText(path), " grew past the image file limit of ",
                     limits.max_file_bytes, " bytes while it was read"));
  }
  return DecodeImage(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(contents.data()), contents.size()), path,
      limits);
}

absl::StatusOr<std::pair<int64_t, int64_t>> ImageTargetSize(int64_t height, int64_t width,
                                                            int64_t max_soft_tokens) {
  if (std::find(kSupportedImageSoftTokens.begin(), kSupportedImageSoftTokens.end(),
                max_soft_tokens) == kSupportedImageSoftTokens.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_soft_tokens must be one of 70, 140, 280, 560, 1120 (Gemma 4's image processor), got ",
        max_soft_tokens));
  }
  // Python's ints are exact; so are these doubles while the pixel count stays below 2^53.
  constexpr int64_t kMaxSide = std::numeric_limits<int32_t>::max();
  if (height < 1 || width < 1 || height > kMaxSide || width > kMaxSide ||
      height * width > (int64_t{1} << 53)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot fit a ", width, "x", height,
                     " image to patches: each side must be 1 to 2^31 - 1 pixels and the pixel "
                     "count at most 2^53"));
  }
  // get_aspect_ratio_preserving_size, step by step (Python floats are doubles; int / int is the
  // correctly rounded quotient, which a double division of these exact values gives too).
  const int64_t max_patches = max_soft_tokens * kImagePoolingKernel * kImagePoolingKernel;
  const int64_t side_mult = kImagePoolingKernel * kImagePatchSize;
  const int64_t total_px = height * width;
  const int64_t target_px = max_patches * kImagePatchSize * kImagePatchSize;
  const double factor = std::sqrt(static_cast<double>(target_px) / static_cast<double>(total_px));
  const double ideal_height = factor * static_cast<double>(height);
  const double ideal_width = factor * static_cast<double>(width);
  int64_t target_height =
      static_cast<int64_t>(std::floor(ideal_height / static_cast<double>(side_mult))) * side_mult;
  int64_t target_width =
      static_cast<int64_t>(std::floor(ideal_width / static_cast<double>(side_mult))) * side_mult;
  if (target_height == 0 && target_width == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("resizing a ", width, "x", height, " image would give a 0x0 image"));
  }
  const int64_t max_side_length =
      (max_patches / (kImagePoolingKernel * kImagePoolingKernel)) * side_mult;
  if (target_height == 0) {
    target_height = side_mult;
    target_width = std::min(
        static_cast<int64_t>(std::floor(static_cast<double>(width) / static_cast<double>(height))) *
            side_mult,
        max_side_length);
  } else if (target_width == 0) {
    target_width = side_mult;
    target_height = std::min(
        static_cast<int64_t>(std::floor(static_cast<double>(height) / static_cast<double>(width))) *
            side_mult,
        max_side_length);
  }
  if (target_height * target_width > target_px) {
    return absl::InvalidArgumentError(absl::StrCat("resizing a ", width, "x", height, " image to ",
                                                   target_width, "x", target_height, " exceeds ",
                                                   max_patches, " patches"));
  }
  return std::make_pair(target_height, target_width);
}

RgbImage ResizeBicubic(const RgbImage& image, int64_t width, int64_t height) {
  // Pillow's sizes are C ints; shrinking by more than 2^20 could overflow its (and these) int32
  // sums, which are exact only because the coefficients' rounding errors stay small.
  constexpr int64_t kMaxSide = std::numeric_limits<int32_t>::max();
  constexpr int64_t kMaxShrink = int64_t{1} << 20;
  if (!CheckRgbImage(image, "").ok() || width < 1 || height < 1 || width > kMaxSide ||
      height > kMaxSide || image.width / width > kMaxShrink || image.height / height > kMaxShrink) {
    return RgbImage{};  // a broken precondition (see image.h)
  }
  if (width == image.width && height == image.height) return image;  // Image.resize: a copy
  const int in_w = static_cast<int>(image.width), in_h = static_cast<int>(image.height);
  const int out_w = static_cast<int>(width), out_h = static_cast<int>(height);
  const bool need_horizontal = out_w != in_w;
  const bool need_vertical = out_h != in_h;

  RgbImage out;
  out.width = out_w;
  out.height = out_h;
  out.pixels.resize(static_cast<size_t>(out_w) * out_h * 3);
  const size_t in_row = static_cast<size_t>(in_w) * 3, out_row = static_cast<size_t>(out_w) * 3;

  std::optional<HorizontalTaps> horizontal;
  if (need_horizontal) horizontal.emplace(in_w, out_w);
  if (!need_vertical) {
    for (int y = 0; y < in_h; ++y)
      horizontal->Row(&image.pixels[y * in_row], &out.pixels[y * out_row]);
    return out;
  }

  ResampleAxis vertical(in_h, out_h);
  const int ksize = vertical.ksize();
  std::vector<int32_t> k(ksize);
  std::vector<uint8_t> ring(need_horizontal ? static_cast<size_t>(ksize) * out_row : 0);
  std::vector<int32_t> acc(out_row);
  int next_row = 0;  // the next row of the horizontal pass to compute
  for (int yy = 0; yy < out_h; ++yy) {
    int ymin;
    const int count = vertical.Taps(yy, &ymin, k.data());
    if (need_horizontal) {
      // Windows only move down, so rows above ymin are never read again.
      next_row = std::max(next_row, ymin);
      for (; next_row < ymin + count; ++next_row) {
        horizontal->Row(&image.pixels[next_row * in_row], &ring[(next_row % ksize) * out_row]);
      }
    }
    std::fill(acc.begin(), acc.end(), 1 << (kPrecisionBits - 1));
    for (int y = 0; y < count; ++y) {
      const int row = ymin + y;
      const uint8_t* src =
          need_horizontal ? &ring[(row % ksize) * out_row] : &image.pixels[row * in_row];
      const int32_t ky = k[y];
      for (size_t i = 0; i < out_row; ++i) acc[i] += src[i] * ky;
    }
    uint8_t* dst = &out.pixels[yy * out_row];
    for (size_t i = 0; i < out_row; ++i) dst[i] = Clip8(acc[i]);
  }
  return out;
}

absl::StatusOr<ImagePatches> PreprocessImage(const RgbImage& image, int64_t max_soft_tokens) {
  SPARK_RETURN_IF_ERROR(CheckRgbImage(image, "cannot preprocess image"));
  SPARK_ASSIGN_OR_RETURN(const auto target,
                         ImageTargetSize(image.height, image.width, max_soft_tokens));
  const int64_t height = target.first, width = target.second;
  RgbImage resized;
  const RgbImage* source = &image;
  if (height != image.height || width != image.width) {
    resized = ResizeBicubic(image, width, height);
    source = &resized;
  }
  // image_transforms.rescale: image.astype(float64) * (1 / 255), then astype(float32).
  float rescaled[256];
  for (int v = 0; v < 256; ++v)
    rescaled[v] = static_cast<float>(static_cast<double>(v) * (1.0 / 255.0));

  ImagePatches out;
  out.grid_width = width / kImagePatchSize;
  out.grid_height = height / kImagePatchSize;
  const int64_t patches = out.grid_width * out.grid_height;
  out.soft_tokens = patches / (kImagePoolingKernel * kImagePoolingKernel);
  constexpr int64_t kPatchValues = kImagePatchSize * kImagePatchSize * 3;
  out.pixels.resize(static_cast<size_t>(patches * kPatchValues));
  out.positions.resize(static_cast<size_t>(patches * 2));
  // convert_image_to_patches: (C, H, W) -> (gh, 16, gw, 16, C) order (gh, gw, row, col, C).
  const uint8_t* pixels = source->pixels.data();
  for (int64_t py = 0; py < out.grid_height; ++py) {
    for (int64_t px = 0; px < out.grid_width; ++px) {
      const int64_t p = py * out.grid_width + px;
      float* dst = &out.pixels[static_cast<size_t>(p * kPatchValues)];
      for (int64_t r = 0; r < kImagePatchSize; ++r) {
        const uint8_t* src =
            pixels + ((py * kImagePatchSize + r) * width + px * kImagePatchSize) * 3;
        for (int64_t i = 0; i < kImagePatchSize * 3; ++i) *dst++ = rescaled[src[i]];
      }
      out.positions[2 * p] = static_cast<int32_t>(px);
      out.positions[2 * p + 1] = static_cast<int32_t>(py);
    }
  }
  return out;
}

}  // namespace rt
}  // namespace spark
