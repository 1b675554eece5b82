// Images in a prompt, as Gemma 4's processor (Gemma4Processor) puts them there: each image's
// placeholder id (the model's image_token_id) in a token prompt becomes
//   boi_token_id, soft_tokens x image_token_id, eoi_token_id
// and the image's soft tokens (its vision tower's output, Model::EncodeImage) replace the rows of
// the image_token_id positions (SoftTokens, merged by the model's scatter). spark-run --image and
// spark-serve's image_url parts both go through here.
#ifndef SPARK_RUNTIME_IMAGE_PROMPT_H_
#define SPARK_RUNTIME_IMAGE_PROMPT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "spark/runtime/engine.h"
#include "spark/runtime/generator.h"
#include "spark/runtime/image.h"
#include "spark/runtime/plan.h"

namespace spark {
namespace rt {

// A token prompt with its images expanded and encoded.
struct ImagePrompt {
  std::vector<int32_t> ids;
  SoftTokens soft;
  std::vector<int64_t> soft_tokens_per_image;
};

// Where each image goes: `prompt` with every model.image_token_id replaced by boi + soft_tokens[i]
// x image_token_id + eoi (the i-th placeholder by soft_tokens[i]), and for each image the position
// of its first soft token. INVALID_ARGUMENT when the model has no image ids, or the prompt holds
// a different number of placeholders than soft_tokens has entries (naming both counts).
struct ExpandedImagePrompt {
  std::vector<int32_t> ids;
  std::vector<int64_t> first_soft_position;
};
absl::StatusOr<ExpandedImagePrompt> ExpandImagePlaceholders(const ModelInfo& model,
                                                            absl::Span<const int32_t> prompt,
                                                            absl::Span<const int64_t> soft_tokens);

// Checks that `model` takes images of a budget of `image_tokens` soft tokens (one of
// kSupportedImageSoftTokens, at most the compiled model's max_image_patches() / 9): the errors
// say what to pass or how to recompile.
absl::Status CheckImageBudget(const Model& model, int64_t image_tokens);

// Reads one image's processor output from a safetensors file: `pixel_values` F32 [T, 768] (or
// [1, T, 768]) and `image_position_ids` I64 or I32 [T, 2] (or [1, T, 2]), as transformers'
// Gemma 4 image processor returns them (either backend); padding rows (position -1) are dropped.
// The grid is taken from the positions, which must be those of a whole grid of 3x3-patch cells
// in raster order. INVALID_ARGUMENT naming the file otherwise.
absl::StatusOr<ImagePatches> ReadImagePatchesFile(const std::string& path);

// True when `path` starts like a safetensors file (an 8-byte header length, then '{'), which
// spark-run --image reads with ReadImagePatchesFile instead of decoding it as a picture.
bool IsSafetensorsFile(const std::string& path);

// The soft tokens of `images`, image i's replacing the positions from first_soft_position[i] on
// (ExpandImagePlaceholders' positions): each encoded by the model's vision tower
// (Model::EncodeImage). FAILED_PRECONDITION for a model without one.
absl::StatusOr<SoftTokens> EncodeImagesAt(const Model& model, absl::Span<const ImagePatches> images,
                                          absl::Span<const int64_t> first_soft_position);

// Encodes each image with the model's vision tower (Model::EncodeImage) and expands the prompt's
// placeholders (ExpandImagePlaceholders). The placeholders are checked before anything is
// encoded. `images` may be empty: the prompt then must hold no placeholder.
absl::StatusOr<ImagePrompt> PrepareImagePrompt(const Model& model,
                                               absl::Span<const int32_t> prompt,
                                               absl::Span<const ImagePatches> images);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_IMAGE_PROMPT_H_
