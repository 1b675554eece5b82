#include "spark/runtime/elf_section.h"

#include <string>

#include "gtest/gtest.h"
#include "loader_test_util.h"

namespace spark {
namespace rt {
namespace {

using test::MakeElf64;
using test::StatusIs;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

// Overwrites the little-endian T at `offset` of `image`.
template <typename T>
void Store(std::string* image, uint64_t offset, T value) {
  std::string bytes;
  AppendLittleEndian<T>(value, &bytes);
  image->replace(offset, sizeof(T), bytes);
}

uint64_t SectionTableOffset(const std::string& image) {
  return LoadLittleEndian<uint64_t>(image.data() + 40);
}

// Offset of field `field` of section header `index`.
uint64_t SectionField(const std::string& image, int index, int field) {
  return SectionTableOffset(image) + 64 * index + field;
}

std::string TwoSectionElf() { return MakeElf64({{".text", "code"}, {".spark.plan", "PLAN"}}); }

absl::Status ParseError(const std::string& image) {
  return ElfFile::Parse(image, "x.cubin").status();
}

TEST(ElfSectionTest, ReadsSectionsByName) {
  const std::string image = TwoSectionElf();
  const absl::StatusOr<ElfFile> elf = ElfFile::Parse(image, "x.cubin");
  ASSERT_TRUE(elf.ok()) << elf.status();
  EXPECT_EQ(elf->machine(), 190);
  ASSERT_EQ(elf->sections().size(), 4u);  // null, .text, .spark.plan, .shstrtab
  EXPECT_EQ(elf->sections()[0].name, "");
  EXPECT_EQ(elf->sections()[3].name, ".shstrtab");
  const ElfSection* plan = elf->FindSection(".spark.plan");
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(elf->SectionData(*plan), "PLAN");
  EXPECT_EQ(elf->SectionData(*elf->FindSection(".text")), "code");
  EXPECT_EQ(elf->FindSection(".nv.info"), nullptr);
}

TEST(ElfSectionTest, NoBitsSectionsHaveNoData) {
  std::string image = TwoSectionElf();
  Store<uint32_t>(&image, SectionField(image, 1, 4), kElfSectionNoBits);
  Store<uint64_t>(&image, SectionField(image, 1, 32), 1u << 30);  // size beyond the file is fine
  const absl::StatusOr<ElfFile> elf = ElfFile::Parse(image, "x.cubin");
  ASSERT_TRUE(elf.ok()) << elf.status();
  EXPECT_EQ(elf->SectionData(*elf->FindSection(".text")), "");
}

TEST(ElfSectionTest, NoSectionTableMeansNoSections) {
  std::string image = TwoSectionElf();
  Store<uint64_t>(&image, 40, 0);
  const absl::StatusOr<ElfFile> elf = ElfFile::Parse(image, "x.cubin");
  ASSERT_TRUE(elf.ok()) << elf.status();
  EXPECT_TRUE(elf->sections().empty());
}

TEST(ElfSectionTest, ExtendedSectionNumbering) {
  std::string image = TwoSectionElf();
  Store<uint16_t>(&image, 60, 0);       // e_shnum: see section 0's sh_size
  Store<uint16_t>(&image, 62, 0xffff);  // e_shstrndx: see section 0's sh_link
  Store<uint64_t>(&image, SectionField(image, 0, 32), 4);
  Store<uint32_t>(&image, SectionField(image, 0, 40), 3);
  const absl::StatusOr<ElfFile> elf = ElfFile::Parse(image, "x.cubin");
  ASSERT_TRUE(elf.ok()) << elf.status();
  ASSERT_NE(elf->FindSection(".spark.plan"), nullptr);
}

// e_shstrndx SHN_XINDEX sends the reader to section 0's sh_link; 0 there names no section:
// the real reason, not "no .spark.plan section".
TEST(ElfSectionTest, RejectsExtendedNameTableIndexOfZero) {
  std::string image = TwoSectionElf();
  Store<uint16_t>(&image, 62, 0xffff);  // section 0's sh_link stays 0
  EXPECT_TRUE(StatusIs(ParseError(image), kInvalid,
                       "x.cubin: ELF e_shstrndx is SHN_XINDEX (0xffff): the section name table "
                       "index is in section 0's sh_link, which is 0 (no section), so no section "
                       "has a name; the file is damaged"));
}

TEST(ElfSectionTest, SectionIndicesFindsEveryCopy) {
  const std::string image =
      MakeElf64({{".spark.plan", "A"}, {".text", "code"}, {".spark.plan", "B"}});
  const absl::StatusOr<ElfFile> elf = ElfFile::Parse(image, "x.cubin");
  ASSERT_TRUE(elf.ok()) << elf.status();
  EXPECT_EQ(elf->SectionIndices(".spark.plan"), (std::vector<size_t>{1, 3}));
  EXPECT_TRUE(elf->SectionIndices(".nv.info").empty());
}

TEST(ElfSectionTest, RejectsExtendedNumberingPastTheEnd) {
  std::string image = TwoSectionElf();
  Store<uint16_t>(&image, 60, 0);  // the count is in section 0, which is past the end
  Store<uint64_t>(&image, 40, image.size() - 8);
  EXPECT_TRUE(StatusIs(ParseError(image), kInvalid,
                       absl::StrCat("x.cubin: truncated ELF file: the section header table at "
                                    "offset ", image.size() - 8, " is past the end (",
                                    image.size(), " bytes)")));
}

TEST(ElfSectionTest, RejectsNonElf) {
  EXPECT_TRUE(StatusIs(ParseError("PK\x03\x04zipdata"), kInvalid,
                       "x.cubin is not an ELF file (expected the bytes 7f 45 4c 46, found 50 4b "
                       "03 04); expected a cubin written by spark-compile"));
  EXPECT_TRUE(StatusIs(ParseError(""), kInvalid, "found none: the file is empty"));
}

TEST(ElfSectionTest, Rejects32BitAndBigEndian) {
  std::string image = TwoSectionElf();
  image[4] = 1;
  EXPECT_TRUE(StatusIs(ParseError(image), kInvalid,
                       "x.cubin: not a 64-bit ELF file; cubins are ELF64"));
  image = TwoSectionElf();
  image[5] = 2;
  EXPECT_TRUE(StatusIs(ParseError(image), kInvalid,
                       "x.cubin: not a little-endian ELF file; cubins are little-endian"));
}

// Both version fields must be EV_CURRENT (1), the only ELF version there is.
TEST(ElfSectionTest, RejectsVersionOtherThanCurrent) {
  std::string image = TwoSectionElf();
  image[6] = 0;  // e_ident[EI_VERSION]
  EXPECT_TRUE(StatusIs(ParseError(image), kInvalid,
                       "x.cubin: ELF identification version (e_ident[EI_VERSION]) is 0, expected "
                       "1 (EV_CURRENT); the file is damaged"));
  image = TwoSectionElf();
  Store<uint32_t>(&image, 20, 0);  // e_version
  EXPECT_TRUE(StatusIs(ParseError(image), kInvalid,
                       "x.cubin: ELF version (e_version) is 0, expected 1 (EV_CURRENT); the file "
                       "is damaged"));
  image = TwoSectionElf();
  Store<uint32_t>(&image, 20, 2);
  EXPECT_TRUE(StatusIs(ParseError(image), kInvalid, "ELF version (e_version) is 2, expected 1"));
}

TEST(ElfSectionTest, RejectsTruncatedHeader) {
  EXPECT_TRUE(StatusIs(ParseError(TwoSectionElf().substr(0, 40)), kInvalid,
                       "x.cubin: truncated ELF file: 40 bytes, the ELF header needs 64"));
  EXPECT_TRUE(StatusIs(ParseError(TwoSectionElf().substr(0, 8)), kInvalid,
                       "x.cubin: truncated ELF file: 8 bytes, the ELF header needs 64"));
}

TEST(ElfSectionTest, RejectsTruncatedSectionTable) {
  const std::string image = TwoSectionElf();
  const std::string truncated = image.substr(0, image.size() - 10);
  EXPECT_TRUE(StatusIs(ParseError(truncated), kInvalid,
                       absl::StrCat("x.cubin: truncated ELF file: the section header table (4 "
                                    "entries at offset ", SectionTableOffset(image),
                                    ") extends past the end of the file (", truncated.size(),
                                    " bytes)")));
}

TEST(ElfSectionTest, RejectsSectionTableOffsetOverflow) {
  std::string image = TwoSectionElf();
  Store<uint64_t>(&image, 40, ~uint64_t{0} - 8);
  EXPECT_TRUE(StatusIs(ParseError(image), kInvalid,
                       "x.cubin: truncated ELF file: the section header table (4 entries"));
}

TEST(ElfSectionTest, RejectsSectionDataPastTheEnd) {
  std::string image = TwoSectionElf();
  Store<uint64_t>(&image, SectionField(image, 2, 32), 1u << 20);
  EXPECT_TRUE(StatusIs(ParseError(image), kInvalid,
                       absl::StrCat("x.cubin: truncated ELF file: section 2 (offset ",
                                    LoadLittleEndian<uint64_t>(image.data() +
                                                               SectionField(image, 2, 24)),
                                    ", size 1048576) extends past the end of the file (",
                                    image.size(), " bytes)")));
  image = TwoSectionElf();
  Store<uint64_t>(&image, SectionField(image, 2, 24), ~uint64_t{0});  // offset + size overflows
  EXPECT_TRUE(StatusIs(ParseError(image), kInvalid, "section 2 (offset 18446744073709551615"));
}

TEST(ElfSectionTest, RejectsBadSectionHeaderSize) {
  std::string image = TwoSectionElf();
  Store<uint16_t>(&image, 58, 40);
  EXPECT_TRUE(StatusIs(ParseError(image), kInvalid,
                       "x.cubin: ELF section header size is 40, expected 64"));
}

TEST(ElfSectionTest, RejectsNameTableIndexOutOfRange) {
  std::string image = TwoSectionElf();
  Store<uint16_t>(&image, 62, 9);
  EXPECT_TRUE(StatusIs(ParseError(image), kInvalid,
                       "x.cubin: ELF section name table index 9 is out of range (4 sections)"));
}

TEST(ElfSectionTest, RejectsBadNames) {
  std::string image = TwoSectionElf();
  Store<uint32_t>(&image, SectionField(image, 1, 0), 5000);
  EXPECT_TRUE(StatusIs(ParseError(image), kInvalid,
                       "x.cubin: ELF section 1 has name offset 5000, outside the section name "
                       "table ("));
  image = TwoSectionElf();
  const uint64_t table_size = LoadLittleEndian<uint64_t>(image.data() + SectionField(image, 3, 32));
  Store<uint64_t>(&image, SectionField(image, 3, 32), table_size - 1);  // cut the final NUL
  EXPECT_TRUE(StatusIs(ParseError(image), kInvalid,
                       "x.cubin: ELF section 3's name is not NUL-terminated in the section name "
                       "table"));
}

}  // namespace
}  // namespace rt
}  // namespace spark
