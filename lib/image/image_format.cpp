#include "image_format.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "error.hpp"

namespace svm {

namespace {

constexpr size_t kProbeSize = 512;  // QEMU's BLOCK_PROBE_BUF_SIZE
constexpr const char* kConvert = "'qemu-img convert -O qcow2 IN OUT'";

uint16_t be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
uint32_t be32(const uint8_t* p) {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}
uint64_t be64(const uint8_t* p) { return uint64_t(be32(p)) << 32 | be32(p + 4); }
uint32_t le32(const uint8_t* p) {
    return uint32_t(p[3]) << 24 | uint32_t(p[2]) << 16 | uint32_t(p[1]) << 8 | uint32_t(p[0]);
}

// Reads up to len bytes at off; returns how many were read (short at end of file).
size_t pread_upto(int fd, void* buf, size_t len, uint64_t off) {
    size_t got = 0;
    auto* p = static_cast<uint8_t*>(buf);
    while (got < len) {
        ssize_t n = ::pread(fd, p + got, len - got, static_cast<off_t>(off + got));
        if (n < 0) {
            if (errno == EINTR) continue;
            SVM_THROW_ERRNO("read image header");
        }
        if (n == 0) break;
        got += static_cast<size_t>(n);
    }
    return got;
}

// block/vmdk.c vmdk_probe, text descriptor branch: comment lines and blank
// lines may precede a "version=1|2|3" line.
bool vmdk_descriptor_probe(const uint8_t* buf, size_t size) {
    const char* p = reinterpret_cast<const char*>(buf);
    const char* end = p + size;
    while (p < end) {
        if (*p == '#') {
            while (p < end && *p != '\n') p++;
            p++;
            continue;
        }
        if (*p == ' ') {
            while (p < end && *p == ' ') p++;
            if (p < end && *p == '\r') p++;
            if (p == end || *p != '\n') return false;
            p++;
            continue;
        }
        for (const char* v :
             {"version=1\n", "version=2\n", "version=3\n", "version=1\r\n", "version=2\r\n", "version=3\r\n"}) {
            size_t n = std::strlen(v);
            if (static_cast<size_t>(end - p) >= n && std::strncmp(v, p, n) == 0) return true;
        }
        return false;
    }
    return false;
}

const char kCloopMagic[] = "#!/bin/sh\n#V2.0 Format\nmodprobe cloop file=$0 && mount -r -t iso9660 /dev/cloop $1\n";

std::string hex64(uint64_t v) {
    char b[32];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return b;
}

void add(ImageHeaderInfo& info, ProblemKind k, std::string text) { info.problems.push_back({k, std::move(text)}); }

// Where a qcow2 header puts the L1 and refcount tables.
struct Qcow2Tables {
    uint32_t l1_size = 0, rt_clusters = 0;
    uint64_t l1_offset = 0, rt_offset = 0;
};

// The fixed part of a qcow2 header into info.qcow2 and `t`; false (with
// the problem added) when the rest cannot be read: an unsupported version,
// a truncated or invalid header.
bool read_qcow2_header(const uint8_t* head, size_t head_len, ImageHeaderInfo& info, Qcow2Tables& t) {
    Qcow2Header& q = info.qcow2;
    uint8_t h[112] = {};
    size_t got = std::min(head_len, sizeof h);
    std::memcpy(h, head, got);
    q.version = be32(h + 4);
    if (q.version > 3) {
        add(info, ProblemKind::unsupported_version,
            "uses qcow2 version " + std::to_string(q.version) + ", which is not supported; rewrite it with " +
                kConvert);
        return false;
    }
    const size_t fixed = q.version == 2 ? 72 : 104;
    if (got < fixed) {
        add(info, ProblemKind::truncated, "is truncated (qcow2 header needs " + std::to_string(fixed) + " bytes)");
        return false;
    }
    q.backing_file_offset = be64(h + 8);
    q.backing_file_size = be32(h + 16);
    q.cluster_bits = be32(h + 20);
    info.virtual_size = be64(h + 24);
    q.crypt_method = be32(h + 32);
    t.l1_size = be32(h + 36);
    t.l1_offset = be64(h + 40);
    t.rt_offset = be64(h + 48);
    t.rt_clusters = be32(h + 56);
    q.nb_snapshots = be32(h + 60);
    q.incompatible_features = q.version >= 3 ? be64(h + 72) : 0;
    q.header_length = q.version >= 3 ? be32(h + 100) : 72;
    return true;
}

// The header's sizes against each other and the file's; false (with the
// problem added) when they do not fit.
bool qcow2_header_fits(ImageHeaderInfo& info) {
    const Qcow2Header& q = info.qcow2;
    if (q.cluster_bits < 9 || q.cluster_bits > 21) {
        add(info, ProblemKind::bad_header,
            "has an invalid qcow2 header (cluster_bits " + std::to_string(q.cluster_bits) + "); rewrite it with " +
                kConvert);
        return false;
    }
    const uint64_t cluster = uint64_t(1) << q.cluster_bits;
    if (q.version >= 3 && (q.header_length < 104 || q.header_length > cluster)) {
        add(info, ProblemKind::bad_header,
            "has an invalid qcow2 header (header length " + std::to_string(q.header_length) + "); rewrite it with " +
                kConvert);
        return false;
    }
    if (info.file_size < q.header_length) {
        add(info, ProblemKind::truncated,
            "is truncated (qcow2 header needs " + std::to_string(q.header_length) + " bytes)");
        return false;
    }
    return true;
}

// The backing file's name and the header extensions, from the first
// cluster `c`: from the end of the header to the backing file name (or the
// end of the cluster), as qcow2_read_extensions walks them.
void read_qcow2_extensions(const std::vector<uint8_t>& c, uint64_t cluster, ImageHeaderInfo& info) {
    Qcow2Header& q = info.qcow2;
    if (q.backing_file_offset != 0) {
        uint64_t off = q.backing_file_offset, len = q.backing_file_size;
        if (off < c.size() && len <= c.size() - off) {
            q.backing_file.assign(reinterpret_cast<const char*>(c.data() + off), static_cast<size_t>(len));
        }
    }
    uint64_t ext_end = q.backing_file_offset ? std::min<uint64_t>(q.backing_file_offset, cluster) : cluster;
    uint64_t off = q.header_length;
    while (off < ext_end) {
        if (off + 8 > c.size()) break;  // QEMU reads zeros past the end: the end marker
        uint32_t type = be32(c.data() + off);
        uint32_t len = be32(c.data() + off + 4);
        off += 8;
        if (type == kQcow2ExtEnd) break;
        if (len > ext_end - std::min(off, ext_end) || off + len > c.size()) {
            add(info, ProblemKind::bad_header,
                "has a qcow2 header extension that runs past the header; rewrite it with " + std::string(kConvert));
            break;
        }
        q.extensions.push_back(type);
        std::string data(reinterpret_cast<const char*>(c.data() + off), len);
        if (type == kQcow2ExtBackingFormat) q.backing_format = data;
        if (type == kQcow2ExtDataFile) {
            q.has_data_file_ext = true;
            q.data_file = data;
        }
        if (type == kQcow2ExtEncryption) q.has_encryption_ext = true;
        off += (uint64_t(len) + 7) & ~uint64_t(7);
    }
}

// What the header asks of its reader that a job's image may not: a
// backing file, an external data file, encryption, unknown features, the
// corrupt bit.
void check_qcow2_features(ImageHeaderInfo& info) {
    const Qcow2Header& q = info.qcow2;
    if (q.backing_file_offset != 0) {
        std::string name = q.backing_file.empty() ? std::string("name unreadable") : printable(q.backing_file);
        add(info, ProblemKind::backing_file, "has a backing file (" + name + "); flatten it with " + kConvert);
    } else if (!q.backing_format.empty()) {
        add(info, ProblemKind::backing_format,
            "names a backing format (" + printable(q.backing_format) +
                ") in its qcow2 header but no backing file; rewrite it with " + kConvert);
    }
    if ((q.incompatible_features & kQcow2IncompatDataFile) || q.has_data_file_ext) {
        std::string name = q.has_data_file_ext ? " (" + printable(q.data_file) + ")" : "";
        add(info, ProblemKind::external_data_file,
            "has an external data file" + name + "; rewrite it as a single file with " + kConvert);
    }
    if (q.crypt_method != 0 || q.has_encryption_ext) {
        add(info, ProblemKind::encrypted,
            "uses qcow2 encryption, which is not supported; write a decrypted copy with 'qemu-img convert'");
    }
    if (uint64_t unknown = q.incompatible_features & ~kQcow2IncompatKnown) {
        add(info, ProblemKind::unknown_features,
            "has unknown incompatible qcow2 features (" + hex64(unknown) + "); rewrite it with " + kConvert);
    }
    if (q.incompatible_features & kQcow2IncompatCorrupt) {
        add(info, ProblemKind::corrupt,
            "is marked corrupt in its qcow2 header; repair it with 'qemu-img check -r all' or rewrite it with " +
                std::string(kConvert));
    }
}

// The L1 and refcount tables must lie inside the file.
void check_qcow2_tables(const Qcow2Tables& t, ImageHeaderInfo& info) {
    const uint64_t limit = uint64_t(1) << 60;
    uint64_t need = 0;
    if (t.l1_size > 0) {
        if (t.l1_offset > limit) need = UINT64_MAX;
        else need = std::max(need, t.l1_offset + uint64_t(t.l1_size) * 8);
    }
    if (t.rt_clusters > 0) {
        if (t.rt_offset > limit) need = UINT64_MAX;
        else need = std::max(need, t.rt_offset + (uint64_t(t.rt_clusters) << info.qcow2.cluster_bits));
    }
    if (need == UINT64_MAX) {
        add(info, ProblemKind::bad_header,
            "has an invalid qcow2 header (table offset beyond any file size); rewrite it with " +
                std::string(kConvert));
    } else if (need > info.file_size) {
        add(info, ProblemKind::truncated,
            "is truncated (its qcow2 tables need " + std::to_string(need) + " bytes, the file has " +
                std::to_string(info.file_size) + ")");
    }
}

// The first cluster's bytes of a qcow2 file (head: the file's first bytes,
// at most kImageHeadBytes).
void inspect_qcow2(const uint8_t* head, size_t head_len, ImageHeaderInfo& info) {
    Qcow2Tables tables;
    if (!read_qcow2_header(head, head_len, info, tables) || !qcow2_header_fits(info)) return;
    // Everything QEMU reads from the header lives in the first cluster.
    const uint64_t cluster = uint64_t(1) << info.qcow2.cluster_bits;
    std::vector<uint8_t> c(head, head + static_cast<size_t>(std::min<uint64_t>({cluster, info.file_size, head_len})));
    read_qcow2_extensions(c, cluster, info);
    check_qcow2_features(info);
    check_qcow2_tables(tables, info);
}

}  // namespace

const char* format_name(ImageFormat f) {
    switch (f) {
    case ImageFormat::raw: return "raw";
    case ImageFormat::qcow2: return "qcow2";
    case ImageFormat::qcow: return "qcow";
    case ImageFormat::qed: return "qed";
    case ImageFormat::vmdk: return "vmdk";
    case ImageFormat::vdi: return "vdi";
    case ImageFormat::vhdx: return "vhdx";
    case ImageFormat::vpc: return "vpc";
    case ImageFormat::luks: return "luks";
    case ImageFormat::bochs: return "bochs";
    case ImageFormat::cloop: return "cloop";
    case ImageFormat::dmg: return "dmg";
    case ImageFormat::parallels: return "parallels";
    }
    return "unknown";
}

std::vector<ImageFormat> probe_formats(const uint8_t* b) {
    std::vector<ImageFormat> out;
    const uint32_t magic = be32(b);
    if (magic == 0x514649fb) {  // "QFI\xfb": qcow_probe wants version 1, qcow2_probe version >= 2
        uint32_t v = be32(b + 4);
        if (v == 1) out.push_back(ImageFormat::qcow);
        if (v >= 2) out.push_back(ImageFormat::qcow2);
    }
    if (le32(b) == 0x00444551) out.push_back(ImageFormat::qed);                              // "QED\0"
    if (magic == 0x4b444d56 || magic == 0x434f5744 || vmdk_descriptor_probe(b, kProbeSize))  // "KDMV", "COWD"
        out.push_back(ImageFormat::vmdk);
    if (le32(b + 0x40) == 0xbeda107f) out.push_back(ImageFormat::vdi);
    if (std::memcmp(b, "vhdxfile", 8) == 0) out.push_back(ImageFormat::vhdx);
    if (std::memcmp(b, "conectix", 8) == 0) out.push_back(ImageFormat::vpc);
    // QEMU 7.2 probes LUKS version 1 only; any version is refused here.
    if (std::memcmp(b, "LUKS\xba\xbe", 6) == 0 && be16(b + 6) >= 1) out.push_back(ImageFormat::luks);
    if (std::memcmp(b, "Bochs Virtual HD Image", 23) == 0 && std::memcmp(b + 32, "Redolog", 8) == 0 &&
        std::memcmp(b + 48, "Growing", 8) == 0 && (le32(b + 64) == 0x00020000 || le32(b + 64) == 0x00010000))
        out.push_back(ImageFormat::bochs);
    if (std::memcmp(b, kCloopMagic, sizeof kCloopMagic) == 0) out.push_back(ImageFormat::cloop);
    if ((std::memcmp(b, "WithoutFreeSpace", 16) == 0 || std::memcmp(b, "WithouFreSpacExt", 16) == 0) &&
        le32(b + 16) == 2)
        out.push_back(ImageFormat::parallels);
    return out;
}

ImageHeaderInfo inspect_image_bytes(const uint8_t* head, size_t head_len, const uint8_t* tail, size_t tail_len,
                                    uint64_t file_size) {
    ImageHeaderInfo info;
    info.file_size = file_size;
    if (info.file_size == 0) {
        add(info, ProblemKind::empty, "is empty");
        return info;
    }
    head_len = static_cast<size_t>(std::min<uint64_t>({head_len, file_size, kImageHeadBytes}));
    uint8_t first[kProbeSize] = {};  // zero padded, as QEMU reads a short file
    if (head_len > 0) std::memcpy(first, head, std::min(head_len, sizeof first));
    info.claimed_by = probe_formats(first);
    if (info.claimed_by.empty() && info.file_size >= 512 && tail_len == 512) {
        if (be32(tail) == 0x6b6f6c79) info.claimed_by.push_back(ImageFormat::dmg);  // "koly"
        if (std::memcmp(tail, "conectix", 8) == 0) info.claimed_by.push_back(ImageFormat::vpc);
    }
    if (info.claimed_by.empty()) {
        info.format = ImageFormat::raw;
        info.virtual_size = (info.file_size + 511) / 512 * 512;  // QEMU counts whole sectors
        return info;
    }
    info.format = info.claimed_by.front();
    if (info.claimed_by.size() > 1) {
        std::string names;
        for (size_t i = 0; i < info.claimed_by.size(); ++i) {
            if (i) names += i + 1 == info.claimed_by.size() ? " and " : ", ";
            names += std::string("a ") + format_name(info.claimed_by[i]);
        }
        add(info, ProblemKind::ambiguous_format,
            "is at the same time " + names +
                " image, so programs that guess formats can read it differently; rewrite it with " + kConvert);
    }
    if (info.format == ImageFormat::qcow2) {
        inspect_qcow2(head, head_len, info);
    } else if (info.claimed_by.size() == 1) {
        std::string name = info.format == ImageFormat::qcow ? "qcow (version 1)" : format_name(info.format);
        add(info, ProblemKind::unsupported_format,
            std::string("is a ") + name + " image; convert it to qcow2 or raw with " + kConvert);
    }
    return info;
}

ImageHeaderInfo inspect_image(int fd) {
    struct stat st;
    if (::fstat(fd, &st) != 0) SVM_THROW_ERRNO("fstat image");
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    std::vector<uint8_t> head(static_cast<size_t>(std::min<uint64_t>(size, kImageHeadBytes)));
    head.resize(pread_upto(fd, head.data(), head.size(), 0));
    uint8_t tail[512];
    size_t tail_len = size >= 512 ? pread_upto(fd, tail, sizeof tail, size - 512) : 0;
    return inspect_image_bytes(head.data(), head.size(), tail, tail_len, size);
}

std::string printable(const std::string& s, size_t max_len) {
    std::string out;
    for (unsigned char ch : s) {
        if (out.size() >= max_len) {
            out += "...";
            break;
        }
        if (ch >= 0x20 && ch < 0x7f) {
            out += static_cast<char>(ch);
        } else {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02x", ch);
            out += b;
        }
    }
    return out;
}

}  // namespace svm
