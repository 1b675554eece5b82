#include "spark/runtime/image_prompt.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spark/runtime/safetensors.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {

absl::StatusOr<ExpandedImagePrompt> ExpandImagePlaceholders(const ModelInfo& model,
                                                            absl::Span<const int32_t> prompt,
                                                            absl::Span<const int64_t> soft_tokens) {
  if (model.image_token_id < 0 || model.boi_token_id < 0 || model.eoi_token_id < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model (", model.variant, ") takes no images: its config names no image_token_id, "
        "boi_token_id and eoi_token_id"));
  }
  const int64_t placeholders =
      std::count(prompt.begin(), prompt.end(), static_cast<int32_t>(model.image_token_id));
  if (placeholders != static_cast<int64_t>(soft_tokens.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the prompt holds ", placeholders, " image placeholder", placeholders == 1 ? "" : "s",
        " (image_token_id ", model.image_token_id, ") but ", soft_tokens.size(), " image",
        soft_tokens.size() == 1 ? " was" : "s were",
        " given: put one placeholder where each image goes, in order"));
  }
  ExpandedImagePrompt out;
  size_t image = 0;
  for (const int32_t id : prompt) {
    if (id != model.image_token_id) {
      out.ids.push_back(id);
      continue;
    }
    out.ids.push_back(static_cast<int32_t>(model.boi_token_id));
    out.first_soft_position.push_back(static_cast<int64_t>(out.ids.size()));
    out.ids.insert(out.ids.end(), static_cast<size_t>(soft_tokens[image++]),
                   static_cast<int32_t>(model.image_token_id));
    out.ids.push_back(static_cast<int32_t>(model.eoi_token_id));
  }
  return out;
}

absl::Status CheckImageBudget(const Model& model, int64_t image_tokens) {
  SPARK_RETURN_IF_ERROR(model.CheckTakesImages());
  if (std::find(kSupportedImageSoftTokens.begin(), kSupportedImageSoftTokens.end(),
                image_tokens) == kSupportedImageSoftTokens.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("an image budget of ", image_tokens, " soft tokens: Gemma 4's processor takes ",
                     absl::StrJoin(kSupportedImageSoftTokens, ", ")));
  }
  const int64_t most = model.max_image_patches() / (kImagePoolingKernel * kImagePoolingKernel);
  if (image_tokens > most) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an image budget of ", image_tokens, " soft tokens, but ", model.artifact().path,
        " was compiled for at most ", most,
        " (compile it again with spark-compile --max-image-tokens ", image_tokens, ")"));
  }
  return absl::OkStatus();
}

namespace {

// Tensor `name` of a patches file, or an error listing what the file holds.
absl::StatusOr<const OwnedTensor*> PatchesTensor(const std::string& path,
                                                 const std::vector<OwnedTensor>& tensors,
                                                 absl::string_view name) {
  std::vector<std::string> names;
  for (const OwnedTensor& tensor : tensors) {
    if (tensor.name == name) return &tensor;
    names.push_back(tensor.name);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "image patches file ", path, " has no tensor '", name,
      "' (it needs 'pixel_values' F32 [T, 768] and 'image_position_ids' I64 [T, 2]; found: ",
      names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
}

// The shape without a leading batch dimension of 1.
std::vector<int64_t> Unbatched(std::vector<int64_t> shape) {
  if (shape.size() == 3 && shape[0] == 1) shape.erase(shape.begin());
  return shape;
}

}  // namespace

bool IsSafetensorsFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return false;
  unsigned char head[9] = {};
  const size_t read = std::fread(head, 1, sizeof(head), file);
  std::fclose(file);
  return read == sizeof(head) && head[8] == '{' && head[6] == 0 && head[7] == 0;
}

