// spark-image: what Gemma 4's vision tower gets from an image file, computed as Hugging Face's
// processor computes it (spark/runtime/image.h). A thin main: every failure is an absl::Status,
// printed with ToString() on stderr, exit code 1. Flags are parsed with CLI11.
//
//   spark-image photo.jpg [--image-tokens 280] [--dump-pixels pixels.bin]
// prints one JSON object: the decoded size (after the EXIF orientation), the resized size, the
// patch grid and the soft-token count; --dump-pixels writes the patches as raw little-endian
// float32 [patches, 768] (the processor's pixel_values without its padding rows).
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "file_util.h"
#include "nlohmann/json.hpp"
#include "spark/runtime/image.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace {

struct Options {
  std::string file;
  int64_t image_tokens = 280;
  std::string dump_pixels;
};

absl::Status Run(const Options& options) {
  SPARK_ASSIGN_OR_RETURN(const rt::RgbImage image, rt::ReadImageFile(options.file));
  SPARK_ASSIGN_OR_RETURN(const rt::ImagePatches patches,
                         rt::PreprocessImage(image, options.image_tokens));
  if (!options.dump_pixels.empty()) {
    // x86-64 and AArch64 are little-endian: the vector's bytes are the file's.
    SPARK_RETURN_IF_ERROR(rt::WriteStringToFile(
        options.dump_pixels, absl::string_view(reinterpret_cast<const char*>(patches.pixels.data()),
                                               patches.pixels.size() * sizeof(float))));
  }
  nlohmann::ordered_json out;
  out["width"] = image.width;
  out["height"] = image.height;
  out["resized_width"] = patches.grid_width * rt::kImagePatchSize;
  out["resized_height"] = patches.grid_height * rt::kImagePatchSize;
  out["grid_width"] = patches.grid_width;
  out["grid_height"] = patches.grid_height;
  out["patches"] = patches.grid_width * patches.grid_height;
  out["soft_tokens"] = patches.soft_tokens;
  std::printf("%s\n", out.dump().c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace spark

int main(int argc, char** argv) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "--dump-pixels writes native floats");
  spark::Options options;
  CLI::App app{
      "spark-image: the pixel values Gemma 4's vision tower gets from a PNG or JPEG file, exactly "
      "as Hugging Face's Gemma 4 image processor computes them (EXIF orientation, aspect-ratio "
      "preserving resize to multiples of 48 pixels with Pillow's bicubic filter, x / 255, 16x16 "
      "patches). Prints the sizes as JSON.",
      "spark-image"};
  app.add_option("file", options.file, "a PNG or JPEG file")->required();
  app.add_option("--image-tokens", options.image_tokens,
                 "the soft-token budget (the processor's max_soft_tokens): 70, 140, 280, 560 or "
                 "1120")
      ->capture_default_str();
  app.add_option("--dump-pixels", options.dump_pixels,
                 "write the patches to this file: raw little-endian float32 [patches, 768], each "
                 "patch's 16 rows of 16 pixels of R G B");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help prints the usage and exits 0; a usage error prints why and exits 1.
    return app.exit(error) == 0 ? 0 : 1;
  }
  const absl::Status status = spark::Run(options);
  std::fflush(stdout);
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
