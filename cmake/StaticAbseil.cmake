# Debian's Abseil CMake package points its targets at shared libraries. spark-run must copy to a
# GPU machine on its own, so every absl:: target is retargeted to the static archive next to it.
find_package(absl REQUIRED CONFIG)

file(GLOB _spark_absl_archives "${absl_DIR}/../../libabsl_*.a")
if(NOT _spark_absl_archives)
  message(FATAL_ERROR "static Abseil archives (libabsl_*.a) not found next to ${absl_DIR}; "
                      "install libabsl-dev (scripts/setup.sh does)")
endif()
foreach(_archive IN LISTS _spark_absl_archives)
  get_filename_component(_name "${_archive}" NAME_WE)
  string(REGEX REPLACE "^libabsl_" "" _name "${_name}")
  if(TARGET absl::${_name})
    get_target_property(_type absl::${_name} TYPE)
    if(NOT _type STREQUAL "INTERFACE_LIBRARY")
      set_target_properties(absl::${_name} PROPERTIES
        IMPORTED_LOCATION_NONE "${_archive}"
        IMPORTED_LOCATION "${_archive}")
    endif()
  endif()
endforeach()
