// Fuzzes the cubin container: the ELF section-header reader and the plan section inside it
// (ReadCubinPlan, what LoadArtifact does with a cubin's bytes).
//
// Invariants: a rejection carries a message; every section the ELF reader accepts lies inside
// the image; an accepted plan validates again.
#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fuzz_check.h"
#include "spark/runtime/artifact.h"
#include "spark/runtime/elf_section.h"
#include "spark/runtime/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view image(reinterpret_cast<const char*>(data), size);

  absl::StatusOr<spark::rt::ElfFile> elf = spark::rt::ElfFile::Parse(image, "fuzz.cubin");
  if (elf.ok()) {
    for (const spark::rt::ElfSection& section : elf->sections()) {
      const absl::string_view bytes = elf->SectionData(section);
      SPARK_FUZZ_CHECK(bytes.empty() || (bytes.data() >= image.data() &&
                                         bytes.data() + bytes.size() <= image.data() + size));
    }
  } else {
    SPARK_FUZZ_CHECK(!elf.status().message().empty());
  }

  absl::StatusOr<spark::rt::Plan> plan = spark::rt::ReadCubinPlan(image, "fuzz.cubin");
  if (!plan.ok()) {
    SPARK_FUZZ_CHECK(!plan.status().message().empty());
    return 0;
  }
  SPARK_FUZZ_CHECK(elf.ok());
  SPARK_FUZZ_CHECK(spark::rt::ValidatePlan(*plan, "fuzz.cubin").ok());
  return 0;
}
