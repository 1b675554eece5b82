// spark/runtime/image.h against Pillow 9.4 + transformers 5: the goldens in test/data/images/
// (tools/reference/make_image_goldens.py: decoded, resized and preprocessed pixels as CRC-32s,
// target sizes), the patch layout and rescale, one test per error message, and a deterministic
// fuzz of the decoders (truncations and bit flips of every test image: an error or an image,
// never a crash; run it under ASan/UBSan).
#include "spark/runtime/image.h"

#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace spark {
namespace rt {
namespace {

using ::testing::HasSubstr;

std::string DataDir() { return std::string(SPARK_TEST_SOURCE_DIR) + "/data/images"; }

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::string Crc(const void* data, size_t size) {
  uLong crc = ::crc32(0, nullptr, 0);
  const auto* p = static_cast<const Bytef*>(data);
  while (size > 0) {  // crc32 takes a uInt length
    const uInt n = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    crc = ::crc32(crc, p, n);
    p += n;
    size -= n;
  }
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08lx", crc & 0xffffffffUL);
  return hex;
}

template <typename T>
std::string Crc(const std::vector<T>& v) {
  return Crc(v.data(), v.size() * sizeof(T));
}

// goldens.txt, split into whitespace-separated fields per line.
std::vector<std::vector<std::string>> Goldens(const std::string& kind) {
  std::ifstream in(DataDir() + "/goldens.txt");
  EXPECT_TRUE(in.good()) << "missing " << DataDir() << "/goldens.txt";
  std::vector<std::vector<std::string>> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string s; fields >> s;) f.push_back(s);
    if (!f.empty() && f[0] == kind) out.push_back(f);
  }
  return out;
}

// Decoded test images, read once.
const RgbImage& Decoded(const std::string& name) {
  static auto* cache = new std::map<std::string, RgbImage>();
  auto it = cache->find(name);
  if (it == cache->end()) {
    absl::StatusOr<RgbImage> image = ReadImageFile(DataDir() + "/" + name);
    EXPECT_TRUE(image.ok()) << image.status();
    it = cache->emplace(name, image.ok() ? *std::move(image) : RgbImage{}).first;
  }
  return it->second;
}

int64_t ToInt(const std::string& s) { return std::stoll(s); }

TEST(ImageGoldens, DecodeMatchesPillow) {
  const auto cases = Goldens("decode");
  ASSERT_GE(cases.size(), 25u);
  for (const auto& f : cases) {
    SCOPED_TRACE(f[1]);
    const RgbImage& image = Decoded(f[1]);
    EXPECT_EQ(image.width, ToInt(f[2]));
    EXPECT_EQ(image.height, ToInt(f[3]));
    EXPECT_EQ(Crc(image.pixels), f[4]);
  }
  for (const auto& f : Goldens("decode-error")) {
    absl::StatusOr<RgbImage> image = ReadImageFile(DataDir() + "/" + f[1]);
    ASSERT_FALSE(image.ok()) << f[1];
    std::string message;
    for (size_t i = 2; i < f.size(); ++i) absl::StrAppend(&message, i > 2 ? " " : "", f[i]);
    EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(image.status().message()), HasSubstr(message));
  }
}

TEST(ImageGoldens, ResizeMatchesPillowByteForByte) {
  const auto cases = Goldens("resize");
  ASSERT_GE(cases.size(), 20u);
  for (const auto& f : cases) {
    SCOPED_TRACE(absl::StrCat(f[1], " -> ", f[2], "x", f[3]));
    const RgbImage resized = ResizeBicubic(Decoded(f[1]), ToInt(f[2]), ToInt(f[3]));
    ASSERT_EQ(resized.width, ToInt(f[2]));
    ASSERT_EQ(resized.height, ToInt(f[3]));
    int64_t sums[3] = {0, 0, 0};
    for (size_t i = 0; i < resized.pixels.size(); ++i) sums[i % 3] += resized.pixels[i];
    // The channel sums say how far off a mismatch is (a rounding slip moves them by a few).
    EXPECT_EQ(sums[0], ToInt(f[5]));
    EXPECT_EQ(sums[1], ToInt(f[6]));
    EXPECT_EQ(sums[2], ToInt(f[7]));
    EXPECT_EQ(Crc(resized.pixels), f[4]);
  }
}

