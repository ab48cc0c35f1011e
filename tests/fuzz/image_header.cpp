// The image header reader (lib/image/image_format.hpp) on a file of the
// fuzzer's bytes: a user's disk image, read by root at intake. Properties:
// only I/O errors throw (none here), a file no probe claims is raw and
// fine, every problem is one printable sentence, and qcow2's fields are read
// only for a qcow2.
#include <sys/mman.h>
#include <unistd.h>

#include "error.hpp"
#include "fuzz.hpp"
#include "image_format.hpp"

using svm::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const int fd = ::memfd_create("svm-fuzz-image", MFD_CLOEXEC);
    require(fd >= 0, "memfd_create");
    require(::ftruncate(fd, 0) == 0, "ftruncate");
    require(size == 0 || ::pwrite(fd, data, size, 0) == static_cast<ssize_t>(size), "pwrite");
    svm::ImageHeaderInfo info = svm::inspect_image(fd);
    require(info.file_size == size, "file size as written");
    if (size == 0) {
        require(info.problems.size() == 1 && info.problems[0].kind == svm::ProblemKind::empty, "empty is empty");
    } else if (info.claimed_by.empty()) {
        require(info.format == svm::ImageFormat::raw && info.ok(), "unclaimed is raw");
        require(info.virtual_size >= size && info.virtual_size % 512 == 0, "raw size in whole sectors");
    } else {
        require(info.format == info.claimed_by.front(), "format is the first claim");
        require(info.claimed_by.size() == 1 || !info.ok(), "two claims are refused");
    }
    if (info.format != svm::ImageFormat::qcow2) require(info.qcow2.extensions.empty(), "qcow2 fields of a qcow2");
    for (const auto& p : info.problems) {
        require(!p.text.empty(), "a problem says what");
        require(svm::fuzz::printable_ascii(p.text), "a problem is printable");
    }
    return 0;
}
