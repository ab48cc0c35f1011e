#include "oci_image.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <fstream>

#include "deadline.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "json.hpp"
#include "log.hpp"
#include "proc.hpp"

namespace svm {

namespace {

std::string strip_scheme(const std::string& v) {
    for (const char* p : {"docker://", "oci://"})
        if (v.rfind(p, 0) == 0) return v.substr(std::string(p).size());
    return "";
}

bool is_hex64(const std::string& s) {
    return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// "registry/repo:tag" or "registry/repo@sha256:..." -> "registry/repo".
std::string repository_of(const std::string& rest) {
    auto at = rest.find('@');
    if (at != std::string::npos) return rest.substr(0, at);
    auto slash = rest.rfind('/');
    auto colon = rest.rfind(':');
    if (colon != std::string::npos && colon > slash) return rest.substr(0, colon);
    return rest;
}

bool insecure(const OciSettings& s, const std::string& ref) {
    std::string reg = registry_of(ref);
    return std::find(s.insecure_registries.begin(), s.insecure_registries.end(), reg) != s.insecure_registries.end();
}

uint64_t tree_bytes(const std::string& dir) {
    uint64_t total = 0;
    for (const auto& n : list_dir(dir)) {
        struct stat st {};
        if (::lstat(path_join(dir, n).c_str(), &st) == 0 && S_ISREG(st.st_mode))
            total += static_cast<uint64_t>(st.st_blocks) * 512;
    }
    return total;
}

std::string first_line(const std::string& s) {
    std::string t = trim(s);
    auto nl = t.rfind('\n');
    t = nl == std::string::npos ? t : t.substr(nl + 1);
    return t.size() > 300 ? t.substr(0, 300) + "..." : t;
}

// argv run under coreutils' timeout in a process group of its own, all of
// which is killed at the deadline (a pipeline's decompressor and tar too,
// not only the shell that run() would kill).
std::vector<std::string> bounded(int timeout_ms, std::vector<std::string> argv) {
    std::vector<std::string> out = {"/usr/bin/timeout", "-s", "KILL", std::to_string(std::max(1, timeout_ms / 1000))};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
}
RunOptions with_timeout(RunOptions o, int timeout_ms) {
    o.timeout_ms = timeout_ms + 10000;  // timeout(1) kills first
    return o;
}
bool timed_out(const RunResult& r) { return r.timed_out || r.status == 124 || r.status == 128 + SIGKILL; }

}  // namespace

std::string skopeo_message(const std::string& err) {
    std::string line = trim(err);
    auto nl = line.rfind('\n');
    if (nl != std::string::npos) line = line.substr(nl + 1);
    auto m = line.find("msg=\"");
    if (m != std::string::npos) {
        std::string out;
        for (size_t i = m + 5; i < line.size() && line[i] != '"'; ++i) {
            if (line[i] == '\\' && i + 1 < line.size()) ++i;
            out += line[i];
        }
        line = out;
    }
    return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

bool is_registry_ref(const std::string& value) {
    return !strip_scheme(value).empty() || value == "docker://" || value == "oci://";
}

std::string registry_of(const std::string& value) {
    std::string rest = strip_scheme(value);
    return rest.substr(0, rest.find('/'));
}

std::string skopeo_ref(const std::string& value) {
    std::string rest = strip_scheme(value);
    bool ok = !rest.empty() && rest.size() <= 512 && rest.find('/') != std::string::npos && rest[0] != '/' &&
              rest.find("..") == std::string::npos && rest.find("//") == std::string::npos && rest.back() != '/';
    for (char c : rest)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
              c == '_' || c == '/' || c == ':' || c == '@'))
            ok = false;
    if (!ok)
        SVM_THROW("--vm-image=" + value +
                  " is not a registry image reference (docker://HOST[:PORT]/REPO[:TAG] or "
                  "oci://...)");
    auto at = rest.find('@');
    if (at != std::string::npos && (rest.compare(at + 1, 7, "sha256:") != 0 || !is_hex64(rest.substr(at + 8))))
        SVM_THROW("--vm-image=" + value + ": a digest reference is @sha256:<64 hex digits>");
    return "docker://" + rest;
}

namespace {

// The decompressor a layer blob needs, by its first bytes (OCI layers are
// tar, tar+gzip or tar+zstd).
std::string layer_codec(const std::string& blob) {
    UniqueFd fd(::open(blob.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    unsigned char m[4] = {0, 0, 0, 0};
    if (!fd || ::read(fd.get(), m, sizeof m) < 2) return "plain";
    if (m[0] == 0x1f && m[1] == 0x8b) return "gzip";
    if (m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd) return "zstd";
    return "plain";
}

// One pass over the layer, streamed and bounded: the decompressed bytes are
// counted (at most max_bytes + 1 are read), tar lists them into `listing`
// (at most max_entries + 1 lines, 64 MiB). Throws one sentence past a bound.
void list_layer(const std::string& blob, const std::string& listing, const LayerBounds& b) {
    static const char* script = R"(set -o pipefail
dec() { case "$1" in gzip) gzip -dc ;; zstd) zstd -dcq ;; *) cat ;; esac; }
dec "$1" < "$2" | head -c "$3" |
  tee -p >(tar -tvf - 2> >(head -c 65536 > "$5.err") | head -n "$4" | head -c 67108864 > "$5"; echo "${PIPESTATUS[0]}" > "$5.rc") |
  wc -c
rc=$?; wait $!; exit $rc)";
    RunResult r =
        run(bounded(b.timeout_ms, {"/bin/bash", "-c", script, "sh", layer_codec(blob), blob,
                                   std::to_string(b.max_bytes + 1), std::to_string(b.max_entries + 1), listing}),
            with_timeout({}, b.timeout_ms));
    if (timed_out(r))
        SVM_THROW("a layer of the image could not be read within " + std::to_string(b.timeout_ms / 1000) + " s");
    if (std::stoull("0" + trim(r.out)) > b.max_bytes)
        SVM_THROW("a layer of the image decompresses to more than " + std::to_string(b.max_bytes >> 20) +
                  " MiB, this node's bound (oci.max_layer_gib)");
    if (!r.ok()) SVM_THROW("a layer of the image cannot be decompressed: " + first_line(r.err));
    size_t lines = 0;
    {
        std::ifstream in(listing);
        for (std::string line; std::getline(in, line);) ++lines;
    }
    if (lines > b.max_entries)
        SVM_THROW("a layer of the image holds more than " + std::to_string(b.max_entries) +
                  " entries, this node's bound (oci.max_layer_entries)");
    std::string rc, err;
    read_file_if_exists(listing + ".rc", rc);
    read_file_if_exists(listing + ".err", err);
    if (trim(rc) != "0") SVM_THROW("a layer of the image is not a tar archive: " + first_line(err.substr(0, 4096)));
}

