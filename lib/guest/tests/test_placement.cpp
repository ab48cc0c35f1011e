// Unit tests for the guest's placement (issue 3): the PCIe layout that puts a
// NUMA node's GPUs and VF behind one guest switch, and the VF's interrupt
// moderation profile (hugepages: host/tests/test_hugepages.cpp; the job's
// side: job/tests/test_placement_job.cpp).
#include <unistd.h>

#include <functional>

#include "catch.hpp"

#include "domain_xml.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "guest_scenarios.hpp"
#include "guest_script.hpp"
#include "irq_profile.hpp"
#include "job_plan.hpp"
#include "proc.hpp"
#include "seed.hpp"
#include "support.hpp"

namespace {
using svm::test::domain_validates;
using svm::test::placement_domain;
using svm::test::reason_of;

size_t count(const std::string& hay, const std::string& needle) {
    size_t n = 0;
    for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
    return n;
}

}  // namespace

// --- PCIe layout ---------------------------------------------------------------

TEST_CASE("guests without passthrough devices keep the pc machine and no PCIe controllers", "[placement]") {
    std::string x = svm::domain_xml(placement_domain());
    CHECK(x.find("machine='pc'") != std::string::npos);
    CHECK(x.find("<controller") == std::string::npos);
    CHECK(x.find("<hostdev") == std::string::npos);
    CHECK(x.find("memoryBacking") == std::string::npos);
}

TEST_CASE("the guest agent's channels are virtio-serial ports on the keeper's sockets, only when asked",
          "[placement]") {
    svm::DomainSpec s = placement_domain();
    CHECK(svm::domain_xml(s).find("<channel") == std::string::npos);
    s.agent_channels = {"/run/slurm-vm/n1/job_7/agent.sock", "/run/slurm-vm/n1/job_7/agent-out.sock",
                        "/run/slurm-vm/n1/job_7/agent-err.sock"};
    std::string x = svm::domain_xml(s);
    INFO(x);
    CHECK(x.find("    <channel type='unix'>\n"
                 "      <source mode='bind' path='/run/slurm-vm/n1/job_7/agent.sock'/>\n"
                 "      <target type='virtio' name='org.slurm-vm.agent'/>\n"
                 "    </channel>\n"
                 "    <channel type='unix'>\n"
                 "      <source mode='bind' path='/run/slurm-vm/n1/job_7/agent-out.sock'/>\n"
                 "      <target type='virtio' name='org.slurm-vm.agent-out'/>\n"
                 "    </channel>\n"
                 "    <channel type='unix'>\n"
                 "      <source mode='bind' path='/run/slurm-vm/n1/job_7/agent-err.sock'/>\n"
                 "      <target type='virtio' name='org.slurm-vm.agent-err'/>\n"
                 "    </channel>\n") != std::string::npos);
    CHECK(domain_validates(x));
}

TEST_CASE("GPU and companion and VF of one NUMA node sit behind one guest PCIe switch (golden)", "[placement]") {
    svm::DomainSpec s = placement_domain();
    s.numa_node = 1;
    s.hostdevs = {{"0000:3b:00.0", "gpu", 1}, {"0000:3b:00.1", "companion", 1}, {"0000:5e:00.3", "vf", 1}};
    std::string x = svm::domain_xml(s);
    CHECK(x.find("<type arch='x86_64' machine='q35'>hvm</type>") != std::string::npos);
    const char* golden =
        "    <controller type='pci' index='1' model='pcie-root-port'/>\n"
        "    <controller type='pci' index='2' model='pcie-switch-upstream-port'>\n"
        "      <address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/>\n"
        "    </controller>\n"
        "    <controller type='pci' index='3' model='pcie-switch-downstream-port'>\n"
        "      <address type='pci' domain='0x0000' bus='0x02' slot='0x00' function='0x0'/>\n"
        "    </controller>\n"
        "    <controller type='pci' index='4' model='pcie-switch-downstream-port'>\n"
        "      <address type='pci' domain='0x0000' bus='0x02' slot='0x01' function='0x0'/>\n"
        "    </controller>\n"
        "    <hostdev mode='subsystem' type='pci' managed='no'>\n"
        "      <driver name='vfio'/>\n"
        "      <source><address domain='0x0000' bus='0x3b' slot='0x00' function='0x0'/></source>\n"
        "      <address type='pci' domain='0x0000' bus='0x03' slot='0x00' function='0x0' multifunction='on'/>\n"
        "    </hostdev>\n"
        "    <hostdev mode='subsystem' type='pci' managed='no'>\n"
        "      <driver name='vfio'/>\n"
        "      <source><address domain='0x0000' bus='0x3b' slot='0x00' function='0x1'/></source>\n"
        "      <address type='pci' domain='0x0000' bus='0x03' slot='0x00' function='0x1'/>\n"
        "    </hostdev>\n"
        "    <hostdev mode='subsystem' type='pci' managed='no'>\n"
        "      <driver name='vfio'/>\n"
        "      <source><address domain='0x0000' bus='0x5e' slot='0x00' function='0x3'/></source>\n"
        "      <address type='pci' domain='0x0000' bus='0x04' slot='0x00' function='0x0'/>\n"
        "    </hostdev>\n"
        "    <rng model='virtio'>\n"
        "      <backend model='builtin'/>\n"
        "    </rng>\n"
        "    <memballoon model='none'/>\n";
    INFO(x);
    CHECK(x.find(golden) != std::string::npos);
    CHECK(domain_validates(x));
}