TEST(ImageGoldens, PreprocessMatchesTheProcessorBitForBit) {
  const auto cases = Goldens("preprocess");
  ASSERT_GE(cases.size(), 30u);
  for (const auto& f : cases) {
    SCOPED_TRACE(absl::StrCat(f[1], " at ", f[2], " soft tokens"));
    absl::StatusOr<ImagePatches> patches = PreprocessImage(Decoded(f[1]), ToInt(f[2]));
    ASSERT_TRUE(patches.ok()) << patches.status();
    EXPECT_EQ(patches->grid_width * kImagePatchSize, ToInt(f[3]));
    EXPECT_EQ(patches->grid_height * kImagePatchSize, ToInt(f[4]));
    EXPECT_EQ(patches->grid_width, ToInt(f[5]));
    EXPECT_EQ(patches->grid_height, ToInt(f[6]));
    EXPECT_EQ(patches->soft_tokens, ToInt(f[7]));
    const int64_t n = patches->grid_width * patches->grid_height;
    ASSERT_EQ(patches->pixels.size(), static_cast<size_t>(n * 768));
    ASSERT_EQ(patches->positions.size(), static_cast<size_t>(n * 2));
    EXPECT_EQ(Crc(patches->pixels), f[8]);
    EXPECT_EQ(Crc(patches->positions), f[9]);
  }
}

TEST(ImageGoldens, TargetSizesMatchTheProcessor) {
  const auto cases = Goldens("target");
  ASSERT_GE(cases.size(), 1000u);
  for (const auto& f : cases) {
    SCOPED_TRACE(absl::StrCat(f[1], "x", f[2], " (h x w) at ", f[3]));
    absl::StatusOr<std::pair<int64_t, int64_t>> size =
        ImageTargetSize(ToInt(f[1]), ToInt(f[2]), ToInt(f[3]));
    if (f[4] == "error") {
      EXPECT_FALSE(size.ok());
    } else {
      ASSERT_TRUE(size.ok()) << size.status();
      EXPECT_EQ(size->first, ToInt(f[4]));
      EXPECT_EQ(size->second, ToInt(f[5]));
    }
  }
}

