// Our own reading of a disk image's header, from an fd, with pread only: which
// format the bytes say it is, its virtual size, and everything in the header
// that we refuse (a backing file, an external data file, encryption, unknown
// incompatible features, a truncated header, a file that two formats claim).
//
// The format is never taken from the user: it is what the bytes say.
//
// Polyglot rule. QEMU guesses a format by reading the first 512 bytes and asking
// every driver's probe function for a score; the highest score wins and a tie
// goes to whichever driver registered first. Any file that more than one probe
// claims (raw's fallback score aside) is therefore read differently depending
// on build and version, and by other tools that guess (libvirt, virt-* tools,
// a user's own qemu-img). We emulate those probes (qcow, qcow2, qed, vmdk
// binary and text descriptor, vdi, vhdx, vpc, luks, bochs, cloop, parallels)
// and refuse any file that two of them claim. A file is raw only when no probe
// claims it and it also carries none of the signatures that QEMU finds by file
// name or at the end of the file (dmg "koly" trailer, fixed-VHD "conectix"
// footer); such trailers are not looked at once a header probe has claimed the
// file, since the tail of a qcow2 file is guest data.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace svm {

enum class ImageFormat { raw, qcow2, qcow, qed, vmdk, vdi, vhdx, vpc, luks, bochs, cloop, dmg, parallels };

// "qcow2", "raw", "vmdk", ... (QEMU's driver names).
const char* format_name(ImageFormat f);

enum class ProblemKind {
    empty,
    truncated,
    bad_header,
    unsupported_format,
    ambiguous_format,
    unsupported_version,
    backing_file,
    backing_format,
    external_data_file,
    encrypted,
    unknown_features,
    corrupt,
};

struct ImageProblem {
    ProblemKind kind;
    // The end of one sentence that starts with the image's path: "has a backing
    // file (/etc/shadow); flatten it with 'qemu-img convert -O qcow2 IN OUT'".
    std::string text;
};

// qcow2 incompatible feature bits (QEMU's docs/interop/qcow2.txt).
constexpr uint64_t kQcow2IncompatDirty = 1u << 0;
constexpr uint64_t kQcow2IncompatCorrupt = 1u << 1;
constexpr uint64_t kQcow2IncompatDataFile = 1u << 2;
constexpr uint64_t kQcow2IncompatCompression = 1u << 3;
constexpr uint64_t kQcow2IncompatExtendedL2 = 1u << 4;
constexpr uint64_t kQcow2IncompatKnown = 0x1f;

// qcow2 header extension types.
constexpr uint32_t kQcow2ExtEnd = 0x00000000;
constexpr uint32_t kQcow2ExtBackingFormat = 0xe2792aca;
constexpr uint32_t kQcow2ExtFeatureTable = 0x6803f857;
constexpr uint32_t kQcow2ExtBitmaps = 0x23852875;
constexpr uint32_t kQcow2ExtEncryption = 0x0537be77;
constexpr uint32_t kQcow2ExtDataFile = 0x44415441;

struct Qcow2Header {
    uint32_t version = 0;
    uint32_t cluster_bits = 0;
    uint32_t header_length = 0;
    uint32_t crypt_method = 0;
    uint64_t incompatible_features = 0;
    uint64_t backing_file_offset = 0;
    uint32_t backing_file_size = 0;
    std::string backing_file;    // as stored (may be unprintable; see printable())
    std::string backing_format;  // from the 0xe2792aca extension
    std::string data_file;       // from the 0x44415441 extension
    bool has_data_file_ext = false;
    bool has_encryption_ext = false;
    uint32_t nb_snapshots = 0;
    std::vector<uint32_t> extensions;  // types seen, in order
};

struct ImageHeaderInfo {
    ImageFormat format = ImageFormat::raw;
    uint64_t virtual_size = 0;  // as QEMU will report it (raw: size rounded up to 512)
    uint64_t file_size = 0;
    std::vector<ImageFormat> claimed_by;  // every format whose signature matched
    Qcow2Header qcow2;                    // filled when format is qcow2
    std::vector<ImageProblem> problems;   // empty = nothing wrong with the header
    bool ok() const { return problems.empty(); }
};

// Emulates QEMU's format probes on the first 512 bytes of a file (zero padded
// when the file is shorter, as QEMU reads it): every format with a nonzero score
// other than raw, in a fixed order.
std::vector<ImageFormat> probe_formats(const uint8_t* first512);

// What the header reader looks at: the file's first bytes (a qcow2 header
// and its extensions lie in the first cluster, at most 2 MiB) and its last
// 512 bytes.
constexpr uint64_t kImageHeadBytes = uint64_t(1) << 21;

// The header reader itself, a pure function over bytes (no I/O, no
// exception; the fuzz target's entry): head is the file's first
// min(file_size, kImageHeadBytes) bytes (fewer: read as a short file),
// tail its last 512 bytes (tail_len 512; anything else: not looked at),
// file_size the file's size. Findings are in problems.
ImageHeaderInfo inspect_image_bytes(const uint8_t* head, size_t head_len, const uint8_t* tail, size_t tail_len,
                                    uint64_t file_size);

// Reads those bytes of the image behind fd (pread only, at most
// kImageHeadBytes + 512; the file offset is not used) and inspects them.
// Throws svm::Error only for I/O errors; header findings are in problems.
ImageHeaderInfo inspect_image(int fd);

// Bytes made safe to print in one line: printable ASCII kept, others as \xNN,
// cut at max_len characters with "...".
std::string printable(const std::string& s, size_t max_len = 200);

}  // namespace svm
