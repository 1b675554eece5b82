// Fuzzes image decoding and preprocessing (runtime/src/image: libpng, libjpeg-turbo, the EXIF
// reader, Pillow's bicubic resize, the patching), what spark-run --image and spark-serve's
// image_url parts do with bytes a user sends. The limits are lowered so that a large (but valid)
// header costs no memory.
//
// Invariants: a rejection carries a message; a decoded image has positive sides within the pixel
// limit and exactly width x height x 3 bytes; its preprocessing at the smallest budget gives a
// whole grid of 3x3-patch cells whose pixels lie in [0, 1] and whose positions are in raster order.
#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fuzz_check.h"
#include "spark/runtime/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  spark::rt::ImageLimits limits;
  limits.max_pixels = 1 << 20;
  absl::StatusOr<spark::rt::RgbImage> image =
      spark::rt::DecodeImage(absl::MakeConstSpan(data, size), "fuzz.image", limits);
  if (!image.ok()) {
    SPARK_FUZZ_CHECK(!image.status().message().empty());
    return 0;
  }
  SPARK_FUZZ_CHECK(image->width > 0 && image->height > 0);
  SPARK_FUZZ_CHECK(image->width * image->height <= limits.max_pixels);
  SPARK_FUZZ_CHECK(static_cast<int64_t>(image->pixels.size()) == image->width * image->height * 3);
  absl::StatusOr<spark::rt::ImagePatches> patches = spark::rt::PreprocessImage(*image, 70);
  if (!patches.ok()) {
    SPARK_FUZZ_CHECK(!patches.status().message().empty());
    return 0;
  }
  const int64_t count = patches->grid_width * patches->grid_height;
  SPARK_FUZZ_CHECK(patches->grid_width % 3 == 0 && patches->grid_height % 3 == 0);
  SPARK_FUZZ_CHECK(patches->soft_tokens * 9 == count && patches->soft_tokens <= 70);
  SPARK_FUZZ_CHECK(static_cast<int64_t>(patches->pixels.size()) == count * 768);
  SPARK_FUZZ_CHECK(static_cast<int64_t>(patches->positions.size()) == count * 2);
  for (float v : patches->pixels) SPARK_FUZZ_CHECK(v >= 0.0f && v <= 1.0f);
  for (int64_t p = 0; p < count; ++p) {
    SPARK_FUZZ_CHECK(patches->positions[2 * p] == p % patches->grid_width);
    SPARK_FUZZ_CHECK(patches->positions[2 * p + 1] == p / patches->grid_width);
  }
  return 0;
}