// Against transformers itself: test/data/images/vision_processed_70.safetensors
// (tools/reference/make_vision_models.py) holds what Gemma4ImageProcessorPil made of vision_a.png
// and vision_b.jpg at 70 soft tokens: the decoded picture, the patch bytes (pixel_values =
// float32(byte) / 255, which is the same float as rescale's float64 product) and the positions.
TEST(ImageGoldens, MatchesTransformersPilBackend) {
  const std::string path = DataDir() + "/vision_processed_70.safetensors";
  const std::vector<uint8_t> file = ReadBytes(path);
  if (file.size() < 8) GTEST_SKIP() << "no " << path;
  uint64_t header_size = 0;
  std::memcpy(&header_size, file.data(), 8);
  ASSERT_LE(8 + header_size, file.size());
  const auto header = nlohmann::json::parse(file.begin() + 8, file.begin() + 8 + header_size);
  auto tensor = [&](const std::string& name) {
    EXPECT_TRUE(header.contains(name)) << name;
    if (!header.contains(name)) return std::vector<uint8_t>();
    const auto& offsets = header[name]["data_offsets"];
    const size_t begin = 8 + header_size + offsets[0].get<size_t>();
    return std::vector<uint8_t>(file.begin() + begin,
                                file.begin() + 8 + header_size + offsets[1].get<size_t>());
  };
  for (const auto& [key, name] :
       std::map<std::string, std::string>{{"a", "vision_a.png"}, {"b", "vision_b.jpg"}}) {
    SCOPED_TRACE(name);
    const RgbImage& image = Decoded(name);
    EXPECT_EQ(image.pixels, tensor("rgb_" + key));
    absl::StatusOr<ImagePatches> patches = PreprocessImage(image, 70);
    ASSERT_TRUE(patches.ok()) << patches.status();
    const std::vector<uint8_t> bytes = tensor("pil_pixel_bytes_" + key);
    ASSERT_EQ(bytes.size(), patches->pixels.size());
    for (size_t i = 0; i < bytes.size(); ++i) {
      ASSERT_EQ(patches->pixels[i], static_cast<float>(bytes[i]) / 255.0f) << "value " << i;
    }
    const std::vector<uint8_t> positions = tensor("pil_position_ids_" + key);  // int64 [n, 2]
    ASSERT_EQ(positions.size(), patches->positions.size() * 8);
    for (size_t i = 0; i < patches->positions.size(); ++i) {
      int64_t v;
      std::memcpy(&v, &positions[i * 8], 8);
      ASSERT_EQ(patches->positions[i], v) << "position " << i;
    }
    const std::vector<uint8_t> soft = tensor("pil_num_soft_tokens_" + key);
    ASSERT_EQ(soft.size(), 8u);
    int64_t soft_tokens;
    std::memcpy(&soft_tokens, soft.data(), 8);
    EXPECT_EQ(patches->soft_tokens, soft_tokens);
  }
}

TEST(ImageTargetSize, WorkedExampleAndExtremes) {
  // 1920x1080 at the default 280 tokens: 1056x576, 66 x 36 = 2376 patches, 264 soft tokens.
  auto size = ImageTargetSize(1080, 1920, 280);
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, std::make_pair(int64_t{576}, int64_t{1056}));
  // A 1-pixel-tall strip gets the 48-pixel side and the longest side the budget allows.
  EXPECT_EQ(*ImageTargetSize(1, 100000, 280), std::make_pair(int64_t{48}, int64_t{13440}));
  EXPECT_EQ(*ImageTargetSize(100000, 1, 70), std::make_pair(int64_t{3360}, int64_t{48}));
  // Tiny images are scaled up.
  EXPECT_EQ(*ImageTargetSize(1, 1, 70), std::make_pair(int64_t{384}, int64_t{384}));
  // The largest image Pillow opens, either way round.
  EXPECT_TRUE(ImageTargetSize(1, 178956970, 1120).ok());
  EXPECT_TRUE(ImageTargetSize(178956970, 1, 1120).ok());
}

TEST(ImageTargetSize, RefusesBadBudgetsAndSizes) {
  for (int64_t tokens : {0, -280, 100, 281, 2240}) {
    auto size = ImageTargetSize(100, 100, tokens);
    ASSERT_FALSE(size.ok());
    EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(size.status().message()),
                HasSubstr("max_soft_tokens must be one of 70, 140, 280, 560, 1120"));
  }
  for (auto [h, w] :
       {std::pair<int64_t, int64_t>{0, 10}, {10, 0}, {-1, 10}, {int64_t{1} << 31, 1}}) {
    auto size = ImageTargetSize(h, w, 280);
    ASSERT_FALSE(size.ok());
    EXPECT_THAT(std::string(size.status().message()), HasSubstr("cannot fit a"));
  }
  RgbImage image;
  image.width = image.height = 48;
  image.pixels.assign(48 * 48 * 3, 7);
  auto patches = PreprocessImage(image, 300);
  ASSERT_FALSE(patches.ok());
  EXPECT_THAT(std::string(patches.status().message()), HasSubstr("max_soft_tokens must be one of"));
  image.pixels.pop_back();
  patches = PreprocessImage(image, 280);
  ASSERT_FALSE(patches.ok());
  EXPECT_THAT(std::string(patches.status().message()), HasSubstr("expected width * height * 3"));
}

