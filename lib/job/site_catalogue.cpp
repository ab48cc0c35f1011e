#include "site_catalogue.hpp"

#include <algorithm>
#include <set>

#include "error.hpp"
#include "json.hpp"

namespace svm {

const char* vm_mode_name(VmMode m) {
    switch (m) {
    case VmMode::by_default: return "default";
    case VmMode::required: return "required";
    case VmMode::optional: break;
    }
    return "optional";
}

const CatalogueImage* SiteCatalogue::find_image(const std::string& name) const {
    for (const auto& i : images)
        if (i.name == name) return &i;
    return nullptr;
}

const PartitionPolicy* SiteCatalogue::find_partition(const std::string& name) const {
    for (const auto& p : partitions)
        if (p.name == name) return &p;
    return nullptr;
}

bool is_catalogue_name(const std::string& v) {
    if (v.empty() || v.size() > 64 || v == kNoVmImage) return false;
    if (v[0] == '.' || v[0] == '-') return false;
    for (char c : v) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                  c == '-' || c == '+';
        if (!ok) return false;
    }
    return true;
}

std::vector<std::string> split_partitions(const std::string& list) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        std::string p = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (!p.empty()) out.push_back(p);
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return out;
}

std::string partition_from_args(const std::vector<std::string>& args) {
    std::string v;
    for (size_t i = 1; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--") break;
        if ((a == "-p" || a == "--partition") && i + 1 < args.size()) v = args[++i];
        else if (a.rfind("--partition=", 0) == 0) v = a.substr(12);
        else if (a.size() > 2 && a.rfind("-p", 0) == 0) v = a.substr(2);
    }
    return v;
}

namespace {

void reject_unknown_keys(const json_t* obj, const std::set<std::string>& known, const std::string& where) {
    const char* key;
    json_t* v;
    json_object_foreach(const_cast<json_t*>(obj), key, v) {
        (void)v;
        if (!known.count(key)) SVM_THROW(where + ": unknown key \"" + key + "\"");
    }
}

std::string absolute_or_empty(const json_t* o, const char* key, const std::string& where) {
    std::string v = json_get_string(o, key).value_or("");
    if (!v.empty() && v[0] != '/') SVM_THROW(where + "." + key + " must be an absolute path, not \"" + v + "\"");
    return v;
}

}  // namespace

SiteCatalogue parse_site_catalogue(const json_t* images, const json_t* partitions) {
    SiteCatalogue cat;
    if (images && !json_is_null(images)) {
        if (!json_is_object(images)) SVM_THROW("\"images\" must be an object of NAME: {\"path\": ...}");
        const char* name;
        json_t* e;
        json_object_foreach(const_cast<json_t*>(images), name, e) {
            std::string where = std::string("images.") + name;
            if (!is_catalogue_name(name))
                SVM_THROW(where +
                          ": an image name is letters, digits, '.', '_', '-' or '+' (at most 64, not "
                          "\"none\", not starting with '.' or '-')");
            if (!json_is_object(e)) SVM_THROW(where + " must be an object");
            reject_unknown_keys(e, {"path", "description", "kernel", "initrd", "cmdline", "comment"}, where);
            CatalogueImage img;
            img.name = name;
            img.path = absolute_or_empty(e, "path", where);
            if (img.path.empty()) SVM_THROW(where + " needs \"path\" (the disk image on the nodes)");
            img.description = json_get_string(e, "description").value_or("");
            img.kernel = absolute_or_empty(e, "kernel", where);
            img.initrd = absolute_or_empty(e, "initrd", where);
            img.cmdline = json_get_string(e, "cmdline").value_or("");
            if (!img.initrd.empty() && img.kernel.empty()) SVM_THROW(where + ": \"initrd\" needs \"kernel\"");
            if (img.cmdline.find('\n') != std::string::npos || img.description.find('\n') != std::string::npos)
                SVM_THROW(where + ": \"cmdline\" and \"description\" must be single lines");
            cat.images.push_back(img);
        }
    }
    if (partitions && !json_is_null(partitions)) {
        if (!json_is_object(partitions)) SVM_THROW("\"partitions\" must be an object of PARTITION: {\"vm\": ...}");
        const char* name;
        json_t* e;
        json_object_foreach(const_cast<json_t*>(partitions), name, e) {
            std::string where = std::string("partitions.") + name;
            if (!json_is_object(e)) SVM_THROW(where + " must be an object");
            reject_unknown_keys(e, {"vm", "image", "comment"}, where);
            PartitionPolicy p;
            p.name = name;
            std::string mode = json_get_string(e, "vm").value_or("optional");
            if (mode == "optional") p.mode = VmMode::optional;
            else if (mode == "default") p.mode = VmMode::by_default;
            else if (mode == "required") p.mode = VmMode::required;
            else SVM_THROW(where + ".vm must be \"optional\", \"default\" or \"required\", not \"" + mode + "\"");
            p.image = json_get_string(e, "image").value_or("");
            if (p.mode != VmMode::optional && p.image.empty())
                SVM_THROW(where + ": VM mode \"" + mode +
                          "\" needs \"image\" (the catalogue image of jobs that name none)");
            if (!p.image.empty() && !cat.find_image(p.image))
                SVM_THROW(where + ".image \"" + p.image + "\" is not in \"images\"");
            cat.partitions.push_back(p);
        }
    }
    std::sort(cat.images.begin(), cat.images.end(), [](auto& a, auto& b) { return a.name < b.name; });
    std::sort(cat.partitions.begin(), cat.partitions.end(), [](auto& a, auto& b) { return a.name < b.name; });
    return cat;
}

