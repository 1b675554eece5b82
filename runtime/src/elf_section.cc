#include "spark/runtime/elf_section.h"

#include <elf.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checked_math.h"
#include "spark/runtime/printable_text.h"
#include "spark/runtime/status_macros.h"

namespace spark {
namespace rt {
namespace {

// The ELF64 structures and constants of the System V gABI, from <elf.h>. A cubin is little-endian
// ELF64 (CheckIdent refuses anything else), and so are the hosts Spark runs on (x86-64, AArch64),
// so the structures are copied out of the image as they are.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the ELF reader assumes a little-endian host");
constexpr size_t kIdentSize = EI_NIDENT;
constexpr size_t kHeaderSize = sizeof(Elf64_Ehdr);
constexpr size_t kSectionHeaderSize = sizeof(Elf64_Shdr);
static_assert(kHeaderSize == 64 && kSectionHeaderSize == 64, "ELF64 header sizes");
static_assert(kElfSectionNoBits == SHT_NOBITS, "elf_section.h's kElfSectionNoBits is SHT_NOBITS");

// SHT_NULL and SHT_NOBITS sections have no bytes in the file (section 0's sh_size may even hold
// the section count).
bool HasFileBytes(uint32_t type) { return type != SHT_NULL && type != SHT_NOBITS; }

// A structure at `offset` of the image (the caller has checked that it lies inside).
template <typename T>
T Load(absl::string_view image, uint64_t offset) {
  T value;
  std::memcpy(&value, image.data() + offset, sizeof(T));
  return value;
}

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
  if (static_cast<uint8_t>(image[EI_CLASS]) != ELFCLASS64) {
    return Invalid(origin, "not a 64-bit ELF file; cubins are ELF64");
  }
  if (static_cast<uint8_t>(image[EI_DATA]) != ELFDATA2LSB) {
    return Invalid(origin, "not a little-endian ELF file; cubins are little-endian");
  }
  if (static_cast<uint8_t>(image[EI_VERSION]) != EV_CURRENT) {
    return Invalid(origin,
                   absl::StrCat("ELF identification version (e_ident[EI_VERSION]) is ",
                                static_cast<int>(static_cast<uint8_t>(image[EI_VERSION])),
                                ", expected ", EV_CURRENT, " (EV_CURRENT); the file is damaged"));
  }
  if (image.size() < kHeaderSize) {
    return Invalid(origin, absl::StrCat("truncated ELF file: ", image.size(),
                                        " bytes, the ELF header needs ", kHeaderSize));
  }
  const uint32_t version = Load<Elf64_Ehdr>(image, 0).e_version;
  if (version != EV_CURRENT) {
    return Invalid(origin, absl::StrCat("ELF version (e_version) is ", version, ", expected ",
                                        EV_CURRENT, " (EV_CURRENT); the file is damaged"));
  }
  return absl::OkStatus();
}

// Section header `index` (whose table entry is known to be in bounds).
Elf64_Shdr SectionHeader(absl::string_view image, uint64_t table_offset, uint64_t index) {
  return Load<Elf64_Shdr>(image, table_offset + index * kSectionHeaderSize);
}

absl::StatusOr<RawHeader> ReadHeader(absl::string_view image, absl::string_view origin) {
  SPARK_RETURN_IF_ERROR(CheckIdent(image, origin));
  const Elf64_Ehdr elf = Load<Elf64_Ehdr>(image, 0);
  RawHeader header;
  header.machine = elf.e_machine;
  header.section_table_offset = elf.e_shoff;
  header.section_entry_size = elf.e_shentsize;
  header.section_count = elf.e_shnum;
  header.name_table_index = elf.e_shstrndx;
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
  const bool extended_index = header.name_table_index == SHN_XINDEX;
  if (extended_count || extended_index) {
    const absl::optional<uint64_t> end =
        CheckedAdd(header.section_table_offset, kSectionHeaderSize);
    if (!end || *end > image.size()) {
      return Invalid(origin, absl::StrCat("truncated ELF file: the section header table at offset ",
                                          header.section_table_offset, " is past the end (",
                                          image.size(), " bytes)"));
    }
    const uint64_t table = header.section_table_offset;
    const Elf64_Shdr first = SectionHeader(image, table, 0);
    if (extended_count) header.section_count = first.sh_size;
    if (extended_index) header.name_table_index = first.sh_link;
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
  const Elf64_Shdr raw = SectionHeader(image, table, index);
  ElfSection section;
  section.type = raw.sh_type;
  section.flags = raw.sh_flags;
  section.offset = raw.sh_offset;
  section.size = raw.sh_size;
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
    const uint32_t name_offset = SectionHeader(image, header.section_table_offset, i).sh_name;
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