TEST(PreprocessImage, RescaleIsFloat64ThenFloat32) {
  // image_transforms.rescale multiplies in float64 and then casts: 3/255 is 0x3c40c0c1, where a
  // float32 multiply would give 0x3c40c0c2 (126 of the 256 byte values differ that way). These
  // bit patterns are numpy's.
  const std::map<int, uint32_t> expected = {{0, 0x00000000},   {1, 0x3b808081},  {3, 0x3c40c0c1},
                                            {6, 0x3cc0c0c1},   {7, 0x3ce0e0e1},  {12, 0x3d40c0c1},
                                            {128, 0x3f008081}, {255, 0x3f800000}};
  // 480x336 is a 70-token target already: no resize, so every patch value is a rescaled byte.
  RgbImage image;
  image.width = 480;
  image.height = 336;
  image.pixels.resize(480 * 336 * 3);
  for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<uint8_t>(i % 256);
  auto patches = PreprocessImage(image, 70);
  ASSERT_TRUE(patches.ok()) << patches.status();
  std::map<int, uint32_t> seen;
  // Patch 0, row 0 holds the first 48 bytes of the image in order.
  for (int i = 0; i < 48; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &patches->pixels[i], 4);
    seen[i] = bits;
  }
  for (int i : {128, 255}) {
    // Row 0, pixel i / 3 of the image is in patch (i / 3) / 16 at column (i / 3) % 16.
    const int pixel = i / 3, channel = i % 3;
    const float v = patches->pixels[(pixel / 16) * 768 + (pixel % 16) * 3 + channel];
    std::memcpy(&seen[i], &v, 4);
  }
  for (const auto& [value, bits] : expected) EXPECT_EQ(seen[value], bits) << "byte " << value;
}

TEST(PreprocessImage, PatchOrderAndPositions) {
  // Values that encode (x, y, channel), on an image that is already at its 70-token size.
  RgbImage image;
  image.width = 480;
  image.height = 336;
  image.pixels.resize(480 * 336 * 3);
  auto value = [](int64_t x, int64_t y, int64_t c) {
    return static_cast<uint8_t>((x * 7 + y * 13 + c * 101) % 256);
  };
  for (int64_t y = 0; y < 336; ++y) {
    for (int64_t x = 0; x < 480; ++x) {
      for (int64_t c = 0; c < 3; ++c) image.pixels[(y * 480 + x) * 3 + c] = value(x, y, c);
    }
  }
  auto patches = PreprocessImage(image, 70);
  ASSERT_TRUE(patches.ok()) << patches.status();
  EXPECT_EQ(patches->grid_width, 30);
  EXPECT_EQ(patches->grid_height, 21);
  EXPECT_EQ(patches->soft_tokens, 70);
  for (int64_t py = 0; py < 21; ++py) {
    for (int64_t px = 0; px < 30; ++px) {
      const int64_t p = py * 30 + px;
      ASSERT_EQ(patches->positions[2 * p], px);
      ASSERT_EQ(patches->positions[2 * p + 1], py);
      for (int64_t r = 0; r < 16; r += 5) {
        for (int64_t col = 0; col < 16; col += 3) {
          for (int64_t c = 0; c < 3; ++c) {
            const float got = patches->pixels[p * 768 + (r * 16 + col) * 3 + c];
            const float want =
                static_cast<float>(value(px * 16 + col, py * 16 + r, c) * (1.0 / 255.0));
            ASSERT_EQ(got, want) << "patch " << p << " row " << r << " col " << col << " channel "
                                 << c;
          }
        }
      }
    }
  }
}

TEST(ResizeBicubic, SameSizeIsACopyAndBadSizesGiveNothing) {
  const RgbImage& photo = Decoded("photo.jpg");
  const RgbImage same = ResizeBicubic(photo, photo.width, photo.height);
  EXPECT_EQ(same.pixels, photo.pixels);
  EXPECT_TRUE(ResizeBicubic(photo, 0, 10).pixels.empty());
  EXPECT_TRUE(ResizeBicubic(photo, 10, -1).pixels.empty());
  EXPECT_TRUE(ResizeBicubic(RgbImage{}, 10, 10).pixels.empty());
}