VmChoice choose_vm(const SiteCatalogue& cat, const std::string& requested, const std::vector<std::string>& partitions) {
    VmChoice c;
    // The partitions' policies (a job that lists several runs in one of them:
    // the strictest decides at submit, the node knows which one it is).
    const PartitionPolicy* strict = nullptr;
    for (const auto& name : partitions) {
        const PartitionPolicy* p = cat.find_partition(name);
        if (!p || p->mode == VmMode::optional) continue;
        if (!strict || (p->mode == VmMode::required && strict->mode != VmMode::required)) strict = p;
    }
    auto use_entry = [&](const CatalogueImage& img) {
        c.vm = true;
        c.image_name = img.name;
        c.image = img.path;
        c.kernel = img.kernel;
        c.initrd = img.initrd;
        c.cmdline = img.cmdline;
    };
    if (requested == kNoVmImage) {
        if (strict && strict->mode == VmMode::required)
            c.refusal = "partition " + strict->name + " runs every job in a virtual machine, so --vm-image=none " +
                        "is refused there: drop it (the partition's image is " + strict->image +
                        ") or submit to another partition";
        return c;  // on the host
    }
    if (requested.empty()) {
        if (strict) {
            const CatalogueImage* img = cat.find_image(strict->image);
            if (img) use_entry(*img);  // parse_site_catalogue guarantees it
        }
        return c;
    }
    if (requested.find('/') == std::string::npos) {
        if (const CatalogueImage* img = cat.find_image(requested)) {
            use_entry(*img);
            return c;
        }
        c.refusal = "--vm-image=" + requested + " is not an image of this site's catalogue (`slurm-vm images` " +
                    "lists them; a file in the current directory is ./" + requested + ")";
        return c;
    }
    c.vm = true;
    c.image = requested;
    return c;
}

std::string format_catalogue(const SiteCatalogue& cat) {
    if (cat.images.empty()) return "This site's slurm-vm configuration lists no images (--vm-image takes a path).\n";
    size_t w = 4;
    for (const auto& i : cat.images) w = std::max(w, i.name.size());
    std::string out = "NAME" + std::string(w - 4 + 2, ' ') + "IMAGE\n";
    for (const auto& i : cat.images) {
        out += i.name + std::string(w - i.name.size() + 2, ' ') + i.path + "\n";
        if (!i.description.empty()) out += std::string(w + 2, ' ') + i.description + "\n";
        if (!i.kernel.empty()) out += std::string(w + 2, ' ') + "kernel " + i.kernel + "\n";
    }
    bool any = false;
    for (const auto& p : cat.partitions) {
        if (p.mode == VmMode::optional) continue;
        if (!any) out += "\nPartitions that run jobs in a virtual machine:\n";
        any = true;
        out += "  " + p.name + ": " +
               (p.mode == VmMode::required ? "always (--vm-image=none is refused)"
                                           : "by default (--vm-image=none runs on the host)") +
               "; image " + p.image + " unless the job names one\n";
    }
    return out;
}

std::string catalogue_json(const SiteCatalogue& cat) {
    Json root(json_object());
    json_t* imgs = json_object();
    for (const auto& i : cat.images) {
        json_t* e = json_object();
        json_object_set_new(e, "path", json_string(i.path.c_str()));
        if (!i.description.empty()) json_object_set_new(e, "description", json_string(i.description.c_str()));
        if (!i.kernel.empty()) json_object_set_new(e, "kernel", json_string(i.kernel.c_str()));
        if (!i.initrd.empty()) json_object_set_new(e, "initrd", json_string(i.initrd.c_str()));
        if (!i.cmdline.empty()) json_object_set_new(e, "cmdline", json_string(i.cmdline.c_str()));
        json_object_set_new(imgs, i.name.c_str(), e);
    }
    json_object_set_new(root.get(), "images", imgs);
    json_t* parts = json_object();
    for (const auto& p : cat.partitions) {
        json_t* e = json_object();
        json_object_set_new(e, "vm", json_string(vm_mode_name(p.mode)));
        if (!p.image.empty()) json_object_set_new(e, "image", json_string(p.image.c_str()));
        json_object_set_new(parts, p.name.c_str(), e);
    }
    json_object_set_new(root.get(), "partitions", parts);
    return json_dump(root.get(), true);
}

}  // namespace svm