// The disk member named by one line of `tar -tvf`, "" for any other line:
// "-rw-r--r-- 107/107 123 2024-01-01 00:00 disk/disk.img", a regular file.
std::string disk_member_of(const std::string& line) {
    if (line.empty() || line[0] != '-') return "";
    auto sp = line.find(" disk/");
    if (sp == std::string::npos) sp = line.find(" ./disk/");
    if (sp == std::string::npos) sp = line.find(" /disk/");
    if (sp == std::string::npos) return "";
    std::string name = line.substr(sp + 1);
    std::string tail = name.substr(name.find("disk/") + 5);
    if (tail.empty() || tail.find('/') != std::string::npos || tail.find(" -> ") != std::string::npos) return "";
    return name;
}

}  // namespace

DiskMember find_disk_member(const std::string& layout_dir, const LayerBounds& bounds) {
    auto blob_path = [&](const std::string& digest) {
        if (digest.rfind("sha256:", 0) != 0 || !is_hex64(digest.substr(7)))
            SVM_THROW("the image's layout names a blob that is not sha256:<hex> (" + digest + ")");
        return path_join(layout_dir, "blobs/sha256/" + digest.substr(7));
    };
    Json index = json_parse(read_file(path_join(layout_dir, "index.json")), "index.json");
    json_t* ms = json_object_get(index.get(), "manifests");
    if (!json_is_array(ms) || json_array_size(ms) < 1) SVM_THROW("the image has no manifest");
    std::string mdigest = json_get_string(json_array_get(ms, 0), "digest").value_or("");
    Json manifest = json_parse(read_file(blob_path(mdigest)), "the image manifest");
    json_t* layers = json_object_get(manifest.get(), "layers");
    if (!json_is_array(layers) || json_array_size(layers) == 0) SVM_THROW("the image has no layers");
    std::string listing = path_join(layout_dir, ".listing");
    for (size_t i = json_array_size(layers); i-- > 0;) {
        std::string blob = blob_path(json_get_string(json_array_get(layers, i), "digest").value_or(""));
        list_layer(blob, listing, bounds);
        std::string found;
        std::ifstream in(listing);
        for (std::string line; std::getline(in, line);)
            if (std::string m = disk_member_of(line); !m.empty()) found = m;
        if (!found.empty()) return {blob, found};
    }
    SVM_THROW("the image holds no disk file under /disk/ (package the qcow2 as KubeVirt's containerDisk does)");
}