TEST_CASE("devices on two NUMA nodes get a switch each and functions keep host order", "[placement]") {
    svm::DomainSpec s = placement_domain();
    // Out of order on purpose: the companion before its GPU, node 1 before node 0.
    s.hostdevs = {{"0000:d8:00.1", "companion", 1},
                  {"0000:d8:00.0", "gpu", 1},
                  {"0000:3b:00.0", "gpu", 0},
                  {"0000:86:00.0", "gpu", 1},
                  {"0000:3c:01.2", "vf", 0}};
    std::string x = svm::domain_xml(s);
    INFO(x);
    CHECK(count(x, "model='pcie-root-port'") == 2);
    CHECK(count(x, "model='pcie-switch-upstream-port'") == 2);
    CHECK(count(x, "model='pcie-switch-downstream-port'") == 4);
    // Node 0 first: root 1, upstream 2, downstream 3 (GPU 3b) and 4 (VF);
    // node 1: root 5, upstream 6, downstream 7 (d8, two functions) and 8 (86).
    CHECK(x.find("<controller type='pci' index='6' model='pcie-switch-upstream-port'>\n"
                 "      <address type='pci' domain='0x0000' bus='0x05' slot='0x00' function='0x0'/>") !=
          std::string::npos);
    CHECK(x.find("bus='0x3c' slot='0x01' function='0x2'/></source>\n"
                 "      <address type='pci' domain='0x0000' bus='0x04' slot='0x00' function='0x0'/>") !=
          std::string::npos);
    CHECK(x.find(
              "bus='0xd8' slot='0x00' function='0x0'/></source>\n"
              "      <address type='pci' domain='0x0000' bus='0x07' slot='0x00' function='0x0' multifunction='on'/>") !=
          std::string::npos);
    CHECK(x.find("bus='0xd8' slot='0x00' function='0x1'/></source>\n"
                 "      <address type='pci' domain='0x0000' bus='0x07' slot='0x00' function='0x1'/>") !=
          std::string::npos);
    CHECK(x.find("bus='0x86' slot='0x00' function='0x0'/></source>\n"
                 "      <address type='pci' domain='0x0000' bus='0x08' slot='0x00' function='0x0'/>") !=
          std::string::npos);
    CHECK(domain_validates(x));
    // Hugepages and the PCIe layout together still validate.
    s.hugepage_kib = 2048;
    CHECK(domain_validates(svm::domain_xml(s)));

    s.hostdevs = {{"0000:3b:00.0", "gpu", 0}, {"0000:3b:00.0", "gpu", 0}};
    CHECK_THAT(reason_of([&] { svm::domain_xml(s); }), Catch::Contains("given twice"));
    s.hostdevs = {{"0000:3b:00.9", "gpu", 0}};
    CHECK_THAT(reason_of([&] { svm::domain_xml(s); }), Catch::Contains("bad PCI address 0000:3b:00.9"));
}

