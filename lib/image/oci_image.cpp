#include "oci_image.hpp"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

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

DiskMember find_disk_member(const std::string& layout_dir) {
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
    for (size_t i = json_array_size(layers); i-- > 0;) {
        std::string blob = blob_path(json_get_string(json_array_get(layers, i), "digest").value_or(""));
        RunResult list = run({"tar", "-tvf", blob}, RunOptions{.timeout_ms = 600000});
        if (!list.ok()) SVM_THROW("a layer of the image is not a tar archive: " + first_line(list.err));
        std::string found;
        size_t pos = 0;
        while (pos < list.out.size()) {
            size_t nl = list.out.find('\n', pos);
            std::string line = list.out.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
            pos = nl == std::string::npos ? list.out.size() : nl + 1;
            // "-rw-r--r-- 107/107 123 2024-01-01 00:00 disk/disk.img": a regular file.
            if (line.empty() || line[0] != '-') continue;
            auto sp = line.find(" disk/");
            if (sp == std::string::npos) sp = line.find(" ./disk/");
            if (sp == std::string::npos) sp = line.find(" /disk/");
            if (sp == std::string::npos) continue;
            std::string name = line.substr(sp + 1);
            std::string tail = name.substr(name.find("disk/") + 5);
            if (tail.empty() || tail.find('/') != std::string::npos || tail.find(" -> ") != std::string::npos) continue;
            found = name;
        }
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

CachedOciImage pull_oci_disk(const OciSettings& s, const std::string& ref, const std::set<std::string>& in_use) {
    std::string sref = skopeo_ref(ref);
    if (::access(s.skopeo.c_str(), X_OK) != 0)
        SVM_THROW("this node cannot pull registry images (no skopeo at " + s.skopeo + ")");
    mkdir_p(s.cache_dir, 0755);
    ::chmod(s.cache_dir.c_str(), 0755);
    std::string tmp_home = path_join(s.cache_dir, ".home");
    mkdir_p(tmp_home, 0700);
    RunOptions o;
    o.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + tmp_home, "TMPDIR=" + s.cache_dir};
    o.timeout_ms = 120000;
    std::vector<std::string> inspect = {s.skopeo,    "--insecure-policy", "inspect",
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
    {
        FileLock lock(path_join(s.cache_dir, ".lock"));
        if (!path_exists(disk)) {
            std::string tmp =
                path_join(s.cache_dir, ".pull-" + digest.substr(7, 16) + "-" + std::to_string(::getpid()));
            remove_tree(tmp);
            mkdir_p(tmp, 0700);
            try {
                std::vector<std::string> copy = {s.skopeo, "--insecure-policy", "copy", "--quiet"};
                if (insecure(s, ref)) copy.push_back("--src-tls-verify=false");
                copy.push_back("docker://" + repository_of(sref.substr(9)) + "@" + digest);
                copy.push_back("oci:" + path_join(tmp, "layout") + ":disk");
                o.timeout_ms = s.timeout_s * 1000;
                r = run(copy, o);
                if (!r.ok()) SVM_THROW("--vm-image=" + ref + " could not be pulled: " + skopeo_message(r.err));
                DiskMember m = find_disk_member(path_join(tmp, "layout"));
                std::string out = path_join(tmp, "disk.img");
                // At most the cache's bound (1 TiB when unbounded) is written,
                // whatever the layer claims or decompresses to.
                uint64_t limit = s.cache_max_bytes > 0 ? s.cache_max_bytes : (1ULL << 40);
                r = run({"/bin/bash", "-c", "set -o pipefail; tar -xO -f \"$1\" -- \"$2\" | head -c \"$4\" > \"$3\"",
                         "sh", m.blob, m.member, out, std::to_string(limit + 1)},
                        o);
                struct stat st {};
                if (::stat(out.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) > limit)
                    SVM_THROW("--vm-image=" + ref + ": its disk is larger than this node's registry cache (" +
                              std::to_string(limit >> 20) + " MiB)");
                if (!r.ok())
                    SVM_THROW("--vm-image=" + ref + ": " + m.member + " could not be extracted: " + first_line(r.err));
                if (::stat(out.c_str(), &st) != 0 || st.st_size == 0)
                    SVM_THROW("--vm-image=" + ref + ": " + m.member + " is empty");
                remove_tree(path_join(tmp, "layout"));
                ::chmod(out.c_str(), 0644);
                write_file_atomic(path_join(tmp, "digest"), digest + "\n", 0644);
                write_file_atomic(path_join(tmp, "ref"), ref + "\n", 0644);
                ::chmod(tmp.c_str(), 0755);
                remove_tree(entry);
                if (::rename(tmp.c_str(), entry.c_str()) != 0) SVM_THROW_ERRNO("rename " + tmp + " to " + entry);
                log::info("pulled " + ref + " (" + digest + ") into " + entry);
            } catch (...) {
                remove_tree(tmp);
                throw;
            }
        }
        write_file_atomic(path_join(entry, "used"), std::to_string(::time(nullptr)) + "\n", 0644);
        for (const auto& d : prune_oci_cache(s.cache_dir, s.cache_max_bytes, in_use, entry))
            log::info("registry cache: removed " + d + " (least recently used)");
    }
    return {disk, digest};
}

}  // namespace svm