std::string oci_cache_entry_of(const OciSettings& s, const std::string& disk_path) {
    std::string prefix = s.cache_dir + "/";
    if (disk_path.rfind(prefix, 0) != 0) return "";
    std::string rest = disk_path.substr(prefix.size());
    auto slash = rest.find('/');
    return slash == std::string::npos ? "" : path_join(s.cache_dir, rest.substr(0, slash));
}

std::vector<std::string> prune_oci_cache(const std::string& cache_dir, uint64_t max_bytes,
                                         const std::set<std::string>& in_use, const std::string& keep) {
    struct Entry {
        std::string dir;
        time_t used;
        uint64_t bytes;
    };
    std::vector<Entry> entries;
    uint64_t total = 0;
    for (const auto& n : list_dir(cache_dir)) {
        if (n.empty() || n[0] == '.') continue;
        std::string d = path_join(cache_dir, n);
        struct stat st {};
        if (::stat(path_join(d, "used").c_str(), &st) != 0 && ::stat(d.c_str(), &st) != 0) continue;
        Entry e{d, st.st_mtime, tree_bytes(d)};
        total += e.bytes;
        entries.push_back(e);
    }
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
    std::vector<std::string> removed;
    for (const auto& e : entries) {
        if (total <= max_bytes) break;
        if (in_use.count(e.dir) || e.dir == keep) continue;
        remove_tree(e.dir);
        total -= std::min(total, e.bytes);
        removed.push_back(e.dir);
    }
    return removed;
}

namespace {

// An exclusive lock on path, waited for until `deadline`; false when the
// deadline passed first.
bool lock_until(UniqueFd& fd, const std::string& path, const Deadline& deadline) {
    fd = UniqueFd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) SVM_THROW_ERRNO("open lock " + path);
    return poll_until(deadline, Milliseconds(100), [&] {
        if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return true;
        if (errno != EWOULDBLOCK && errno != EINTR) SVM_THROW_ERRNO("lock " + path);
        return false;
    });
}

// What a pull may still write into the cache's file system: its free space
// less the reserve kept for the node (overlays, logs), at most `cap`.
uint64_t room_for_pull(const OciSettings& s, uint64_t cap) {
    struct statvfs v {};
    if (::statvfs(s.cache_dir.c_str(), &v) != 0) SVM_THROW_ERRNO("statvfs " + s.cache_dir);
    uint64_t avail = static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
    return std::min(cap, avail > s.reserve_bytes ? avail - s.reserve_bytes : 0);
}