// ---------------------------------------------------------------------------------------------
// Bad input: one test per message.

absl::Status DecodeStatus(const std::vector<uint8_t>& bytes, const ImageLimits& limits = {}) {
  return DecodeImage(bytes, "test-input", limits).status();
}

void ExpectInvalid(const absl::Status& status, const std::string& substring) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("test-input: ")) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(substring)) << status;
}

std::vector<uint8_t> Bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::vector<uint8_t> PngChunk(const std::string& type, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out = {
      static_cast<uint8_t>(data.size() >> 24), static_cast<uint8_t>(data.size() >> 16),
      static_cast<uint8_t>(data.size() >> 8), static_cast<uint8_t>(data.size())};
  std::vector<uint8_t> body = Bytes(type);
  body.insert(body.end(), data.begin(), data.end());
  const uLong crc = ::crc32(0, body.data(), static_cast<uInt>(body.size()));
  out.insert(out.end(), body.begin(), body.end());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(crc >> shift));
  return out;
}

// A PNG header (signature + IHDR) for an 8-bit RGB image of the given size, and nothing else.
std::vector<uint8_t> PngHeader(uint32_t width, uint32_t height) {
  std::vector<uint8_t> out = Bytes(std::string("\x89PNG\r\n\x1a\n", 8));
  std::vector<uint8_t> ihdr;
  for (uint32_t v : {width, height}) {
    for (int shift = 24; shift >= 0; shift -= 8) ihdr.push_back(static_cast<uint8_t>(v >> shift));
  }
  for (uint8_t b : {8, 2, 0, 0, 0}) ihdr.push_back(b);
  const auto chunk = PngChunk("IHDR", ihdr);
  out.insert(out.end(), chunk.begin(), chunk.end());
  return out;
}

// orient1.jpg with its frame size replaced.
std::vector<uint8_t> JpegWithSize(uint16_t width, uint16_t height) {
  std::vector<uint8_t> jpeg = ReadBytes(DataDir() + "/orient1.jpg");
  for (size_t i = 2; i + 9 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xff &&
        jpeg[i + 1] == 0xc0) {  // SOF0: length(2) precision(1) height(2) width(2)
      jpeg[i + 5] = height >> 8;
      jpeg[i + 6] = height & 0xff;
      jpeg[i + 7] = width >> 8;
      jpeg[i + 8] = width & 0xff;
      return jpeg;
    }
  }
  ADD_FAILURE() << "no SOF0 in orient1.jpg";
  return jpeg;
}

TEST(DecodeImage, RefusesOtherFormatsByContent) {
  ExpectInvalid(DecodeStatus({}), "empty input (0 bytes); Spark reads PNG and JPEG images");
  ExpectInvalid(DecodeStatus(Bytes("GIF89a\x01\x00\x01\x00")),
                "not a PNG or JPEG image (it looks like GIF)");
  ExpectInvalid(DecodeStatus(Bytes(std::string("RIFF\x10\0\0\0WEBPVP8 ", 16))),
                "(it looks like WebP)");
  ExpectInvalid(DecodeStatus(Bytes("BM\x36\x00\x00\x00")), "(it looks like BMP)");
  ExpectInvalid(DecodeStatus(Bytes(std::string("II*\0\x08\0\0\0", 8))), "(it looks like TIFF)");
  ExpectInvalid(DecodeStatus(Bytes("<svg xmlns=\"http://www.w3.org/2000/svg\"/>")),
                "text (XML, SVG or HTML)");
  ExpectInvalid(DecodeStatus(Bytes("hello, world")),
                "not a PNG or JPEG image; Spark reads PNG and JPEG images");
}