TEST_CASE("a function whose NUMA node is unknown joins the switch of the guest memory's node", "[placement]") {
    svm::DomainSpec s = placement_domain();
    s.numa_node = 1;
    s.hostdevs = {{"0000:3b:00.0", "gpu", 1}, {"0000:5e:00.3", "vf", -1}};
    std::string x = svm::domain_xml(s);
    CHECK(count(x, "model='pcie-root-port'") == 1);
    CHECK(count(x, "model='pcie-switch-downstream-port'") == 2);
    s.numa_node = -1;  // nothing known at all: still one switch
    s.hostdevs = {{"0000:3b:00.0", "gpu", -1}, {"0000:5e:00.3", "vf", -1}};
    CHECK(count(svm::domain_xml(s), "model='pcie-root-port'") == 1);
}

TEST_CASE("plan keeps each passed-through function's role and NUMA node and reads older plans", "[placement]") {
    svm::JobPlan p;
    p.job_id = 9;
    p.hostdevs = {{"0000:3b:00.0", "gpu", 1}, {"0000:5e:00.3", "vf", 1}};
    p.vf_link_layer = "infiniband";
    p.vf_port_guid = "02:00:00:00:12:34:00:01";
    p.irq_profile = "latency";
    p.hugepages = "auto";
    p.hugepage_size_kib = 2048;
    auto q = svm::JobPlan::from_json(p.to_json(), "plan");
    CHECK(q.to_json() == p.to_json());
    REQUIRE(q.hostdevs.size() == 2);
    CHECK(q.hostdevs[1].role == "vf");
    CHECK(q.hostdevs[1].numa_node == 1);
    CHECK(q.irq_profile == "latency");
    // A plan of a release before roles were recorded lacks most keys: refused, by name.
    CHECK_THROWS_WITH(svm::JobPlan::from_json(R"({"job_id": 9, "hostdevs": ["0000:3b:00.0"]})", "old plan"),
                      Catch::Contains("old plan: \"uid\" is missing"));
}

// --- Interrupt moderation profiles ----------------------------------------------

TEST_CASE("the node configuration example and the new keys agree with etc/slurm-vm.schema.json", "[placement]") {
    auto r = svm::test::run_schema_script(
        std::string(SVM_SOURCE_DIR) + "/etc/slurm-vm.schema.json",
        "good = [json.load(open(sys.argv[2])),\n"
        "        {'hugepages': 'required', 'hugepage_size_kib': 1048576, 'irq_profile': 'latency'},\n"
        "        {'hugepages': 'off', 'irq_profile': 'throughput'}]\n"
        "bad = [{'hugepages': 'yes'}, {'irq_profile': 'fast'}, {'hugepage_size_kib': -1}]\n"
        "errs = [d for d in good if list(v.iter_errors(d))] + [d for d in bad if not list(v.iter_errors(d))]\n"
        "print(errs)\n"
        "sys.exit(1 if errs else 0)\n",
        {std::string(SVM_SOURCE_DIR) + "/etc/slurm-vm.json"});
    if (!r) return;
    INFO(r->out << r->err);
    CHECK(r->ok());
}

namespace {
svm::JobPlan vf_plan(const std::string& profile, const std::string& link_layer) {
    svm::JobPlan p = svm::test::alice_plan();
    p.irq_profile = profile;
    p.vf_link_layer = link_layer;
    p.vf_mac = "02:00:12:34:00:01";
    p.vf_port_guid = "02:00:00:00:12:34:00:03";
    p.hostdevs = {{"0000:5e:00.3", "vf", 0}};
    return p;
}
}  // namespace

