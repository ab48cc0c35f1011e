// Writes the seeds of the corpus that the project's own code produces (a
// plan, a ledger, VM records plain and grouped, srun relay requests) into
// the corpus directories under argv[1]: tests/fuzz/seed runs it. Not a
// fuzz target.
#include <unistd.h>

#include <cstdio>

#include "error.hpp"
#include "fs.hpp"
#include "host_changes.hpp"
#include "job_plan.hpp"
#include "job_record.hpp"
#include "ledger.hpp"
#include "record_form.hpp"
#include "srun_options.hpp"
#include "vf_pool.hpp"
#include "vfio_binding.hpp"

using namespace svm;

namespace {

std::string out_dir;

void seed(const std::string& target, const std::string& name, const std::string& bytes) {
    mkdir_p(path_join(out_dir, target), 0755);
    write_file_atomic(path_join(path_join(out_dir, target), name), bytes, 0644);
}

JobPlan plan() {
    JobPlan p;
    p.job_id = 4242;
    p.uid = 1001;
    p.gid = 1001;
    p.guest_gid = 0x70000000 + 4242;
    p.user = p.group = "svmuser";
    p.home = p.workdir = "/home/svmuser";
    p.node = "node2";
    p.node_index = 1;
    for (int i = 1; i <= 3; ++i)
        p.peers.push_back({"node" + std::to_string(i), "vm-" + std::to_string(i), "10.213.0." + std::to_string(10 + i),
                           i == 2 ? "10.214.0.12" : ""});
    p.image = "/home/svmuser/images/debian.qcow2";
    p.image_format = "qcow2";
    p.image_source = "docker://debian:12";
    p.image_virtual_size = 2147483648;
    p.image_digest = "sha256:" + std::string(64, 'a');
    p.image_identity = {2049, 131077, 1764000000, 123456789, 421724160};
    p.kernel = "/home/svmuser/vmlinuz";
    p.cmdline = "console=ttyS0 root=/dev/vda1";
    p.hostname = "vm-2";
    p.domain_name = "slurm-vm-4242-node2";
    p.ip = "10.213.0.12";
    p.mac = "52:54:00:00:10:92";
    p.gateway = "10.213.0.1";
    p.fabric_ip = "10.214.0.12";
    p.bridge = "svmbr0";
    p.netns = "svmj4242";
    p.mtu = 1450;
    p.domain_type = "kvm";
    p.emulator = "/usr/bin/qemu-system-x86_64";
    p.shares = {"/home/svmuser", "/scratch"};
    p.shares_via = "virtiofs";
    p.virtiofsd = "/usr/libexec/virtiofsd";
    p.hostdevs = {{"0000:3b:00.0", "gpu", 1}, {"0000:5e:00.3", "vf", 1}};
    p.numa_node = 1;
    p.numa_nodes = {0, 1};
    p.placement = "guest memory on NUMA node 1, beside its devices";
    p.vf_link_layer = "infiniband";
    p.vf_port_guid = "02:00:00:00:12:34:00:01";
    p.save_path = "/home/svmuser/images/saved.qcow2";
    p.hugepages = "auto";
    p.hugepage_size_kib = 2048;
    p.device_cpus = "8-15";
    p.dir = "/run/slurm-vm/job_4242";
    p.overlay_dir = "/var/lib/slurm-vm/overlays/job_4242";
    return p;
}

void plans() {
    seed("job_plan", "plan.json", plan().to_json());
    seed("job_plan", "plan-old.json", R"({"job_id": 9, "hostdevs": ["0000:3b:00.0"]})");
    seed("job_plan", "state-ready", "ready\n");
    seed("job_plan", "state-failed", "failed: the guest did not answer in 300 s\n");
    seed("job_plan", "state-stopped", std::string("stopped: ") + kJobEnded + "\n");
}

void ledgers() {
    char tmpl[] = "/tmp/svm-fuzz-seeds.XXXXXX";
    if (!::mkdtemp(tmpl)) SVM_THROW_ERRNO("mkdtemp");
    std::string path = path_join(tmpl, "job_4242.json");
    {
        Ledger l = Ledger::load(path, 4242);
        l.record(JobCgroupsChange{"/sys/fs/cgroup"});
        l.record(JobDirChange{"/run/slurm-vm/job_4242"});
        l.record(DevAclChange{"/dev/kvm", 0x70000000 + 4242});
        l.record(OverlayDirChange{"/var/lib/slurm-vm/overlays/job_4242"});
        l.record(JobNetChange{"svmj4242", "", "vx4242"});
        BindRecord b;
        b.device = PciAddress::parse("0000:3b:00.0");
        b.original_driver = "nvidia";
        b.iommu_group = 12;
        l.record(BindRecord::kind, b.to_json());
        l.record(VfReservationRecord::kind, VfReservationRecord{"4242"}.to_json());
        VfConfigRecord v;
        v.pf = PciAddress::parse("0000:5e:00.0");
        v.vf = PciAddress::parse("0000:5e:00.3");
        v.index = 2;
        v.link_layer = "infiniband";
        v.set = {{"node", "02:00:00:00:12:34:00:00"}, {"port", "02:00:00:00:12:34:00:01"}};
        v.previous = {{"node", "00:00:00:00:00:00:00:00"}, {"port", ""}};
        l.record(VfConfigRecord::kind, v.to_json());
        l.record(DomainChange{"/run/slurm-vm/job_4242/libvirt", "slurm-vm-4242-node2",
                              "/run/slurm-vm/job_4242/keeper.pid", "/run/slurm-vm/job_4242", 2});
    }
    seed("ledger", "job_4242.json", read_file(path));
    seed("ledger", "old-records.json",
         R"({"job_id":4242,"entries":[{"kind":"ip_lease","data":{"file":"/run/slurm-vm/leases/10.213.0.12",)"
         R"("owner":"job 4242 on node2","recorded_at":1}},{"kind":"net_filter","data":{"lease_dir":)"
         R"("/run/slurm-vm/leases","netns":"","table":"svm_job_4242","job":4242,"recorded_at":1}}]})");
    remove_tree(tmpl);
}

// A record of n nodes as the keepers write it: ready entries, one failure.
Json record(int n) {
    Json root = parse_admin_comment(R"({"site_key":"kept"})");
    for (int i = 1; i <= n; ++i) {
        Json f(json_pack("{s:s, s:s, s:s, s:i, s:i, s:s}", "image", "/home/svmuser/images/debian.qcow2", "digest",
                         ("sha256:" + std::string(64, 'b')).c_str(), "guest", ("vm-" + std::to_string(i)).c_str(),
                         "create_ms", 800 + i, "ready_ms", 9000 + 7 * i, "ip",
                         ("10.213." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 2)).c_str()));
        if (i == n && n > 1) f = Json(json_pack("{s:s}", "error", "the guest on this node shut down or crashed"));
        merge_node_record(root.get(), "node" + std::to_string(i), f.get());
    }
    return root;
}