TEST(DecodeImage, RefusesTruncatedPng) {
  const std::vector<uint8_t> png = ReadBytes(DataDir() + "/rgba.png");
  ExpectInvalid(DecodeStatus(std::vector<uint8_t>(png.begin(), png.begin() + png.size() / 2)),
                "PNG data ends early: image file is truncated");
  ExpectInvalid(DecodeStatus(std::vector<uint8_t>(png.begin(), png.begin() + 20)),
                "PNG data ends early: image file is truncated");
  // Only the IEND chunk missing: every row is there, and Pillow reads it.
  const std::vector<uint8_t> no_iend(png.begin(), png.end() - 12);
  absl::StatusOr<RgbImage> image = DecodeImage(no_iend, "test-input");
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->pixels, Decoded("rgba.png").pixels);
}

TEST(DecodeImage, RefusesTruncatedJpeg) {
  const std::vector<uint8_t> jpeg = ReadBytes(DataDir() + "/photo.jpg");
  ExpectInvalid(DecodeStatus(std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + jpeg.size() / 2)),
                "JPEG data ends early: image file is truncated");
  // Pillow refuses a JPEG without its EOI marker too ("image file is truncated").
  ExpectInvalid(DecodeStatus(std::vector<uint8_t>(jpeg.begin(), jpeg.end() - 2)),
                "image file is truncated");
  const std::vector<uint8_t> progressive = ReadBytes(DataDir() + "/photo_444_progressive.jpg");
  ExpectInvalid(DecodeStatus(std::vector<uint8_t>(progressive.begin(), progressive.end() - 2)),
                "image file is truncated");
  ExpectInvalid(DecodeStatus(std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + 3)),
                "image file is truncated");
}

TEST(DecodeImage, RefusesCorruptData) {
  // A PNG whose IHDR checksum is wrong (Pillow: "broken PNG file").
  std::vector<uint8_t> png = ReadBytes(DataDir() + "/rgba.png");
  png[29] ^= 0x55;
  ExpectInvalid(DecodeStatus(png), "corrupt PNG: bad CRC in the IHDR chunk");
  // A PNG whose compressed data is garbage.
  png = ReadBytes(DataDir() + "/rgba.png");
  std::vector<uint8_t> garbage = PngHeader(97, 61);
  const auto idat = PngChunk("IDAT", Bytes("this is not zlib data at all"));
  garbage.insert(garbage.end(), idat.begin(), idat.end());
  ExpectInvalid(DecodeStatus(garbage), "corrupt PNG: ");
  // A JPEG with its Huffman tables destroyed.
  std::vector<uint8_t> jpeg = ReadBytes(DataDir() + "/photo.jpg");
  for (size_t i = 2; i + 4 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xff && jpeg[i + 1] == 0xc4) {  // DHT
      for (size_t j = i + 4; j < i + 40; ++j) jpeg[j] = 0xff;
      break;
    }
  }
  ExpectInvalid(DecodeStatus(jpeg), "corrupt JPEG: ");
  // A PNG signature followed by text.
  ExpectInvalid(
      DecodeStatus(Bytes(std::string("\x89PNG\r\n\x1a\nnot a chunk stream, just text", 37))),
      "corrupt PNG: ");
}