TEST_CASE("seed: the VF's interrupt moderation is applied by user-data and never fatal", "[placement]") {
    svm::SeedKeys k{"ssh-ed25519 AAAAuser c", "u\n", "h\n", "ssh-ed25519 AAAAhost c", "x\n"};
    // default: the driver is left alone; no VF: nothing to tune.
    CHECK(svm::seed_irq_script(vf_plan("default", "infiniband")).empty());
    CHECK(svm::seed_irq_script(vf_plan("latency", "")).empty());
    CHECK(svm::seed_user_data(vf_plan("default", "infiniband"), k).find("ethtool") == std::string::npos);

    std::string ib = svm::seed_irq_script(vf_plan("latency", "infiniband"));
    CHECK(ib.find("SVM_IRQ_PATTERN='*02:00:00:00:12:34:00:03'\n") !=
          std::string::npos);  // IPoIB: the port GUID ends the address
    CHECK(ib.find("SVM_IRQ_ARGS='adaptive-rx off rx-usecs 0 rx-frames 1'\n") != std::string::npos);
    CHECK(ib.find("fail") == std::string::npos);
    std::string eth = svm::seed_irq_script(vf_plan("throughput", "ethernet"));
    CHECK(eth.find("SVM_IRQ_PATTERN='02:00:12:34:00:01'\n") != std::string::npos);
    CHECK(eth.find("adaptive-rx on rx-usecs-low 40 rx-usecs-high 1000 rx-frames 88") != std::string::npos);
    auto p = vf_plan("latency", "infiniband");
    std::string ud = svm::seed_user_data(p, k);
    CHECK(ud.find(ib) != std::string::npos);
    CHECK(ud.find(ib) < ud.find(svm::ready_marker(p)));  // tuned before the guest says it is ready
    CHECK(svm::run({"/bin/sh", "-n"}, {.stdin_data = ud}).status == 0);
    p.irq_profile = "bogus";
    CHECK_THROWS_AS(svm::seed_irq_script(p), svm::Error);
}

TEST_CASE("seed: the irq script run against a fake /sys/class/net and a fake ethtool", "[placement]") {
    // The script's logic, run here with its paths moved into a temporary tree:
    // an IPoIB interface found by its GUID, a driver that refuses adaptive-rx,
    // then an image without ethtool.
    svm::test::TempDir d_dir("svm-place");
    std::string d = d_dir.path();
    std::string net = d + "/sys/class/net";
    svm::mkdir_p(net + "/eth0/device", 0755);
    svm::write_file_atomic(net + "/eth0/address", "52:54:00:00:00:01\n");
    svm::mkdir_p(net + "/ib0/device", 0755);
    svm::write_file_atomic(net + "/ib0/address", "00:00:10:87:fe:80:00:00:00:00:00:00:02:00:00:00:12:34:00:03\n");
    svm::mkdir_p(d + "/bin", 0755);
    svm::write_file_atomic(
        d + "/bin/ethtool",
        "#!/bin/sh\necho \"$*\" >>" + d +
            "/calls\n"
            "case \"$*\" in *adaptive-rx*) echo 'netlink error: Operation not supported' >&2; exit 1;; esac\n",
        0755);
    std::string script = svm::guest_script_body("netdevs.sh") + svm::seed_irq_script(vf_plan("latency", "infiniband"));
    for (auto pos = script.find("/sys/class/net"); pos != std::string::npos;
         pos = script.find("/sys/class/net", pos + net.size()))
        script.replace(pos, 14, net);
    std::string prelude = "log() { echo \"slurm-vm: $*\"; }\nPATH=" + d + "/bin:/usr/bin:/bin\n";
    auto r = svm::run({"/bin/sh", "-c", prelude + script + "echo after"});
    INFO(r.out << r.err);
    CHECK(r.status == 0);
    CHECK(r.out ==
          "slurm-vm: interrupt moderation profile latency on ib0: the driver refused adaptive-rx off (ethtool: netlink "
          "error: Operation not supported); applied rx-usecs 0 rx-frames 1\nafter\n");
    std::string calls;
    svm::read_file_if_exists(d + "/calls", calls);
    CHECK(calls ==
          "-C ib0 adaptive-rx off rx-usecs 0 rx-frames 1\n-C ib0 adaptive-rx off\n-C ib0 rx-usecs 0\n-C ib0 rx-frames "
          "1\n");
    ::unlink((d + "/bin/ethtool").c_str());
    r = svm::run({"/bin/sh", "-c", "log() { echo \"slurm-vm: $*\"; }\nPATH=" + d + "/bin\n" + script + "echo after"});
    CHECK(r.out ==
          "slurm-vm: interrupt moderation profile latency not applied: ethtool is not installed in the image\n"
          "after\n");
}
