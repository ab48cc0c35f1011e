#include "seed_iso.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "error.hpp"

namespace svm {

namespace {

// ECMA-119 (ISO 9660) with the Rock Ridge entries (RRIP, through SUSP) that
// Linux reads: SP in the root's first record, then RR, NM and PX.
constexpr size_t kSector = 2048;
constexpr uint32_t kPvd = 16, kTerminator = 17, kPathL = 18, kPathM = 19, kRoot = 20, kFirstFile = 21;
// Zeros after the files, counted in the volume, as genisoimage adds them:
// readers read ahead past the last file (Linux's read-ahead at the end of a
// CD; busybox's findfs reads 68 KiB before it looks at any CD-ROM).
constexpr uint32_t kPadding = 150;

void le16(std::string& b, size_t at, uint16_t v) {
    b[at] = static_cast<char>(v & 0xff);
    b[at + 1] = static_cast<char>(v >> 8);
}
void be16(std::string& b, size_t at, uint16_t v) {
    b[at] = static_cast<char>(v >> 8);
    b[at + 1] = static_cast<char>(v & 0xff);
}
void le32(std::string& b, size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void be32(std::string& b, size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>((v >> (8 * (3 - i))) & 0xff);
}
void both16(std::string& b, size_t at, uint16_t v) { le16(b, at, v), be16(b, at + 2, v); }
void both32(std::string& b, size_t at, uint32_t v) { le32(b, at, v), be32(b, at + 4, v); }
void text(std::string& b, size_t at, size_t width, const std::string& s) {
    b.replace(at, width, (s + std::string(width, ' ')).substr(0, width));
}

// A Rock Ridge (SUSP) entry: signature, length, version 1, data.
std::string entry(const char* sig, const std::string& data) {
    std::string e = {sig[0], sig[1], static_cast<char>(4 + data.size()), 1};
    return e + data;
}
std::string px(uint32_t mode, uint32_t links) {
    std::string d(32, '\0');
    both32(d, 0, mode), both32(d, 8, links);  // uid and gid 0
    return entry("PX", d);
}

struct Record {
    std::string id;         // the ISO name ("\0" and "\1" for . and ..)
    uint32_t extent, size;  // where its data is, and how long it is
    bool directory;
    std::string system_use;  // Rock Ridge entries
};

// A directory record (ECMA-119 9.1): 33 bytes, the name, a pad byte to an
// even offset, the system use entries, a pad byte to an even length.
std::string record(const Record& r, const unsigned char when[7]) {
    size_t base = 33 + r.id.size() + (r.id.size() % 2 == 0 ? 1 : 0);
    size_t len = base + r.system_use.size();
    len += len % 2;
    if (len > 255) SVM_THROW("seed image: the directory record of " + r.id + " is too long");
    std::string b(len, '\0');
    b[0] = static_cast<char>(len);
    both32(b, 2, r.extent), both32(b, 10, r.size);
    std::memcpy(&b[18], when, 7);
    b[25] = r.directory ? 2 : 0;
    both16(b, 28, 1);
    b[32] = static_cast<char>(r.id.size());
    b.replace(33, r.id.size(), r.id);
    b.replace(base, r.system_use.size(), r.system_use);
    return b;
}

// "NETWORK_CONFIG.;1" for "network-config": ISO 9660's d-characters.
std::string iso_name(const std::string& name) {
    std::string out;
    for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
    return out + ".;1";
}

// "YYYYMMDDHHMMSScc" and the offset from GMT (ECMA-119 8.4.26.1).
std::string long_date(const std::tm& t) {
    char s[64];
    std::snprintf(s, sizeof s, "%04d%02d%02d%02d%02d%02d00", t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour,
                  t.tm_min, t.tm_sec);
    return std::string(s).substr(0, 16) + '\0';
}

void check_names(const std::string& volume_id, const std::vector<std::pair<std::string, std::string>>& files) {
    auto plain = [](const std::string& s, const char* extra) {
        return std::all_of(s.begin(), s.end(), [&](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || std::strchr(extra, c);
        });
    };
    if (volume_id.empty() || volume_id.size() > 32 || !plain(volume_id, "_"))
        SVM_THROW("seed image: bad volume identifier \"" + volume_id + "\"");
    std::vector<std::string> ids;
    for (const auto& f : files) {
        if (f.first.empty() || f.first.size() > 64 || !plain(f.first, "-_."))
            SVM_THROW("seed image: bad file name \"" + f.first + "\"");
        ids.push_back(iso_name(f.first));
    }
    std::sort(ids.begin(), ids.end());
    if (std::adjacent_find(ids.begin(), ids.end()) != ids.end())
        SVM_THROW("seed image: two file names differ only in case or punctuation");
}

using Files = std::vector<std::pair<std::string, std::string>>;

// The root directory's sector: ".", "..", then the files (sorted by ISO
// name), each file's data in sectors of its own after it; `files_end` is
// the sector after the last file's.
std::string root_directory(const Files& sorted, const unsigned char when[7], uint32_t& files_end) {
    const std::string rr_px = entry("RR", std::string(1, 0x01)), rr_px_nm = entry("RR", std::string(1, 0x09));
    const std::string sp = entry("SP", std::string("\xbe\xef\x00", 3));
    std::string dir = record({std::string(1, '\0'), kRoot, kSector, true, sp + rr_px + px(040555, 2)}, when) +
                      record({std::string(1, '\1'), kRoot, kSector, true, rr_px + px(040555, 2)}, when);
    uint32_t next = kFirstFile;
    for (const auto& f : sorted) {
        uint32_t size = static_cast<uint32_t>(f.second.size());
        dir += record({iso_name(f.first), next, size, false,
                       rr_px_nm + entry("NM", std::string(1, '\0') + f.first) + px(0100444, 1)},
                      when);
        next += static_cast<uint32_t>((f.second.size() + kSector - 1) / kSector);
    }
    if (dir.size() > kSector) SVM_THROW("seed image: too many files for one directory sector");
    files_end = next;
    return dir;
}

// The primary volume descriptor (ECMA-119 8.4) of an image of `sectors`.
void write_primary_descriptor(std::string& img, const std::string& volume_id, uint32_t sectors, const std::tm& t,
                              const unsigned char when[7]) {
    size_t p = kPvd * kSector;
    img[p] = 1;
    img.replace(p + 1, 5, "CD001");
    img[p + 6] = 1;
    text(img, p + 8, 32, "LINUX");
    text(img, p + 40, 32, volume_id);
    both32(img, p + 80, sectors);
    both16(img, p + 120, 1), both16(img, p + 124, 1), both16(img, p + 128, kSector);
    both32(img, p + 132, 10);  // the path table: the root alone
    le32(img, p + 140, kPathL);
    be32(img, p + 148, kPathM);
    img.replace(p + 156, 34, record({std::string(1, '\0'), kRoot, kSector, true, ""}, when));
    text(img, p + 190, 128, ""), text(img, p + 318, 128, ""), text(img, p + 446, 128, "");
    text(img, p + 574, 128, "SLURM-VM");
    text(img, p + 702, 37, ""), text(img, p + 739, 37, ""), text(img, p + 776, 37, "");
    img.replace(p + 813, 17, long_date(t));
    img.replace(p + 830, 17, long_date(t));
    img.replace(p + 847, 17, std::string(16, '0') + '\0');
    img.replace(p + 864, 17, std::string(16, '0') + '\0');
    img[p + 881] = 1;
}

// The volume descriptor set terminator and the path tables (ECMA-119 9.4):
// the root, little- and big-endian.
void write_terminator_and_path_tables(std::string& img) {
    size_t p = kTerminator * kSector;
    img[p] = static_cast<char>(255);
    img.replace(p + 1, 5, "CD001");
    img[p + 6] = 1;
    p = kPathL * kSector;
    img[p] = 1, le32(img, p + 2, kRoot), le16(img, p + 6, 1);
    p = kPathM * kSector;
    img[p] = 1, be32(img, p + 2, kRoot), be16(img, p + 6, 1);
}

}  // namespace

std::string iso9660_image(const std::string& volume_id, const std::vector<std::pair<std::string, std::string>>& files,
                          std::time_t made) {
    check_names(volume_id, files);
    std::tm t{};
    ::gmtime_r(&made, &t);
    const unsigned char when[7] = {static_cast<unsigned char>(t.tm_year),
                                   static_cast<unsigned char>(t.tm_mon + 1),
                                   static_cast<unsigned char>(t.tm_mday),
                                   static_cast<unsigned char>(t.tm_hour),
                                   static_cast<unsigned char>(t.tm_min),
                                   static_cast<unsigned char>(t.tm_sec),
                                   0};
    Files sorted = files;
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return iso_name(a.first) < iso_name(b.first); });
    uint32_t files_end = 0;
    const std::string dir = root_directory(sorted, when, files_end);
    const uint32_t sectors = files_end + kPadding;
    std::string img(static_cast<size_t>(sectors) * kSector, '\0');
    write_primary_descriptor(img, volume_id, sectors, t, when);
    write_terminator_and_path_tables(img);
    img.replace(kRoot * kSector, dir.size(), dir);
    uint32_t next = kFirstFile;
    for (const auto& f : sorted) {
        img.replace(static_cast<size_t>(next) * kSector, f.second.size(), f.second);
        next += static_cast<uint32_t>((f.second.size() + kSector - 1) / kSector);
    }
    if (next != files_end) SVM_THROW("seed image: the files' sectors do not add up");
    return img;
}

}  // namespace svm
