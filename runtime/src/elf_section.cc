#include "spark/runtime/elf_section.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checked_math.h"
#include "little_endian.h"
#include "spark/runtime/printable_text.h"
#include "status_macros.h"

namespace spark {
namespace rt {
namespace {

// ELF64 layout (the System V gABI), byte offsets.
constexpr size_t kIdentSize = 16;
constexpr size_t kHeaderSize = 64;         // Elf64_Ehdr
constexpr size_t kSectionHeaderSize = 64;  // Elf64_Shdr
constexpr uint8_t kElfClass64 = 2;
constexpr uint8_t kElfDataLittleEndian = 1;
constexpr uint32_t kElfVersionCurrent = 1;          // EV_CURRENT, the only ELF version
constexpr uint16_t kSectionIndexExtended = 0xffff;  // SHN_XINDEX
constexpr uint32_t kSectionNull = 0;                // SHT_NULL

// SHT_NULL and SHT_NOBITS sections have no bytes in the file (section 0's sh_size may even hold
// the section count).
bool HasFileBytes(uint32_t type) { return type != kSectionNull && type != kElfSectionNoBits; }

struct RawHeader {
  uint16_t machine;
  uint64_t section_table_offset;
  uint16_t section_entry_size;
  uint64_t section_count;
  uint64_t name_table_index;
};

std::string LeadingBytes(absl::string_view image) {
  std::string out;
  for (const char c : image.substr(0, 4)) {
    absl::StrAppendFormat(&out, "%s%02x", out.empty() ? "" : " ", static_cast<unsigned char>(c));
  }
  return out.empty() ? "none: the file is empty" : out;
}

// "<origin>: <message>", printable (PrintableText: the file name may come from a directory).
absl::Status Invalid(absl::string_view origin, absl::string_view message) {
  return absl::InvalidArgumentError(PrintableText(absl::StrCat(origin, ": ", message)));
}

absl::Status CheckIdent(absl::string_view image, absl::string_view origin) {
  if (!HasElfMagic(image)) {
    return absl::InvalidArgumentError(PrintableText(
        absl::StrCat(origin, " is not an ELF file (expected the bytes 7f 45 4c 46, found ",
                     LeadingBytes(image), "); expected a cubin written by spark-compile")));
  }
  if (image.size() < kIdentSize) {
    return Invalid(origin, absl::StrCat("truncated ELF file: ", image.size(),
                                        " bytes, the ELF header needs ", kHeaderSize));
  }
  if (static_cast<uint8_t>(image[4]) != kElfClass64) {
    return Invalid(origin, "not a 64-bit ELF file; cubins are ELF64");
  }
  if (static_cast<uint8_t>(image[5]) != kElfDataLittleEndian) {
    return Invalid(origin, "not a little-endian ELF file; cubins are little-endian");
  }
  if (static_cast<uint8_t>(image[6]) != kElfVersionCurrent) {
    return Invalid(origin,
                   absl::StrCat("ELF identification version (e_ident[EI_VERSION]) is ",
                                static_cast<int>(static_cast<uint8_t>(image[6])), ", expected ",
                                kElfVersionCurrent, " (EV_CURRENT); the file is damaged"));
  }
  if (image.size() < kHeaderSize) {
    return Invalid(origin, absl::StrCat("truncated ELF file: ", image.size(),
                                        " bytes, the ELF header needs ", kHeaderSize));
  }
  const uint32_t version = LoadLittleEndian<uint32_t>(image.data() + 20);
  if (version != kElfVersionCurrent) {
    return Invalid(origin, absl::StrCat("ELF version (e_version) is ", version, ", expected ",
                                        kElfVersionCurrent, " (EV_CURRENT); the file is damaged"));
  }
  return absl::OkStatus();
}

// Reads field `offset` of section header `index` (whose table entry is known to be in bounds).
template <typename T>
T SectionField(absl::string_view image, uint64_t table_offset, uint64_t index, size_t offset) {
  return LoadLittleEndian<T>(image.data() + table_offset + index * kSectionHeaderSize + offset);
}

absl::StatusOr<RawHeader> ReadHeader(absl::string_view image, absl::string_view origin) {
  SPARK_RETURN_IF_ERROR(CheckIdent(image, origin));
  RawHeader header;
  header.machine = LoadLittleEndian<uint16_t>(image.data() + 18);
  header.section_table_offset = LoadLittleEndian<uint64_t>(image.data() + 40);
  header.section_entry_size = LoadLittleEndian<uint16_t>(image.data() + 58);
  header.section_count = LoadLittleEndian<uint16_t>(image.data() + 60);
  header.name_table_index = LoadLittleEndian<uint16_t>(image.data() + 62);
  if (header.section_table_offset == 0) {
    header.section_count = 0;
    return header;
  }
  if (header.section_entry_size != kSectionHeaderSize) {
    return Invalid(origin, absl::StrCat("ELF section header size is ", header.section_entry_size,
                                        ", expected ", kSectionHeaderSize));
  }
  // Extended numbering: section 0 holds the real count (sh_size) and name table index (sh_link).
  const bool extended_count = header.section_count == 0;
  const bool extended_index = header.name_table_index == kSectionIndexExtended;
  if (extended_count || extended_index) {
    const absl::optional<uint64_t> end =
        CheckedAdd(header.section_table_offset, kSectionHeaderSize);
    if (!end || *end > image.size()) {
      return Invalid(origin, absl::StrCat("truncated ELF file: the section header table at offset ",
                                          header.section_table_offset, " is past the end (",
                                          image.size(), " bytes)"));
    }
    const uint64_t table = header.section_table_offset;
    if (extended_count) header.section_count = SectionField<uint64_t>(image, table, 0, 32);
    if (extended_index) header.name_table_index = SectionField<uint32_t>(image, table, 0, 40);
  }
  if (extended_index && header.name_table_index == 0) {
    return Invalid(origin,
                   "ELF e_shstrndx is SHN_XINDEX (0xffff): the section name table index is in "
                   "section 0's sh_link, which is 0 (no section), so no section has a name; the "
                   "file is damaged");
  }
  return header;
}

absl::Status CheckSectionTable(const RawHeader& header, absl::string_view image,
                               absl::string_view origin) {
  const absl::optional<uint64_t> bytes = CheckedMul(header.section_count, kSectionHeaderSize);
  const absl::optional<uint64_t> end =
      bytes ? CheckedAdd(header.section_table_offset, *bytes) : absl::nullopt;
  if (!end || *end > image.size()) {
    return Invalid(origin, absl::StrCat("truncated ELF file: the section header table (",
                                        header.section_count, " entries at offset ",
                                        header.section_table_offset,
                                        ") extends past the end of the file (", image.size(),
                                        " bytes)"));
  }
  if (header.section_count > 0 && header.name_table_index >= header.section_count) {
    return Invalid(origin, absl::StrCat("ELF section name table index ",
                                        header.name_table_index, " is out of range (",
                                        header.section_count, " sections)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ElfSection> ReadSection(const RawHeader& header, uint64_t index,
                                       absl::string_view image, absl::string_view origin) {
  const uint64_t table = header.section_table_offset;
  ElfSection section;
  section.type = SectionField<uint32_t>(image, table, index, 4);
  section.flags = SectionField<uint64_t>(image, table, index, 8);
  section.offset = SectionField<uint64_t>(image, table, index, 24);
  section.size = SectionField<uint64_t>(image, table, index, 32);
  if (!HasFileBytes(section.type)) return section;
  const absl::optional<uint64_t> end = CheckedAdd(section.offset, section.size);
  if (!end || *end > image.size()) {
    return Invalid(origin, absl::StrCat("truncated ELF file: section ", index, " (offset ",
                                        section.offset, ", size ", section.size,
                                        ") extends past the end of the file (", image.size(),
                                        " bytes)"));
  }
  return section;
}

// The NUL-terminated name at `name_offset` of the section name table.
absl::StatusOr<std::string> ReadName(absl::string_view names, uint32_t name_offset,
                                     uint64_t index, absl::string_view origin) {
  if (name_offset >= names.size()) {
    return Invalid(origin, absl::StrCat("ELF section ", index, " has name offset ", name_offset,
                                        ", outside the section name table (", names.size(),
                                        " bytes)"));
  }
  const size_t end = names.find('\0', name_offset);
  if (end == absl::string_view::npos) {
    return Invalid(origin, absl::StrCat("ELF section ", index,
                                        "'s name is not NUL-terminated in the section name table"));
  }
  return std::string(names.substr(name_offset, end - name_offset));
}

}  // namespace

bool HasElfMagic(absl::string_view image) {
  return image.size() >= 4 && std::memcmp(image.data(), "\x7f" "ELF", 4) == 0;
}

absl::StatusOr<ElfFile> ElfFile::Parse(absl::string_view image, absl::string_view origin) {
  SPARK_ASSIGN_OR_RETURN(const RawHeader header, ReadHeader(image, origin));
  SPARK_RETURN_IF_ERROR(CheckSectionTable(header, image, origin));
  ElfFile file;
  file.image_ = image;
  file.machine_ = header.machine;
  for (uint64_t i = 0; i < header.section_count; ++i) {
    SPARK_ASSIGN_OR_RETURN(ElfSection section, ReadSection(header, i, image, origin));
    file.sections_.push_back(std::move(section));
  }
  if (file.sections_.empty() || header.name_table_index == 0) return file;  // SHN_UNDEF: no names
  const absl::string_view names = file.SectionData(file.sections_[header.name_table_index]);
  for (uint64_t i = 0; i < header.section_count; ++i) {
    const uint32_t name_offset = SectionField<uint32_t>(image, header.section_table_offset, i, 0);
    SPARK_ASSIGN_OR_RETURN(file.sections_[i].name, ReadName(names, name_offset, i, origin));
  }
  return file;
}

std::vector<size_t> ElfFile::SectionIndices(absl::string_view name) const {
  std::vector<size_t> indices;
  for (size_t i = 0; i < sections_.size(); ++i) {
    if (sections_[i].name == name) indices.push_back(i);
  }
  return indices;
}

const ElfSection* ElfFile::FindSection(absl::string_view name) const {
  for (const ElfSection& section : sections_) {
    if (section.name == name) return &section;
  }
  return nullptr;
}

absl::string_view ElfFile::SectionData(const ElfSection& section) const {
  if (!HasFileBytes(section.type)) return absl::string_view();
  return image_.substr(section.offset, section.size);
}

}  // namespace rt
}  // namespace spark
