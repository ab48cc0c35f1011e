#include "inventory.hpp"

#include <algorithm>
#include <cstdio>

#include "fs.hpp"
#include "iommu_group.hpp"
#include "pci_device.hpp"

namespace svm {

static Json node_facts(const SysfsRoot& root) {
    IommuState st = read_iommu_state(root);
    JsonOut n;
    n("iommu_enabled", st.enabled);
    n("iommu_groups", st.group_count);
    n.nullable("iommu_vendor", st.vendor);
    n("cmdline_requests_iommu", st.cmdline_requests_iommu);
    n("interrupt_remapping", tristate_str(st.interrupt_remapping));
    n("allow_unsafe_interrupts", st.allow_unsafe_interrupts);
    n("vfio_pci", st.vfio_pci_available);
    std::vector<int> ids;
    for (const auto& name : list_dir(root.path("sys/devices/system/node")))
        if (name.compare(0, 4, "node") == 0 && name.size() > 4) ids.push_back(std::atoi(name.c_str() + 4));
    n.objects("numa_nodes", ids, [&](JsonOut& o, int id) {
        o("node", id);
        o("cpus", root.read_attr(root.node_cpulist(id)).value_or(""));
    });
    JsonOut huge;
    for (const auto& h : list_dir(root.path("sys/kernel/mm/hugepages"))) {
        auto v = root.read_attr(root.path("sys/kernel/mm/hugepages/" + h + "/nr_hugepages"));
        if (v) huge(h.c_str(), std::atoll(v->c_str()));
    }
    n("hugepages", huge.take());
    return n.take();
}

// One device of the inventory: its facts, the others of its IOMMU group and
// what keeps it from a guest.
static Json device_entry(const SysfsRoot& root, const PciDevice& d, const std::string& configured) {
    JsonOut j(d.to_json());
    j.nullable("configured", configured);
    std::vector<GroupMember> members;
    std::vector<std::string> problems;
    if (d.iommu_group) {
        for (const auto& m : iommu_group_details(root, *d.iommu_group)) {
            if (m.address == d.address) continue;
            members.push_back(m);
            if (!m.bridge && !m.address.same_slot(d.address) && !is_vfio_safe_driver(m.driver))
                problems.push_back("IOMMU group shared with " + m.address.str() + " (" +
                                   (m.driver.empty() ? std::string("no driver") : m.driver) + ")");
        }
    } else {
        problems.emplace_back("no IOMMU group");
    }
    if (!d.can_reset()) problems.emplace_back("no reset method");
    if (d.sriov_capable && d.sriov_numvfs == 0) problems.emplace_back("no VFs created");
    j.objects("group_members", members, [](JsonOut& o, const GroupMember& m) {
        o("address", m.address);
        o.nullable("driver", m.driver);
        o("bridge", m.bridge);
    });
    j("problems", problems);
    return j.take();
}

Json build_inventory(const SysfsRoot& root, const DeviceConfig* cfg, const InventoryOptions& opts) {
    JsonOut inv;
    inv("root", root.root());
    inv("node", node_facts(root));
    Json devs(json_array());
    for (const auto& d : scan_pci_devices(root)) {
        std::string configured;
        if (cfg && cfg->gpu_by_pci(d.address)) configured = "gpu";
        if (cfg)
            for (const auto& p : cfg->vf_providers)
                if (p.pci == d.address) configured = "vf_provider";
        std::string kind = d.kind();
        bool interesting = kind == "gpu" || kind == "infiniband" || kind == "ethernet" || kind == "network";
        if (d.physfn) interesting = false;  // VFs are listed under their PF
        if (!opts.all && !interesting && configured.empty()) continue;
        json_array_append_new(devs.get(), device_entry(root, d, configured).release());
    }
    inv("devices", std::move(devs));
    return inv.take();
}

namespace {

// The node's lines above the table: IOMMU, interrupts, vfio-pci, NUMA.
std::string node_summary(const json_t* node) {
    auto b = [&](const char* k) { return json_is_true(json_object_get(node, k)) ? "yes" : "no"; };
    std::string out = std::string("IOMMU: ") + b("iommu_enabled") + " (" +
                      std::to_string(json_integer_value(json_object_get(node, "iommu_groups"))) + " groups)" +
                      "   interrupt remapping: " + json_string_value(json_object_get(node, "interrupt_remapping")) +
                      "   allow_unsafe_interrupts: " + b("allow_unsafe_interrupts") + "   vfio-pci: " + b("vfio_pci") +
                      "\n";
    size_t i;
    json_t* n;
    json_array_foreach(json_object_get(node, "numa_nodes"), i, n) {
        out += "NUMA node " + std::to_string(json_integer_value(json_object_get(n, "node"))) + ": CPUs " +
               json_string_value(json_object_get(n, "cpus")) + "\n";
    }
    return out;
}

// The strings of a JSON array of strings, joined with `sep`.
std::string joined(const json_t* array, const char* sep) {
    std::string out;
    size_t k;
    json_t* v;
    json_array_foreach(array, k, v) out += (out.empty() ? "" : sep) + std::string(json_string_value(v));
    return out;
}

// One device's row of the table.
std::vector<std::string> device_row(const json_t* d) {
    auto s = [&](const char* k) {
        json_t* v = json_object_get(d, k);
        return json_is_string(v) ? std::string(json_string_value(v)) : std::string("-");
    };
    std::string group = "-";
    if (json_t* g = json_object_get(d, "iommu_group"); json_is_integer(g)) {
        group = std::to_string(json_integer_value(g));
        size_t k;
        json_t* m;
        std::string others;
        json_array_foreach(json_object_get(d, "group_members"), k, m) {
            others += (others.empty() ? "" : ",") + std::string(json_string_value(json_object_get(m, "address")));
        }
        if (!others.empty()) group += " (+" + others + ")";
    }
    std::string resets = joined(json_object_get(d, "reset_methods"), ",");
    if (resets.empty()) resets = json_is_true(json_object_get(d, "resettable")) ? "yes" : "none";
    std::string sriov = "-";
    if (json_t* sv = json_object_get(d, "sriov"); json_is_object(sv))
        sriov = std::to_string(json_integer_value(json_object_get(sv, "numvfs"))) + "/" +
                std::to_string(json_integer_value(json_object_get(sv, "totalvfs")));
    std::string notes = s("configured") == "-" ? "" : "configured " + s("configured");
    std::string problems = joined(json_object_get(d, "problems"), "; ");
    if (!problems.empty()) notes += (notes.empty() ? "" : "; ") + problems;
    if (s("name") != "-") notes = s("name") + (notes.empty() ? "" : "; " + notes);
    return {s("address"),
            s("vendor_device"),
            s("kind"),
            s("driver"),
            std::to_string(json_integer_value(json_object_get(d, "numa_node"))),
            s("local_cpus"),
            group,
            resets,
            sriov,
            notes};
}

// The rows in columns two spaces apart, trailing blanks cut.
std::string aligned(const std::vector<std::vector<std::string>>& rows) {
    std::vector<size_t> width(rows[0].size(), 0);
    for (const auto& row : rows)
        for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    std::string out;
    for (const auto& row : rows) {
        std::string line;
        for (size_t c = 0; c < row.size(); ++c) {
            line += row[c];
            if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line + "\n";
    }
    return out;
}

}  // namespace

std::string format_inventory_table(const json_t* inv) {
    std::string out = node_summary(json_object_get(inv, "node")) + "\n";
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"ADDRESS", "ID", "KIND", "DRIVER", "NUMA", "CPUS", "GROUP", "RESET", "SR-IOV", "NOTES"});
    size_t i;
    json_t* d;
    json_array_foreach(json_object_get(inv, "devices"), i, d) rows.push_back(device_row(d));
    out += aligned(rows);
    if (rows.size() == 1) out += "(no GPU or network function found)\n";
    return out;
}

}  // namespace svm
