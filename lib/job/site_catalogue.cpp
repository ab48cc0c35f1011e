#include "site_catalogue.hpp"

#include <algorithm>

#include "error.hpp"
#include "json.hpp"
#include "json_schema.hpp"

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

SiteCatalogue parse_site_catalogue(const json_t* images, const json_t* partitions) {
    SiteCatalogue cat;
    const char* name;
    json_t* e;
    json_object_foreach(const_cast<json_t*>(images), name, e) {
        CatalogueImage img;
        img.name = name;
        read_valid(e, "path", img.path);
        read_valid(e, "description", img.description);
        read_valid(e, "kernel", img.kernel);
        read_valid(e, "initrd", img.initrd);
        read_valid(e, "cmdline", img.cmdline);
        cat.images.push_back(img);
    }
    json_object_foreach(const_cast<json_t*>(partitions), name, e) {
        PartitionPolicy p;
        p.name = name;
        std::string mode = "optional";
        read_valid(e, "vm", mode);
        p.mode = mode == "required" ? VmMode::required : mode == "default" ? VmMode::by_default : VmMode::optional;
        read_valid(e, "image", p.image);
        // The one rule across the catalogue's parts.
        if (!p.image.empty() && !cat.find_image(p.image))
            SVM_THROW("partitions." + p.name + ".image \"" + p.image + "\" is not in \"images\"");
        cat.partitions.push_back(p);
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
