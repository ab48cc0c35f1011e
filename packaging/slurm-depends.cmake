# The Debian package's dependencies on the Slurm it was built against.
#
# Slurm loads a plugin only when the plugin's plugin_version has the same
# major.minor release as Slurm itself ("Incompatible plugin version" in
# slurmd's log and a failing sbatch otherwise), so a package built against
# 22.05 must not stay installed under 24.11, nor the other way round. Two
# dependencies say so, both computed here from what the build used:
#
#   libslurmNN       the package of the libslurm the build's libslurm-dev points
#                    at (its SONAME: libslurm.so.38 is 22.05, .42 is 24.11).
#                    The plugin does not link it (Slurm's symbols come from the
#                    process that loads the plugin), so this names the ABI the
#                    headers belong to; libslurmNN packages of different
#                    releases can be installed side by side, so it alone does
#                    not stop an upgrade of Slurm.
#   slurm-wlm-basic-plugins (>= X.Y), (<< X.Y+1)
#                    the release range. slurmd and slurm-client depend on
#                    exactly their own version of it, so apt will not upgrade
#                    Slurm to another release while this package is installed;
#                    it asks to remove it (or to install a rebuilt one) instead.
#
# Sets SVM_SLURM_SONAME, SVM_SLURM_RELEASE (X.Y) and SVM_SLURM_DEPENDS; both
# are printed at configure time. SVM_SLURM_DEPENDS can be set by hand for a
# Slurm that Debian's packages do not provide.

set(SVM_SLURM_DEPENDS "" CACHE STRING
  "Debian dependencies on Slurm (default: computed from the libslurm and slurm_version.h built against)")

# The release, from the header the plugin was compiled with.
file(STRINGS "${SLURM_INCLUDE_DIR}/slurm/slurm_version.h" _svm_vline
  REGEX "^#define[ \t]+SLURM_VERSION_NUMBER[ \t]+0x[0-9a-fA-F]+")
if(NOT _svm_vline MATCHES "0x([0-9a-fA-F][0-9a-fA-F])([0-9a-fA-F][0-9a-fA-F])([0-9a-fA-F][0-9a-fA-F])")
  message(FATAL_ERROR "no SLURM_VERSION_NUMBER in ${SLURM_INCLUDE_DIR}/slurm/slurm_version.h")
endif()
math(EXPR _svm_major "0x${CMAKE_MATCH_1}")
math(EXPR _svm_minor "0x${CMAKE_MATCH_2}")
math(EXPR _svm_next_minor "${_svm_minor} + 1")
if(_svm_minor LESS 10)
  set(_svm_minor "0${_svm_minor}")
endif()
if(_svm_next_minor LESS 10)
  set(_svm_next_minor "0${_svm_next_minor}")
endif()
set(SVM_SLURM_RELEASE "${_svm_major}.${_svm_minor}")

# The libslurm next to the headers (libslurm-dev's libslurm.so link), its
# SONAME and the Debian package that holds the shared object.
find_library(SVM_SLURM_LIBRARY NAMES slurm PATH_SUFFIXES slurm-wlm)
set(SVM_SLURM_SONAME "")
set(_svm_lib_pkg "")
if(SVM_SLURM_LIBRARY)
  get_filename_component(_svm_lib_real "${SVM_SLURM_LIBRARY}" REALPATH)
  find_program(SVM_OBJDUMP NAMES objdump "${CMAKE_OBJDUMP}")
  if(SVM_OBJDUMP)
    execute_process(COMMAND "${SVM_OBJDUMP}" -p "${_svm_lib_real}"
      OUTPUT_VARIABLE _svm_dump ERROR_QUIET RESULT_VARIABLE _svm_rc)
    if(_svm_rc EQUAL 0 AND _svm_dump MATCHES "SONAME[ \t]+([^\n \t]+)")
      set(SVM_SLURM_SONAME "${CMAKE_MATCH_1}")
    endif()
  endif()
  find_program(SVM_DPKG_QUERY dpkg-query)
  if(SVM_DPKG_QUERY)
    execute_process(COMMAND "${SVM_DPKG_QUERY}" -S "${_svm_lib_real}"
      OUTPUT_VARIABLE _svm_owner ERROR_QUIET RESULT_VARIABLE _svm_rc)
    # "libslurm38:amd64: /usr/lib/x86_64-linux-gnu/libslurm.so.38.0.0"
    if(_svm_rc EQUAL 0 AND _svm_owner MATCHES "^([a-z0-9][a-z0-9.+-]*)(:[a-z0-9]+)?: ")
      set(_svm_lib_pkg "${CMAKE_MATCH_1}")
    endif()
  endif()
  if(NOT _svm_lib_pkg AND SVM_SLURM_SONAME MATCHES "^libslurm\\.so\\.([0-9]+)$")
    # Debian's name for it (library policy: libslurm.so.N is in libslurmN).
    set(_svm_lib_pkg "libslurm${CMAKE_MATCH_1}")
  endif()
endif()

if(NOT SVM_SLURM_DEPENDS)
  set(_svm_deps "")
  if(_svm_lib_pkg)
    list(APPEND _svm_deps "${_svm_lib_pkg}")
  else()
    message(WARNING "slurm-vm: no libslurm found next to ${SLURM_INCLUDE_DIR}: the package will not name "
      "the libslurm it was built against (install libslurm-dev, or set SVM_SLURM_DEPENDS)")
  endif()
  list(APPEND _svm_deps "slurm-wlm-basic-plugins (>= ${SVM_SLURM_RELEASE})"
    "slurm-wlm-basic-plugins (<< ${_svm_major}.${_svm_next_minor})")
  string(REPLACE ";" ", " _svm_deps "${_svm_deps}")
  set(SVM_SLURM_DEPENDS_EFFECTIVE "${_svm_deps}")
else()
  set(SVM_SLURM_DEPENDS_EFFECTIVE "${SVM_SLURM_DEPENDS}")
endif()
message(STATUS "slurm-vm: built against Slurm ${SVM_SLURM_RELEASE} (${SVM_SLURM_SONAME}); "
  "package depends on: ${SVM_SLURM_DEPENDS_EFFECTIVE}")
