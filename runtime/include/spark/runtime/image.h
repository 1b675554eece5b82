// Image files -> Gemma 4 vision input: exactly the pixel values of Hugging Face's Gemma 4 image
// processor (transformers 5: `load_image` then `Gemma4ImageProcessorPil`), computed without Python.
//
// The reference chain, and the piece of this API that reproduces each step:
//   PIL.Image.open + ImageOps.exif_transpose + .convert("RGB")   DecodeImage / ReadImageFile
//   get_aspect_ratio_preserving_size                             ImageTargetSize
//   PIL Image.resize(BICUBIC) when the size changes              ResizeBicubic
//   rescale (x / 255 as float32), patchify, (x, y) positions     PreprocessImage
// Checked against Pillow 9.4 with libjpeg-turbo 2.1.5 (Debian 12): decoded and resized pixels
// byte for byte, patches bit for bit (test/Unit/Image/image_test.cc and the goldens of
// tools/reference/make_image_goldens.py).
//
// Formats: PNG (every colour type and bit depth, palettes, tRNS, Adam7; 16-bit samples keep
// their high byte as Pillow does) and JPEG (baseline, progressive, grayscale, CMYK/YCCK).
// Alpha is dropped, not composited: load_image's convert("RGB") drops it. The EXIF orientation
// (JPEG APP1; PNG eXIf, "Raw profile type exif" text or XMP tiff:Orientation, as Pillow 9.4 reads
// them) is applied. Refused, each with kInvalidArgument naming the input: other formats (GIF,
// WebP, BMP, TIFF, ...), truncated or corrupt data (Pillow also raises "image file is
// truncated"), zero or over-limit dimensions (checked from the header, before any pixel memory
// is allocated), and 16-bit grayscale PNGs (Pillow clips their samples to 0..255 instead of
// scaling them, which turns most of them white; convert such files to 8 bits first).
//
// Thread safety: every function is reentrant; nothing is shared between calls.
#ifndef SPARK_RUNTIME_IMAGE_H_
#define SPARK_RUNTIME_IMAGE_H_

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace spark {
namespace rt {

// Gemma 4's image processor constants (processor_config.json of every Gemma 4 checkpoint):
// 16x16-pixel patches, pooled 3x3 into one soft token, so both sides of a resized image are
// multiples of 48.
inline constexpr int64_t kImagePatchSize = 16;
inline constexpr int64_t kImagePoolingKernel = 3;
// The soft-token budgets the processor accepts (`max_soft_tokens`; 280 is its default).
inline constexpr std::array<int64_t, 5> kSupportedImageSoftTokens = {70, 140, 280, 560, 1120};

struct ImageLimits {
  // Pillow refuses an image of more than 2 * Image.MAX_IMAGE_PIXELS pixels (DecompressionBombError;
  // MAX_IMAGE_PIXELS = 89478485, a 1 GiB RGBA image / 3), so anything larger could never have
  // reached the reference processor. 178956970 RGB pixels are 512 MiB decoded.
  int64_t max_pixels = int64_t{89478485} * 2;
  // The whole file is read into memory before decoding. 256 MiB is far above any photograph (a
  // 100-megapixel camera JPEG is ~50 MB) yet keeps a wrong path (a video, a disk image) from being
  // read whole.
  int64_t max_file_bytes = int64_t{256} << 20;
};

// An 8-bit RGB image, rows top to bottom, pixels left to right, R G B per pixel.
struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> pixels;  // width * height * 3
};

// Decodes a PNG or JPEG held in memory (the format comes from its first bytes, never from a file
// name) into what load_image gives transformers. `origin` names the input in error messages (a
// path, "request image 2", ...).
absl::StatusOr<RgbImage> DecodeImage(absl::Span<const uint8_t> bytes, absl::string_view origin,
                                     const ImageLimits& limits = {});

// Reads `path` (a regular file of at most limits.max_file_bytes) and decodes it. kNotFound /
// kPermissionDenied for a file that cannot be opened; decoding errors as DecodeImage.
absl::StatusOr<RgbImage> ReadImageFile(const std::string& path, const ImageLimits& limits = {});

// get_aspect_ratio_preserving_size(height, width, patch_size=16,
// max_patches=max_soft_tokens*9, pooling_kernel_size=3): the largest (height, width), both
// multiples of 48, that keep the aspect ratio and give at most max_soft_tokens * 9 patches
// (1920x1080 at 280 tokens -> (576, 1056), 264 soft tokens). Very thin images get a 48-pixel
// side. kInvalidArgument for a non-positive size or a budget not in kSupportedImageSoftTokens.
// Returns (height, width), the processor's order.
absl::StatusOr<std::pair<int64_t, int64_t>> ImageTargetSize(int64_t height, int64_t width,
                                                            int64_t max_soft_tokens);

// Pillow's Image.resize((width, height), Image.BICUBIC) of an RGB image, byte for byte (its
// two-pass fixed-point convolution, libImaging/Resample.c), in memory proportional to the input
// and output (Pillow's temporary image and coefficient tables can run out of memory on extreme
// aspect ratios). Preconditions: `image` is consistent (width * height * 3 bytes, sides below
// 2^31), `width` and `height` are 1 to 2^31 - 1, and neither side shrinks more than 2^20 times;
// otherwise the result is an empty image. PreprocessImage always meets them.
RgbImage ResizeBicubic(const RgbImage& image, int64_t width, int64_t height);

// What the vision tower takes for one image (the processor's pixel_values and
// image_position_ids without the padding rows: Spark runs only the real patches).
struct ImagePatches {
  int64_t grid_width = 0;   // patches per row
  int64_t grid_height = 0;  // patch rows
  int64_t soft_tokens = 0;  // grid_width * grid_height / 9
  // [grid_height * grid_width, 16 * 16 * 3] float32 in [0, 1]: patch p = py * grid_width + px
  // holds its 16 rows top to bottom, each row's 16 pixels left to right, R G B per pixel.
  std::vector<float> pixels;
  // [grid_height * grid_width, 2]: (x = px, y = py) of each patch.
  std::vector<int32_t> positions;
};

// The processor on a decoded image: resize to ImageTargetSize (skipped when the image already has
// that size), rescale each byte v to float32(v * (1/255) in float64), cut into patches.
absl::StatusOr<ImagePatches> PreprocessImage(const RgbImage& image, int64_t max_soft_tokens);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_IMAGE_H_
