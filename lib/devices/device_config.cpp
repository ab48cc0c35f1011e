#include "device_config.hpp"

#include <cctype>
#include <set>

#include "error.hpp"

namespace svm {

const GpuConfig* DeviceConfig::gpu_by_minor(int minor) const {
    for (const auto& g : gpus)
        if (g.nvidia_minor && *g.nvidia_minor == minor) return &g;
    return nullptr;
}

const GpuConfig* DeviceConfig::gpu_by_pci(const PciAddress& a) const {
    for (const auto& g : gpus)
        if (g.pci == a) return &g;
    return nullptr;
}

namespace {

void check_keys(const json_t* obj, const std::set<std::string>& allowed, const std::string& where) {
    const char* key;
    json_t* v;
    json_object_foreach(const_cast<json_t*>(obj), key, v) {
        (void)v;
        if (!allowed.count(key)) SVM_THROW(where + ": unknown key \"" + key + "\"");
    }
}

PciAddress get_pci(const json_t* obj, const std::string& where) {
    auto s = json_get_string(obj, "pci");
    if (!s) SVM_THROW(where + ": \"pci\" missing");
    return PciAddress::parse(*s);
}

bool valid_guid_prefix(const std::string& s) {
    if (s.size() != 11) return false;
    for (size_t i = 0; i < s.size(); ++i) {
        if (i % 3 == 2) {
            if (s[i] != ':') return false;
        } else if (!std::isxdigit(static_cast<unsigned char>(s[i]))) {
            return false;
        }
    }
    return true;
}

}  // namespace

DeviceConfig parse_device_config(const json_t* devices) {
    DeviceConfig c;
    if (!devices || json_is_null(devices)) return c;
    try {
        if (!json_is_object(devices)) SVM_THROW("must be an object");
        check_keys(devices,
                   {"gpus", "vf_providers", "guid_prefix", "node_id", "policy", "vf_state_dir", "unbind_timeout_s",
                    "emulated_kernel"},
                   "devices");
        std::set<std::string> seen;
        if (json_t* gpus = json_object_get(devices, "gpus")) {
            if (!json_is_array(gpus)) SVM_THROW("\"gpus\" must be an array");
            size_t i;
            json_t* g;
            json_array_foreach(gpus, i, g) {
                std::string where = "gpus[" + std::to_string(i) + "]";
                if (!json_is_object(g)) SVM_THROW(where + " must be an object");
                check_keys(g, {"pci", "nvidia_minor", "vfio_group"}, where);
                GpuConfig gc;
                try {
                    gc.pci = get_pci(g, where);
                    if (auto m = json_get_int(g, "nvidia_minor")) {
                        if (*m < 0 || *m > 255) SVM_THROW("\"nvidia_minor\" must be 0..255");
                        gc.nvidia_minor = static_cast<int>(*m);
                    }
                    if (auto v = json_get_int(g, "vfio_group")) {
                        if (*v < 0) SVM_THROW("\"vfio_group\" must be >= 0");
                        gc.vfio_group = static_cast<int>(*v);
                    }
                } catch (Error& e) {
                    SVM_CONTEXT(e, where);
                    throw;
                }
                if (!seen.insert(gc.pci.str()).second) SVM_THROW(where + ": " + gc.pci.str() + " listed twice");
                if (gc.nvidia_minor && c.gpu_by_minor(*gc.nvidia_minor))
                    SVM_THROW(where + ": nvidia_minor " + std::to_string(*gc.nvidia_minor) + " listed twice");
                c.gpus.push_back(gc);
            }
        }
        if (json_t* pfs = json_object_get(devices, "vf_providers")) {
            if (!json_is_array(pfs)) SVM_THROW("\"vf_providers\" must be an array");
            size_t i;
            json_t* p;
            json_array_foreach(pfs, i, p) {
                std::string where = "vf_providers[" + std::to_string(i) + "]";
                if (!json_is_object(p)) SVM_THROW(where + " must be an object");
                check_keys(p, {"pci", "link_layer"}, where);
                VfProviderConfig pc;
                try {
                    pc.pci = get_pci(p, where);
                    pc.link_layer = json_get_string(p, "link_layer").value_or("");
                    if (!pc.link_layer.empty() && pc.link_layer != "infiniband" && pc.link_layer != "ethernet")
                        SVM_THROW("\"link_layer\" must be \"infiniband\" or \"ethernet\", not \"" + pc.link_layer +
                                  "\"");
                } catch (Error& e) {
                    SVM_CONTEXT(e, where);
                    throw;
                }
                if (!seen.insert(pc.pci.str()).second) SVM_THROW(where + ": " + pc.pci.str() + " listed twice");
                c.vf_providers.push_back(pc);
            }
        }
        if (auto p = json_get_string(devices, "guid_prefix")) {
            if (!valid_guid_prefix(*p))
                SVM_THROW("\"guid_prefix\" must be 4 hex bytes like \"02:c9:00:00\", not \"" + *p + "\"");
            c.guid_prefix = *p;
        }
        if (auto n = json_get_int(devices, "node_id")) {
            if (*n < 0 || *n > 0xffff) SVM_THROW("\"node_id\" must be 0..65535");
            c.node_id = static_cast<int>(*n);
        }
        if (json_t* pol = json_object_get(devices, "policy")) {
            if (!json_is_object(pol)) SVM_THROW("\"policy\" must be an object");
            check_keys(pol, {"allow_unsafe_interrupts", "allow_no_reset"}, "policy");
            c.policy.allow_unsafe_interrupts = json_get_bool(pol, "allow_unsafe_interrupts").value_or(false);
            c.policy.allow_no_reset = json_get_bool(pol, "allow_no_reset").value_or(false);
        }
        if (auto d = json_get_string(devices, "vf_state_dir")) {
            if (d->empty() || (*d)[0] != '/') SVM_THROW("\"vf_state_dir\" must be an absolute path");
            c.vf_state_dir = *d;
        }
        if (auto t = json_get_int(devices, "unbind_timeout_s")) {
            if (*t < 0 || *t > 3600) SVM_THROW("\"unbind_timeout_s\" must be 0..3600");
            c.unbind_timeout_s = static_cast<int>(*t);
        }
        if (auto k = json_get_string(devices, "emulated_kernel")) {
            if (k->empty() || (*k)[0] != '/') SVM_THROW("\"emulated_kernel\" must be an absolute path");
            c.emulated_kernel = *k;
        }
    } catch (Error& e) {
        SVM_CONTEXT(e, "devices");
        throw;
    }
    return c;
}

DeviceConfig load_device_config(const std::string& path) {
    Json j = json_load_file(path);
    try {
        if (!json_is_object(j.get())) SVM_THROW("the configuration must be a JSON object");
        return parse_device_config(json_object_get(j.get(), "devices"));
    } catch (Error& e) {
        SVM_CONTEXT(e, path);
        throw;
    }
}

}  // namespace svm