TEST(DecodeImage, RefusesEmptyAndOversizedHeadersBeforeDecoding) {
  ExpectInvalid(DecodeStatus(PngHeader(0, 10)),
                "PNG header gives a 0x10 image; an image needs at least one pixel");
  ExpectInvalid(DecodeStatus(PngHeader(10, 0)), "PNG header gives a 10x0 image");
  ExpectInvalid(DecodeStatus(JpegWithSize(13, 0)), "corrupt JPEG: Empty JPEG image");
  // 20000 x 20000 = 4e8 pixels: refused from the header alone (there is no pixel data at all).
  ExpectInvalid(
      DecodeStatus(PngHeader(20000, 20000)),
      "the PNG image is 20000x20000 = 400000000 pixels, more than the limit of 178956970");
  ExpectInvalid(DecodeStatus(JpegWithSize(65000, 65000)),
                "the JPEG image is 65000x65000 = 4225000000 pixels, more than the limit");
  // A lower limit applies the same way.
  ImageLimits limits;
  limits.max_pixels = 90;
  ExpectInvalid(DecodeStatus(ReadBytes(DataDir() + "/orient1.jpg"), limits),
                "the JPEG image is 13x7 = 91 pixels, more than the limit of 90");
  limits.max_pixels = 91;
  EXPECT_TRUE(DecodeImage(ReadBytes(DataDir() + "/orient1.jpg"), "x", limits).ok());
}

TEST(DecodeImage, RefusesSixteenBitGrayscalePng) {
  ExpectInvalid(
      DecodeStatus(ReadBytes(DataDir() + "/gray16.png")),
      "16-bit grayscale PNG is not supported: Pillow, which Hugging Face's processor reads "
      "images with, clips its samples to 0..255");
}

TEST(ReadImageFile, ReportsFileErrors) {
  auto missing = ReadImageFile(DataDir() + "/no-such-image.png");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("no-such-image.png"));
  auto directory = ReadImageFile(DataDir());
  EXPECT_EQ(directory.status().code(), absl::StatusCode::kInvalidArgument) << directory.status();
  EXPECT_THAT(std::string(directory.status().message()),
              HasSubstr("is a directory, not a regular file"));
  ImageLimits limits;
  limits.max_file_bytes = 100;
  auto big = ReadImageFile(DataDir() + "/photo.jpg", limits);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument) << big.status();
  EXPECT_THAT(
      std::string(big.status().message()),
      HasSubstr(
          "bytes, more than the image file limit of 100 bytes (ImageLimits::max_file_bytes)"));
  auto text = ReadImageFile(DataDir() + "/goldens.txt");
  EXPECT_THAT(std::string(text.status().message()),
              HasSubstr("goldens.txt: not a PNG or JPEG image"));
}

// Truncations and bit flips of every test image: DecodeImage returns an image or
// kInvalidArgument, never crashes, leaks or reads out of bounds (the sanitizer build checks the
// last two). Deterministic; well under 2 s.
TEST(DecodeImage, SurvivesTruncationsAndBitFlips) {
  const auto start = std::chrono::steady_clock::now();
  ImageLimits limits;
  limits.max_pixels = 1 << 20;  // a flipped size field must not make the fuzz slow
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int decoded = 0, refused = 0;
  for (const auto& f : Goldens("decode")) {
    const std::vector<uint8_t> original = ReadBytes(DataDir() + "/" + f[1]);
    // Bigger files get fewer mutations, to keep the time flat.
    const int rounds = original.size() > 8000 ? 30 : 300;
    for (int round = 0; round < rounds; ++round) {
      std::vector<uint8_t> bytes = original;
      if (round % 3 == 0) {
        bytes.resize(next() % bytes.size());
      } else {
        const int flips = 1 + static_cast<int>(next() % 8);
        for (int i = 0; i < flips; ++i)
          bytes[next() % bytes.size()] ^= static_cast<uint8_t>(1u << (next() % 8));
      }
      absl::StatusOr<RgbImage> image = DecodeImage(bytes, "fuzz", limits);
      if (image.ok()) {
        ++decoded;
        ASSERT_EQ(image->pixels.size(), static_cast<size_t>(image->width * image->height * 3));
      } else {
        ++refused;
        ASSERT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument) << image.status();
        ASSERT_THAT(std::string(image.status().message()), HasSubstr("fuzz: "));
      }
    }
  }
  EXPECT_GT(decoded, 0);
  EXPECT_GT(refused, 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("fuzz: %d decoded, %d refused in %.2f s\n", decoded, refused, seconds);
}

}  // namespace
}  // namespace rt
}  // namespace spark