void records() {
    std::string three = admin_comment_text(record(3).get());
    seed("vm_record", "plain.json", three);
    seed("job_info", "requeued.json",
         R"({"jobs":[{"job_id":42,"admin_comment":null,"state":"PENDING","requeue":false,"preempt_time":0,)"
         R"("restart_cnt":1}]})");
    Json running(json_pack("{s:[{s:i, s:s, s:s, s:b, s:i, s:i}]}", "jobs", "job_id", 42, "admin_comment", three.c_str(),
                           "state", "RUNNING", "requeue", 0, "preempt_time", 0, "restart_cnt", 0));
    seed("job_info", "running.json", json_dump(running.get()));
    seed("vm_record", "grouped.json", admin_comment_text(record(40).get(), 2500));
    seed("vm_record", "summarized.json", admin_comment_text(record(300).get(), 900));
    seed("vm_record", "omitted.json", admin_comment_text(record(300).get(), 300));
    seed("hostlist", "grouped-keys", "node[1-299]");
    seed("record_relay", "entry-fields.json", three);
}

void srun_requests() {
    auto srun = [](std::vector<std::string> fields) {
        std::string s = "SRUN " + std::to_string(fields.size()) + "\n";
        for (const auto& f : fields) s += f + std::string(1, '\0');
        return s;
    };
    seed("srun_request", "srun", srun({"/home/svmuser", "--overlap", "-N1", "-n1", "hostname"}));
    seed("srun_request", "srun-mpi", srun({"/home/svmuser/run", "--mpi=pmix", "-n", "8", "./a.out", "--in", "x y"}));
    seed("srun_request", "stderr", "STDERR 0123abcd4567ef89\n");
    seed("srun_request", "wait", "WAIT 0123abcd4567ef89\n");
    seed("srun_request", "signal", "SIGNAL 0123abcd4567ef89 TERM\n");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    out_dir = argv[1];
    try {
        plans();
        ledgers();
        records();
        srun_requests();
    } catch (const Error& e) {
        std::fprintf(stderr, "fuzz-seeds: %s\n", e.chain().c_str());
        return 1;
    }
    return 0;
}
