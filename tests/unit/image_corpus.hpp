// A corpus of good, broken and hostile disk images for the image intake tests,
// built in a fresh 0755 directory under /tmp (so that `nobody` can traverse it)
// with qemu-img and header edits. Needs root (chown, mknod).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace svm::test {

class ImageCorpus {
public:
    ImageCorpus();   // builds everything; throws svm::Error when a tool fails
    ~ImageCorpus();  // removes the directory
    ImageCorpus(const ImageCorpus&) = delete;
    ImageCorpus& operator=(const ImageCorpus&) = delete;

    const std::string& dir() const { return dir_; }
    std::string path(const std::string& name) const { return dir_ + "/" + name; }
    // Every entry the corpus made (files, links, FIFO, socket, device, directory), by name.
    const std::vector<std::string>& names() const { return names_; }

    // The corpus built once per test run (first use builds it).
    static ImageCorpus& shared();

private:
    void build();
    // The corpus in three parts: qcow2 and raw images (good and crafted),
    // formats that are refused, and files that are not images at all.
    void build_qcow2_and_raw();
    void build_other_formats();
    void build_special_files();
    // qemu-img create -f qcow2 OPTS NAME SIZE, added to the corpus.
    void qcow2(const std::string& name, const std::vector<std::string>& opts, const std::string& size);
    void add(const std::string& name) { names_.push_back(name); }
    std::string dir_;
    std::vector<std::string> names_;
};

// Helpers for editing images in place.
void qemu_img(const std::vector<std::string>& args);
void write_bytes(const std::string& path, uint64_t off, const std::string& bytes);
std::string read_bytes(const std::string& path, uint64_t off, size_t len);
void put_be32(const std::string& path, uint64_t off, uint32_t v);
void put_be64(const std::string& path, uint64_t off, uint64_t v);
uint64_t get_be64(const std::string& path, uint64_t off);
void copy_prefix(const std::string& from, const std::string& to, uint64_t len);
void make_file(const std::string& path, const std::string& content, uint64_t size, unsigned mode = 0644);

}  // namespace svm::test
