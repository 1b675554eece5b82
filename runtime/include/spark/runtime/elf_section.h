// A bounds-checked reader of ELF64 little-endian section headers (cubins are such files). The
// identification (magic, ELFCLASS64, little-endian, EI_VERSION and e_version EV_CURRENT) is
// checked, and every offset, size, index and name in the headers against the image before use,
// so a truncated or corrupt file gives kInvalidArgument naming the file, never a crash. Extended
// section numbering (e_shnum 0, e_shstrndx SHN_XINDEX: the values in section 0) is read.
#ifndef SPARK_RUNTIME_ELF_SECTION_H_
#define SPARK_RUNTIME_ELF_SECTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spark {
namespace rt {

inline constexpr uint32_t kElfSectionNoBits = 8;  // SHT_NOBITS: occupies no bytes in the file

struct ElfSection {
  std::string name;
  uint32_t type = 0;    // sh_type
  uint64_t flags = 0;   // sh_flags
  uint64_t offset = 0;  // sh_offset: within the image (checked unless SHT_NULL or SHT_NOBITS)
  uint64_t size = 0;    // sh_size
};

class ElfFile {
 public:
  // Reads the section headers of `image`, which must outlive the ElfFile. `origin` names the
  // file in errors.
  static absl::StatusOr<ElfFile> Parse(absl::string_view image, absl::string_view origin);

  uint16_t machine() const { return machine_; }  // e_machine (190 = EM_CUDA)
  const std::vector<ElfSection>& sections() const { return sections_; }

  // The first section called `name`, or nullptr.
  const ElfSection* FindSection(absl::string_view name) const;
  // The indices of every section called `name`, in order (to refuse a duplicate).
  std::vector<size_t> SectionIndices(absl::string_view name) const;
  // The bytes of `section` (empty for SHT_NULL and SHT_NOBITS).
  absl::string_view SectionData(const ElfSection& section) const;

 private:
  absl::string_view image_;
  uint16_t machine_ = 0;
  std::vector<ElfSection> sections_;
};

// True when `image` starts with the ELF magic "\x7f" "ELF".
bool HasElfMagic(absl::string_view image);

}  // namespace rt
}  // namespace spark

#endif  // SPARK_RUNTIME_ELF_SECTION_H_