[[noreturn]] void pull_timed_out(const std::string& ref, const OciSettings& s) {
    SVM_THROW("--vm-image=" + ref + " could not be pulled within " + std::to_string(s.timeout_s) + " s");
}

int remaining_ms(const Deadline& deadline, const std::string& ref, const OciSettings& s) {
    if (deadline.expired()) pull_timed_out(ref, s);
    return deadline.remaining_ms();
}

// skopeo copy of the digest into tmp/layout, each file it writes bounded by
// `room` (RLIMIT_FSIZE), then the disk extracted to tmp/disk.img, bounded
// by what is left; both within the deadline.
void pull_into(const OciSettings& s, const std::string& ref, const std::string& sref, const std::string& digest,
               const std::string& tmp, RunOptions o, const Deadline& deadline) {
    uint64_t cap = s.cache_max_bytes > 0 ? s.cache_max_bytes : (1ULL << 40), room = room_for_pull(s, cap);
    auto too_large = [&](uint64_t bound) {
        return "--vm-image=" + ref + ": the image is larger than " +
               (bound < cap ? "the " + std::to_string(bound >> 20) +
                                  " MiB this node has free for registry images now "
                                  "(resubmit, or use a smaller image)"
                            : "this node's registry cache (" + std::to_string(cap >> 20) + " MiB)");
    };
    std::vector<std::string> copy = {"/bin/bash",
                                     "-c",
                                     "ulimit -f \"$1\" && shift && exec \"$@\"",
                                     "sh",
                                     std::to_string(room / 1024),
                                     s.skopeo,
                                     "--insecure-policy",
                                     "copy",
                                     "--quiet",
                                     "--src-no-creds"};
    if (insecure(s, ref)) copy.push_back("--src-tls-verify=false");
    copy.push_back("docker://" + repository_of(sref.substr(9)) + "@" + digest);
    copy.push_back("oci:" + path_join(tmp, "layout") + ":disk");
    int left = remaining_ms(deadline, ref, s);
    RunResult r = run(bounded(left, copy), with_timeout(o, left));
    if (r.status == 128 + SIGXFSZ || r.err.find("file too large") != std::string::npos) SVM_THROW(too_large(room));
    if (timed_out(r)) pull_timed_out(ref, s);
    if (!r.ok()) SVM_THROW("--vm-image=" + ref + " could not be pulled: " + skopeo_message(r.err));
    LayerBounds b{std::min(s.max_layer_bytes, cap), s.max_layer_entries, remaining_ms(deadline, ref, s)};
    DiskMember m = find_disk_member(path_join(tmp, "layout"), b);
    std::string out = path_join(tmp, "disk.img");
    uint64_t limit = room_for_pull(s, cap);
    left = remaining_ms(deadline, ref, s);
    r = run(bounded(left, {"/bin/bash", "-c", "set -o pipefail; tar -xO -f \"$1\" -- \"$2\" | head -c \"$4\" > \"$3\"",
                           "sh", m.blob, m.member, out, std::to_string(limit + 1)}),
            with_timeout(o, left));
    struct stat st {};
    if (::stat(out.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) > limit) SVM_THROW(too_large(limit));
    if (timed_out(r)) pull_timed_out(ref, s);
    if (!r.ok()) SVM_THROW("--vm-image=" + ref + ": " + m.member + " could not be extracted: " + first_line(r.err));
    if (::stat(out.c_str(), &st) != 0 || st.st_size == 0)
        SVM_THROW("--vm-image=" + ref + ": " + m.member + " is empty");
    remove_tree(path_join(tmp, "layout"));
}

}  // namespace