absl::StatusOr<ImagePatches> ReadImagePatchesFile(const std::string& path) {
  SPARK_ASSIGN_OR_RETURN(const std::vector<OwnedTensor> tensors, ReadSafetensorsFile(path));
  SPARK_ASSIGN_OR_RETURN(const OwnedTensor* pixels, PatchesTensor(path, tensors, "pixel_values"));
  SPARK_ASSIGN_OR_RETURN(const OwnedTensor* positions,
                         PatchesTensor(path, tensors, "image_position_ids"));
  const std::vector<int64_t> pixel_shape = Unbatched(pixels->shape);
  const std::vector<int64_t> position_shape = Unbatched(positions->shape);
  const bool i64 = positions->dtype == "I64";
  if (pixels->dtype != "F32" || pixel_shape.size() != 2 ||
      pixel_shape[1] != kPixelPatchValues) {
    return absl::InvalidArgumentError(absl::StrCat(
        "image patches file ", path, ": 'pixel_values' must be F32 [T, ", kPixelPatchValues,
        "], got ", pixels->dtype, " [", absl::StrJoin(pixels->shape, ", "), "]"));
  }
  if ((!i64 && positions->dtype != "I32") || position_shape.size() != 2 ||
      position_shape[1] != 2 || position_shape[0] != pixel_shape[0]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "image patches file ", path, ": 'image_position_ids' must be I64 or I32 [",
        pixel_shape[0], ", 2], got ", positions->dtype, " [",
        absl::StrJoin(positions->shape, ", "), "]"));
  }
  ImagePatches out;
  const int64_t rows = pixel_shape[0];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t xy[2];
    for (int c = 0; c < 2; ++c) {
      if (i64) {
        std::memcpy(&xy[c], positions->bytes.data() + (2 * r + c) * 8, 8);
      } else {
        int32_t v;
        std::memcpy(&v, positions->bytes.data() + (2 * r + c) * 4, 4);
        xy[c] = v;
      }
    }
    if (xy[0] < 0 && xy[1] < 0) continue;  // a padding row
    if (xy[0] < 0 || xy[1] < 0 || xy[0] >= (int64_t{1} << 20) || xy[1] >= (int64_t{1} << 20)) {
      return absl::InvalidArgumentError(absl::StrCat("image patches file ", path, ": row ", r,
                                                     " has position (", xy[0], ", ", xy[1],
                                                     ")"));
    }
    out.positions.push_back(static_cast<int32_t>(xy[0]));
    out.positions.push_back(static_cast<int32_t>(xy[1]));
    const float* row = reinterpret_cast<const float*>(pixels->bytes.data()) + r * kPixelPatchValues;
    out.pixels.insert(out.pixels.end(), row, row + kPixelPatchValues);
    out.grid_width = std::max(out.grid_width, xy[0] + 1);
    out.grid_height = std::max(out.grid_height, xy[1] + 1);
  }
  const int64_t patches = static_cast<int64_t>(out.positions.size() / 2);
  const int64_t cell = kImagePoolingKernel;
  bool raster = out.grid_width % cell == 0 && out.grid_height % cell == 0 &&
                patches == out.grid_width * out.grid_height;
  for (int64_t p = 0; raster && p < patches; ++p) {
    raster = out.positions[2 * p] == p % out.grid_width &&
             out.positions[2 * p + 1] == p / out.grid_width;
  }
  if (patches == 0 || !raster) {
    return absl::InvalidArgumentError(absl::StrCat(
        "image patches file ", path, ": the ", patches, " patches are not a whole grid of ", cell,
        "x", cell, " cells in raster order (x fastest), as the processor writes them"));
  }
  out.soft_tokens = patches / (cell * cell);
  return out;
}

absl::StatusOr<SoftTokens> EncodeImagesAt(const Model& model, absl::Span<const ImagePatches> images,
                                          absl::Span<const int64_t> first_soft_position) {
  if (!images.empty()) SPARK_RETURN_IF_ERROR(model.CheckTakesImages());
  if (first_soft_position.size() != images.size()) {
    return absl::InvalidArgumentError(absl::StrCat(images.size(), " images but ",
                                                   first_soft_position.size(), " positions"));
  }
  SoftTokens soft;
  soft.hidden = model.info().hidden_size;
  for (size_t i = 0; i < images.size(); ++i) {
    absl::StatusOr<std::vector<float>> embeddings =
        model.EncodeImage(images[i].pixels, images[i].positions);
    if (!embeddings.ok()) {
      return absl::Status(embeddings.status().code(),
                          absl::StrCat("image ", i + 1, ": ", embeddings.status().message()));
    }
    soft.embeddings.insert(soft.embeddings.end(), embeddings->begin(), embeddings->end());
    for (int64_t k = 0; k < images[i].soft_tokens; ++k) {
      soft.positions.push_back(first_soft_position[i] + k);
    }
  }
  return soft;
}

absl::StatusOr<ImagePrompt> PrepareImagePrompt(const Model& model,
                                               absl::Span<const int32_t> prompt,
                                               absl::Span<const ImagePatches> images) {
  if (!images.empty()) SPARK_RETURN_IF_ERROR(model.CheckTakesImages());
  ImagePrompt out;
  for (const ImagePatches& image : images) out.soft_tokens_per_image.push_back(image.soft_tokens);
  // The placeholders are checked before any image is encoded.
  SPARK_ASSIGN_OR_RETURN(ExpandedImagePrompt expanded,
                         ExpandImagePlaceholders(model.info(), prompt, out.soft_tokens_per_image));
  out.ids = std::move(expanded.ids);
  SPARK_ASSIGN_OR_RETURN(out.soft, EncodeImagesAt(model, images, expanded.first_soft_position));
  return out;
}

}  // namespace rt
}  // namespace spark
