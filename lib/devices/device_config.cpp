#include "device_config.hpp"

#include <set>

#include "device_schema.hpp"  // generated: etc/slurm-vm.devices.schema.json as a string
#include "error.hpp"
#include "json_schema.hpp"

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

const json_t* device_config_schema() {
    static const Json schema = json_parse(kDevicesSchema, "slurm-vm.devices.schema.json");
    return schema.get();
}

namespace {

// The schema has checked each address' form, and the ranges.
void read_gpus(const json_t* gpus, DeviceConfig& c) {
    size_t i;
    json_t* g;
    json_array_foreach(gpus, i, g) {
        GpuConfig gc;
        gc.pci = PciAddress::parse(json_string_value(json_object_get(g, "pci")));
        if (const json_t* m = json_object_get(g, "nvidia_minor"))
            gc.nvidia_minor = static_cast<int>(json_integer_value(m));
        if (const json_t* v = json_object_get(g, "vfio_group")) gc.vfio_group = static_cast<int>(json_integer_value(v));
        c.gpus.push_back(gc);
    }
}

void read_vf_providers(const json_t* pfs, DeviceConfig& c) {
    size_t i;
    json_t* p;
    json_array_foreach(pfs, i, p) {
        VfProviderConfig pc;
        pc.pci = PciAddress::parse(json_string_value(json_object_get(p, "pci")));
        read_valid(p, "link_layer", pc.link_layer);
        c.vf_providers.push_back(pc);
    }
}

// What the schema cannot say: a PCI function is listed once, in either list
// and whichever form its address is written in, and so is an nvidia minor.
void check_listed_once(const DeviceConfig& c) {
    std::set<std::string> seen;
    std::set<int> minors;
    for (size_t i = 0; i < c.gpus.size(); ++i) {
        std::string where = "devices.gpus[" + std::to_string(i) + "]: ";
        if (!seen.insert(c.gpus[i].pci.str()).second) SVM_THROW(where + c.gpus[i].pci.str() + " listed twice");
        if (auto m = c.gpus[i].nvidia_minor; m && !minors.insert(*m).second)
            SVM_THROW(where + "nvidia_minor " + std::to_string(*m) + " listed twice");
    }
    for (size_t i = 0; i < c.vf_providers.size(); ++i)
        if (!seen.insert(c.vf_providers[i].pci.str()).second)
            SVM_THROW("devices.vf_providers[" + std::to_string(i) + "]: " + c.vf_providers[i].pci.str() +
                      " listed twice");
}

}  // namespace

DeviceConfig parse_device_config(const json_t* devices) {
    DeviceConfig c;
    if (!devices || json_is_null(devices)) return c;
    validate_json(devices, device_config_schema(), nullptr, "devices");
    read_gpus(json_object_get(devices, "gpus"), c);
    read_vf_providers(json_object_get(devices, "vf_providers"), c);
    check_listed_once(c);
    read_valid(devices, "guid_prefix", c.guid_prefix);
    int64_t node_id = -1;
    read_valid(devices, "node_id", node_id);
    if (node_id >= 0) c.node_id = static_cast<int>(node_id);
    const json_t* policy = json_object_get(devices, "policy");
    read_valid(policy, "allow_unsafe_interrupts", c.policy.allow_unsafe_interrupts);
    read_valid(policy, "allow_no_reset", c.policy.allow_no_reset);
    read_valid(devices, "vf_state_dir", c.vf_state_dir);
    read_valid(devices, "unbind_timeout_s", c.unbind_timeout_s);
    read_valid(devices, "emulated_kernel", c.emulated_kernel);
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