CachedOciImage pull_oci_disk(const OciSettings& s, const std::string& ref, const std::set<std::string>& in_use) {
    const Deadline deadline{Milliseconds(s.timeout_s * 1000L)};
    std::string sref = skopeo_ref(ref);
    if (::access(s.skopeo.c_str(), X_OK) != 0)
        SVM_THROW("this node cannot pull registry images (no skopeo at " + s.skopeo + ")");
    mkdir_p(s.cache_dir, 0755);
    ::chmod(s.cache_dir.c_str(), 0755);
    std::string tmp_home = path_join(s.cache_dir, ".home");
    mkdir_p(tmp_home, 0700);
    RunOptions o;
    o.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + tmp_home, "TMPDIR=" + s.cache_dir,
             "XDG_RUNTIME_DIR=" + tmp_home, "REGISTRY_AUTH_FILE=" + path_join(tmp_home, "auth.json")};
    o.timeout_ms = std::min(120000, remaining_ms(deadline, ref, s));
    // Root's pulls use no credentials (an admin's login on the node must not
    // lend its private registries to every user's --vm-image).
    std::vector<std::string> inspect = {s.skopeo,    "--insecure-policy", "inspect",    "--no-creds",
                                        "--no-tags", "--format",          "{{.Digest}}"};
    if (insecure(s, ref)) inspect.push_back("--tls-verify=false");
    inspect.push_back(sref);
    RunResult r = run(inspect, o);
    if (!r.ok()) SVM_THROW("--vm-image=" + ref + " cannot be found in its registry: " + skopeo_message(r.err));
    std::string digest = trim(r.out);
    if (digest.rfind("sha256:", 0) != 0 || !is_hex64(digest.substr(7)))
        SVM_THROW("--vm-image=" + ref + ": the registry answered no sha256 manifest digest (" + first_line(digest) +
                  ")");
    std::string entry = path_join(s.cache_dir, digest.substr(7)), disk = path_join(entry, "disk.img");
    // One pull per image at a time (jobs of other images do not wait);
    // a job waits for another's pull of its image until its own deadline.
    UniqueFd image_lock, cache_lock;
    if (!lock_until(image_lock, path_join(s.cache_dir, ".lock-" + digest.substr(7, 16)), deadline))
        SVM_THROW("--vm-image=" + ref + ": this node is still pulling the image for another job after " +
                  std::to_string(s.timeout_s) + " s; resubmit the job");
    if (!path_exists(disk)) {
        std::string tmp = path_join(s.cache_dir, ".pull-" + digest.substr(7, 16) + "-" + std::to_string(::getpid()));
        remove_tree(tmp);
        mkdir_p(tmp, 0700);
        try {
            pull_into(s, ref, sref, digest, tmp, o, deadline);
            write_file_atomic(path_join(tmp, "digest"), digest + "\n", 0644);
            write_file_atomic(path_join(tmp, "ref"), ref + "\n", 0644);
            ::chmod(path_join(tmp, "disk.img").c_str(), 0644);
            ::chmod(tmp.c_str(), 0755);
            remove_tree(entry);
            if (::rename(tmp.c_str(), entry.c_str()) != 0) SVM_THROW_ERRNO("rename " + tmp + " to " + entry);
            log::info("pulled " + ref + " (" + digest + ") into " + entry);
        } catch (...) {
            remove_tree(tmp);
            throw;
        }
    }
    // The cache's bound, kept by one job at a time (brief: no pull inside).
    if (!lock_until(cache_lock, path_join(s.cache_dir, ".lock"), Deadline(Milliseconds(60000))))
        SVM_THROW("--vm-image=" + ref + ": this node's registry cache stayed locked for 60 s; resubmit the job");
    write_file_atomic(path_join(entry, "used"), std::to_string(::time(nullptr)) + "\n", 0644);
    for (const auto& d : prune_oci_cache(s.cache_dir, s.cache_max_bytes, in_use, entry))
        log::info("registry cache: removed " + d + " (least recently used)");
    return {disk, digest};
}

}  // namespace svm
