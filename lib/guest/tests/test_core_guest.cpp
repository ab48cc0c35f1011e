// Unit tests for the guest's building blocks: the plan, the domain XML, the
// seed, the remote command, the job's keys, the guest's state file.
#include <sys/stat.h>
#include <unistd.h>

#include "catch.hpp"

#include "domain_xml.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "guest_exec.hpp"
#include "guest_scenarios.hpp"
#include "guest_script.hpp"
#include "job_keys.hpp"
#include "job_plan.hpp"
#include "proc.hpp"
#include "seed.hpp"
#include "srun_relay.hpp"
#include "support.hpp"

namespace {
svm::JobPlan sample_plan() {
    svm::JobPlan p = svm::test::alice_plan();
    p.workdir = "/home/alice/run dir";
    p.domain_name = "slurm-vm-42-node1";
    p.ip = "10.213.43.10";
    p.mac = "52:54:0a:d5:2b:0a";
    p.gateway = "10.213.0.1";
    p.peers = {{"node1", "node1-vm", "10.213.43.10"}, {"node2", "node2-vm", "10.213.43.11"}};
    p.image = "/home/alice/img.qcow2";
    p.image_format = "qcow2";
    p.dir = "/run/slurm-vm/node1/job_42";
    p.domain_type = "qemu";
    return p;
}
}  // namespace

TEST_CASE("plan survives JSON", "[core]") {
    auto p = sample_plan();
    auto q = svm::JobPlan::from_json(p.to_json(), "plan");
    CHECK(q.to_json() == p.to_json());
    CHECK(q.peers.size() == 2);
    CHECK(q.ssh_socket() == "/run/slurm-vm/node1/job_42/ssh.sock");
}

TEST_CASE("domain XML pins CPUs, pins the backing format and validates against libvirt's schema", "[core]") {
    svm::DomainSpec s;
    s.name = "slurm-vm-42-node1";
    s.type = "kvm";
    s.memory_mib = 3840;
    s.host_cpus = {4, 5, 6, 7};
    s.overlay = "/run/slurm-vm/node1/job_42/overlay.qcow2";
    s.base = "/home/alice/a&b.qcow2";
    s.base_format = "qcow2";
    s.seed = "/run/slurm-vm/node1/job_42/seed.iso";
    s.kernel = "/home/alice/vmlinuz";
    s.initrd = "/home/alice/initrd";
    s.cmdline = "root=/dev/vda1 console=ttyS0";
    s.bridge = "br0";
    s.mac = "52:54:0a:d5:2b:0a";
    s.tap = "svm2an0";
    s.console_log = "/run/slurm-vm/node1/job_42/console.log";
    std::string x = svm::domain_xml(s);
    CHECK(x.find("<vcpupin vcpu='3' cpuset='7'/>") != std::string::npos);
    CHECK(x.find("<emulatorpin cpuset='4-7'/>") != std::string::npos);
    CHECK(x.find("<memory unit='MiB'>3840</memory>") != std::string::npos);
    CHECK(x.find("<cpu mode='host-passthrough'") != std::string::npos);
    CHECK(x.find("a&amp;b.qcow2") != std::string::npos);
    CHECK(x.find("<target dev='svm2an0'/>") != std::string::npos);
    // The host's entropy, without a device file.
    CHECK(x.find("<rng model='virtio'>\n      <backend model='builtin'/>\n    </rng>") != std::string::npos);
    // The user's image: format pinned, and an explicitly empty backing chain.
    CHECK(
        x.find("<format type='qcow2'/>\n        <source file='/home/alice/a&amp;b.qcow2'/>\n        <backingStore/>") !=
        std::string::npos);
    CHECK(svm::test::domain_validates(x));
    s.type = "qemu";
    s.base_format = "vmdk";
    CHECK_THROWS_AS(svm::domain_xml(s), svm::Error);
}

TEST_CASE("seed: standard NoCloud files, a user-data script that quotes everything", "[core]") {
    auto p = sample_plan();
    svm::SeedKeys k{
        "ssh-ed25519 AAAAuser c", "-----BEGIN OPENSSH PRIVATE KEY-----\nu\n-----END OPENSSH PRIVATE KEY-----\n",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nh\n-----END OPENSSH PRIVATE KEY-----\n", "ssh-ed25519 AAAAhost c",
        "node1-vm,10.213.43.10 ssh-ed25519 AAAAhost1\nnode2-vm,10.213.43.11 ssh-ed25519 AAAAhost2\n"};
    CHECK(svm::seed_meta_data(p) == "instance-id: slurm-vm-42-node1\nlocal-hostname: node1-vm\n");
    CHECK(svm::seed_network_config(p).find("macaddress: \"52:54:0a:d5:2b:0a\"") != std::string::npos);
    std::string ud = svm::seed_user_data(p, k);
    CHECK(ud.rfind("#cloud-boothook\n#!/bin/sh\n", 0) == 0);  // early in cloud-init, a script after its first line
    // The scripts of lib/guest/scripts, the job's values quoted above each.
    CHECK(ud.find("SVM_USER='alice'\nSVM_GROUP='alice'\nSVM_HOME='/home/alice'\n") != std::string::npos);
    CHECK(ud.find("SVM_WORKDIR='/home/alice/run dir'\n") != std::string::npos);
    CHECK(ud.find("SVM_HOSTNAME='node1-vm'\n") != std::string::npos);
    const std::string user = svm::seed_user_script(p), hosts = svm::seed_hosts_script(p);
    const std::string agent = svm::seed_agent_script(p), sshd = svm::seed_sshd_start_script(p);
    const std::string mounts = svm::seed_mounts_script(p), motd = svm::seed_no_motd_script();
    for (const std::string* part : {&user, &hosts, &agent, &sshd, &mounts, &motd})
        CHECK(ud.find(*part) != std::string::npos);
    // The mounts start first (in the background), the hosts, then the user.
    CHECK(ud.find(mounts) < ud.find(hosts));
    CHECK(ud.find(hosts) < ud.find(user));
    CHECK(ud.find("10.213.43.10 node1-vm # slurm-vm\n10.213.43.11 node2-vm # slurm-vm\n") != std::string::npos);
    CHECK(ud.find("node2-vm,10.213.43.11 ssh-ed25519 AAAAhost2\n") != std::string::npos);
    // The guest's agent starts once the job's user exists, before the
    // network and the daemon; "ready" before the daemon starts, the marker
    // (at the end) after it.
    CHECK(ud.find(agent) > ud.find(user));
    CHECK(ud.find(agent) < ud.find("ip -batch -"));
    CHECK(ud.find(agent) < ud.find(sshd));
    CHECK(ud.find(sshd) + sshd.size() == ud.size());
    CHECK(sshd.find("SVM_READY_MARKER='" + svm::ready_marker(p) + "'\n") != std::string::npos);
    // In a session of its own, detached from cloud-init's output (which
    // waits for it), its environment only PATH (its command's too), with the
    // three ports and the job's user.
    CHECK(agent.find("SVM_AGENT=" + svm::shell_quote(svm::agent_script()) + "\n") != std::string::npos);
    CHECK(agent.find("\"$ss\" env -i PATH=/usr/local/bin:/usr/bin:/bin /bin/sh -c \"$SVM_AGENT\" svm-agent \"$a\" "
                     "\"$ao\" \"$ae\" \"$SVM_USER\" \"$SVM_FLAGS\" \"$ru\" \"$ss\" </dev/null >/dev/null 2>&1 &\n") !=
          std::string::npos);
    CHECK(agent.find("SVM_AGENT_MARKER='" + svm::agent_marker(p) + "'\n") != std::string::npos);
    CHECK(agent.find("SVM_AGENT_PORT='org.slurm-vm.agent'\n") != std::string::npos);
    CHECK(agent.find("SVM_AGENT_PORT_OUT='org.slurm-vm.agent-out'\n") != std::string::npos);
    CHECK(agent.find("SVM_AGENT_PORT_ERR='org.slurm-vm.agent-err'\n") != std::string::npos);
    CHECK(agent.find("SVM_USER='alice'\n") != std::string::npos);
    CHECK(ud.find("SVM_FLAGS='/run/slurm-vm'\n") < ud.find("fail()"));
    // The flag, then the console line that says so (the VM record is published then).
    CHECK(svm::set_up_marker(p) == "SLURM_VM_SET_UP job=42 node=node1");
    const std::string flag = ": >\"$SVM_FLAGS/ready\"; svm_wake; log \"$SVM_SET_UP_MARKER\"\n";
    CHECK(ud.find("SVM_SET_UP_MARKER='" + svm::set_up_marker(p) + "'\n") < ud.find(flag));
    CHECK(ud.find(flag) < ud.find(svm::ready_marker(p)));
    // The first command does not wait for the daemon; readiness does.
    CHECK(ud.find(flag) < ud.find(sshd));
    CHECK(ud.find(flag) > ud.find("ip -batch -"));
    CHECK(ud.find(flag) > ud.find(mounts));
    CHECK(ud.find("wait \"$svm_mounts\" || exit 1") < ud.find(flag));
    // srun's shim (the batch script's srun, first on its PATH), installed
    // whole after the agent starts, before the flag.
    const std::string shim = svm::guest_srun_shim();
    REQUIRE(shim.back() == '\n');
    const std::string srun = "SVM_SRUN=" + svm::shell_quote(shim.substr(0, shim.size() - 1)) + "\n";
    CHECK(ud.find(srun) > ud.find(agent));
    CHECK(ud.find(srun) < ud.find(flag));
    // What the job's first command needs comes before the flag: the SSH
    // client's key and settings (mpirun); what only sshd needs, after it.
    for (const char* before :
         {"/etc/ssh/ssh_known_hosts\n", "/etc/ssh/slurm-vm/id_ed25519 <<SVM_KEY",
          "/etc/ssh/ssh_config.d/slurm-vm.conf\n",
          "SVM_USER_KEY='-----BEGIN OPENSSH PRIVATE KEY-----\nu\n-----END OPENSSH PRIVATE KEY-----'\n"}) {
        INFO(before);
        CHECK(ud.find(before) < ud.find(flag));
    }
    for (const char* after : {"/etc/ssh/slurm-vm/ssh_host_ed25519_key\n", "/etc/ssh/slurm-vm/authorized_keys\n",
                              "/etc/ssh/sshd_config.d/slurm-vm.conf\n", "pam_motd", "Include /etc/ssh/sshd_config.d",
                              "/run/sshd\n", "SVM_AUTHORIZED_KEYS='ssh-ed25519 AAAAuser c\n'\n"}) {
        INFO(after);
        CHECK(ud.find(after) > ud.find(flag));
        CHECK(ud.find(after) < ud.find(sshd));
    }
    // The key's bytes reach the file as they are through the here-document
    // (its text an expansion, never read for the end line): a key with a
    // line that would end it early, quotes, $ and backslashes included.
    for (const char* key : {"SVM_KEY\nrest\n", "key\nSVM_KEY\nrest", "a'b\"$x`y`\\n\\\n", ""}) {
        std::string text = key;
        if (!text.empty() && text.back() == '\n') text.pop_back();
        auto r =
            svm::run({"/bin/sh", "-c",
                      svm::sh_assignments({{"SVM_USER_KEY", text, true}}) + "cat <<SVM_KEY\n$SVM_USER_KEY\nSVM_KEY\n"});
        std::string want = key;
        if (want.empty() || want.back() != '\n') want += '\n';
        CHECK(r.out == want);
    }
    CHECK(svm::guest_script("client.sh")
              .find("/etc/ssh/slurm-vm/id_ed25519 <<SVM_KEY || fail \"cannot write the job's SSH "
                    "key\"\n$SVM_USER_KEY\nSVM_KEY\n") != std::string::npos);
    // The host's entropy first when the first command logs into the other
    // guests (two nodes here), else with sshd (one node).
    CHECK(ud.find("SVM_PEERS='2'\n") < ud.find("if [ \"$SVM_PEERS\" -gt 1 ]; then svm_rng; fi"));
    CHECK(ud.find("if [ \"$SVM_PEERS\" -le 1 ]; then svm_rng; fi") > ud.find(flag));
    CHECK(ud.find("if [ \"$SVM_PEERS\" -le 1 ]; then svm_rng; fi") < ud.find(sshd));
    auto one = p;
    one.peers.resize(1);
    CHECK(svm::seed_user_data(one, k).find("SVM_PEERS='1'\n") != std::string::npos);
    CHECK(ud.find("mkdir -p -m 0755 /run/sshd") == ud.rfind("mkdir -p -m 0755 /run/sshd"));
    CHECK(svm::guest_script("head.sh").find("if [ \"$SVM_PEERS\" -gt 1 ]; then svm_rng; fi") != std::string::npos);
    // A machine without the ports (this one; modprobe is a stand-in): nothing
    // started, nothing said.
    svm::test::TempDir bin("svm-bin");
    svm::write_file_atomic(bin.path() + "/modprobe", "#!/bin/sh\nexit 0\n", 0755);
    svm::RunOptions ro;
    ro.env = {"PATH=" + bin.path() + ":/usr/bin:/bin"};
    auto none = svm::run({"/bin/sh", "-c", "log() { echo \"$*\"; }\n" + agent}, ro);
    CHECK(none.status == 0);
    CHECK(none.out.empty());
    CHECK(svm::run({"/bin/sh", "-n", "-c", svm::agent_script()}).status == 0);
    auto syntax = svm::run({"/bin/sh", "-n"}, {.stdin_data = ud});
    CHECK(syntax.status == 0);
    svm::test::TempDir d_dir("svm-unit");
    std::string d = d_dir.path();
    svm::build_seed_iso(p, k, d + "/seed.iso");
    auto r = svm::run({"isoinfo", "-d", "-i", d + "/seed.iso"});
    CHECK(r.out.find("Volume id: cidata") != std::string::npos);
    auto l = svm::run({"isoinfo", "-R", "-f", "-i", d + "/seed.iso"});
    CHECK(l.out == "/meta-data\n/network-config\n/user-data\n");
    auto x = [&](const std::string& f) { return svm::run({"isoinfo", "-R", "-x", f, "-i", d + "/seed.iso"}).out; };
    CHECK(x("/user-data") == svm::seed_user_data(p, k));
    CHECK(x("/meta-data") == svm::seed_meta_data(p));
    CHECK(x("/network-config") == svm::seed_network_config(p));
}

// seed_sshd_start_script against a stand-in systemctl that logs its calls:
// what it runs for each state of the guest's ssh unit.
std::string sshd_start_calls(const std::string& units, const std::string& active) {
    svm::test::TempDir d("svm-sshd");
    std::string bin = svm::path_join(d.path(), "bin"), log = svm::path_join(d.path(), "calls");
    svm::mkdir_p(bin, 0755);
    svm::mkdir_p(svm::path_join(d.path(), "systemd"), 0755);
    // Knows the units in `units`; only `active` is active; anything else succeeds.
    std::string fake = "#!/bin/sh\necho \"$*\" >>" + svm::shell_quote(log) + "\n";
    fake += "case \"$1 $2\" in\n";
    fake += "  'cat '*) case ' " + units + " ' in *\" $2 \"*) exit 0 ;; esac; exit 1 ;;\n";
    fake += "  'is-active --quiet') [ \"$3\" = '" + active + "' ] ;;\n";
    fake += "esac\n";
    svm::write_file_atomic(svm::path_join(bin, "systemctl"), fake, 0755);
    std::string script = "PATH=" + bin + ":$PATH\nfail() { echo \"failed: $*\" >>" + svm::shell_quote(log) +
                         "; exit 1; }\nlog() { :; }\n" +
                         svm::seed_sshd_start_script(sample_plan(), svm::path_join(d.path(), "systemd"));
    svm::run({"/bin/sh", "-c", script});
    std::string calls;
    svm::read_file_if_exists(log, calls);
    return calls;
}

TEST_CASE("seed: sshd is started without waiting when it is not running yet, restarted when it is", "[core]") {
    // Debian's unit, not yet started (ordered after cloud-init, which runs
    // the script): queued, never waited for (that would wait for the script).
    CHECK(sshd_start_calls("ssh.service sshd.service", "") ==
          "cat ssh.service\nis-active --quiet ssh.service\n--no-block start ssh.service\n");
    // Running with the image's host keys: restarted, and waited for.
    CHECK(sshd_start_calls("ssh.service sshd.service", "ssh.service") ==
          "cat ssh.service\nis-active --quiet ssh.service\nrestart ssh.service\n");
    // RHEL's name.
    CHECK(sshd_start_calls("sshd.service", "") ==
          "cat ssh.service\nis-active --quiet sshd.service\n--no-block start sshd.service\n");
}

TEST_CASE("seed: PAM's dynamic MOTD is off for the guest's SSH sessions, nothing else changes", "[core]") {
    svm::test::TempDir d("svm-motd");
    std::string pam = svm::path_join(d.path(), "sshd");
    const std::string debian =  // Debian 12's /etc/pam.d/sshd, abridged
        "@include common-auth\n"
        "session    required     pam_loginuid.so\n"
        "session    optional     pam_motd.so  motd=/run/motd.dynamic\n"
        "session    optional     pam_motd.so noupdate\n"
        "session    required     pam_limits.so\n";
    svm::write_file_atomic(pam, debian, 0644);
    std::string script = svm::seed_no_motd_script(pam);
    REQUIRE(svm::run({"/bin/sh", "-c", script}).status == 0);
    const std::string off =
        "@include common-auth\n"
        "session    required     pam_loginuid.so\n"
        "# slurm-vm, no MOTD in job sessions: session    optional     pam_motd.so  motd=/run/motd.dynamic\n"
        "# slurm-vm, no MOTD in job sessions: session    optional     pam_motd.so noupdate\n"
        "session    required     pam_limits.so\n";
    CHECK(svm::read_file(pam) == off);
    REQUIRE(svm::run({"/bin/sh", "-c", script}).status == 0);  // the seed again: no change
    CHECK(svm::read_file(pam) == off);
    // An image without the file (no PAM for sshd): nothing made, no failure.
    std::string none = svm::path_join(d.path(), "none");
    CHECK(svm::run({"/bin/sh", "-c", svm::seed_no_motd_script(none)}).status == 0);
    CHECK_FALSE(svm::path_exists(none));
    CHECK(svm::seed_user_data(sample_plan(), {}).find(svm::seed_no_motd_script()) != std::string::npos);
}

TEST_CASE("seed: the peers' lines replace earlier ones in the hosts files, the rest is kept", "[core]") {
    svm::test::TempDir d("svm-hosts");
    std::string hosts = svm::path_join(d.path(), "hosts"), tmpl = svm::path_join(d.path(), "hosts.debian.tmpl");
    // A saved image's file: an earlier job's lines, a last line without newline.
    svm::write_file_atomic(
        hosts, "127.0.0.1 localhost\n10.213.9.9 old-vm # slurm-vm\n::1 ip6-localhost\n192.0.2.7 x\\y", 0644);
    svm::write_file_atomic(tmpl, "## template:jinja\n127.0.0.1 {{fqdn}}\n", 0644);
    auto p = sample_plan();
    std::string files = hosts + " " + d.path() + "/hosts.*.tmpl " + d.path() + "/absent";
    std::string script = svm::seed_hosts_script(p, files);
    REQUIRE(svm::run({"/bin/sh", "-c", script}).status == 0);
    const std::string ours = "10.213.43.10 node1-vm # slurm-vm\n10.213.43.11 node2-vm # slurm-vm\n";
    CHECK(svm::read_file(hosts) == "127.0.0.1 localhost\n::1 ip6-localhost\n192.0.2.7 x\\y\n" + ours);
    CHECK(svm::read_file(tmpl) == "## template:jinja\n127.0.0.1 {{fqdn}}\n" + ours);
    CHECK_FALSE(svm::path_exists(svm::path_join(d.path(), "absent")));
    // Every boot: the same file again.
    REQUIRE(svm::run({"/bin/sh", "-c", script}).status == 0);
    CHECK(svm::read_file(tmpl) == "## template:jinja\n127.0.0.1 {{fqdn}}\n" + ours);
    // A fabric: the peers' IPoIB addresses.
    p.peers[1].fabric_ip = "10.214.43.11";
    REQUIRE(svm::run({"/bin/sh", "-c", svm::seed_hosts_script(p, hosts)}).status == 0);
    CHECK(svm::read_file(hosts).find("10.214.43.11 node2-vm # slurm-vm\n") != std::string::npos);
    CHECK(svm::read_file(hosts).find("10.213.43.11") == std::string::npos);
}

namespace {
// seed_user_script against the image's files `passwd` and `group` (and an
// empty shadow and gshadow), with stand-ins for the account tools that log
// their calls; `tools` sets what each of them exits with (shell lines, e.g.
// "getent=2"). `subids`: the content of subuid and subgid, absent if "-".
// The calls, then the files as the script left them.
struct UserScript {
    std::string calls, passwd, group, shadow, gshadow, subuid, subgid;
};
UserScript user_script(const std::string& passwd, const std::string& group, const std::string& tools = "",
                       const std::string& nsswitch = "passwd: files ldap\ngroup: files ldap\n",
                       const std::string& subids = "-") {
    svm::test::TempDir d("svm-users");
    std::string bin = svm::path_join(d.path(), "bin"), log = svm::path_join(d.path(), "calls");
    std::string etc = svm::path_join(d.path(), "etc");
    svm::mkdir_p(bin, 0755);
    svm::mkdir_p(etc, 0755);
    std::string p_file = svm::path_join(etc, "passwd"), g_file = svm::path_join(etc, "group");
    // usermod -u N NAME and groupmod -g N NAME change the id in the file.
    auto renumber = [](const std::string& file) {
        return "sed -i \"s/^$3:\\([^:]*\\):[^:]*:/$3:\\1:$2:/\" " + svm::shell_quote(file) + "\n";
    };
    for (const char* tool : {"groupadd", "useradd", "usermod", "groupmod", "getent"}) {
        std::string t = tool;
        std::string effect = t == "usermod" ? renumber(p_file) : t == "groupmod" ? renumber(g_file) : "";
        svm::write_file_atomic(svm::path_join(bin, t),
                               "#!/bin/sh\necho \"" + t + " $*\" >>" + svm::shell_quote(log) + "\n" + tools +
                                   "\neval \"rc=\\${" + t + ":-0}\"\n[ \"$rc\" = 0 ] && " +
                                   (effect.empty() ? ":\n" : effect) + "exit $rc\n",
                               0755);
    }
    // getent finds an account (NSS: LDAP) unless `tools` says otherwise.
    if (passwd != "(a directory)") svm::write_file_atomic(p_file, passwd, 0644);
    else svm::mkdir_p(p_file, 0755);
    svm::write_file_atomic(g_file, group, 0644);
    svm::write_file_atomic(svm::path_join(etc, "shadow"), "", 0640);
    svm::write_file_atomic(svm::path_join(etc, "gshadow"), "", 0640);
    if (!nsswitch.empty()) svm::write_file_atomic(svm::path_join(etc, "nsswitch.conf"), nsswitch, 0644);
    for (const char* f : {"subuid", "subgid"})
        if (subids != "-") svm::write_file_atomic(svm::path_join(etc, f), subids, 0644);
    std::string script = "PATH=" + bin + ":$PATH\nfail() { echo \"failed: $*\" >>" + svm::shell_quote(log) +
                         "; exit 1; }\n" + svm::seed_user_script(sample_plan(), etc);
    svm::run({"/bin/sh", "-c", script});
    UserScript r;
    svm::read_file_if_exists(log, r.calls);
    if (passwd != "(a directory)") svm::read_file_if_exists(p_file, r.passwd);
    svm::read_file_if_exists(g_file, r.group);
    svm::read_file_if_exists(svm::path_join(etc, "shadow"), r.shadow);
    svm::read_file_if_exists(svm::path_join(etc, "gshadow"), r.gshadow);
    if (!svm::read_file_if_exists(svm::path_join(etc, "subuid"), r.subuid)) r.subuid = "-";
    if (!svm::read_file_if_exists(svm::path_join(etc, "subgid"), r.subgid)) r.subgid = "-";
    return r;
}
}  // namespace

TEST_CASE("seed: the job's user is made unless the image has it, and a default user holding its ids moves", "[core]") {
    const std::string base = "root:x:0:0:root:/root:/bin/bash\n";
    const std::string groups = "root:x:0:\n";
    const std::string alice = "alice:x:2001:2001::/home/alice:/bin/bash\n";
    // Neither exists, nor does NSS know them: the lines groupadd and useradd
    // -M would write, written by the shell; no account tool runs.
    auto r = user_script(base, groups, "getent=2");
    CHECK(r.calls == "getent group 2001\ngetent passwd alice\n");
    CHECK(r.passwd == base + alice);
    CHECK(r.group == groups + "alice:x:2001:\n");
    CHECK(r.shadow == "alice:!:::::::\n");
    CHECK(r.gshadow == "alice:!::\n");
    CHECK(r.subuid == "-");  // the image keeps no subordinate ids: none made
    // NSS with no other source than the files (and systemd's, which knows
    // no such user): not asked; so with no nsswitch.conf (glibc: files).
    for (const char* nss : {"passwd: files systemd\ngroup:\tfiles  systemd\nshadow: files\n", "passwd: files", ""}) {
        INFO(nss);
        r = user_script(base, groups, "", nss);
        CHECK(r.calls == "");
        CHECK(r.passwd == base + alice);
        CHECK(r.group == groups + "alice:x:2001:\n");
    }
    // Another source for one of them: that one is asked.
    r = user_script(base, groups, "getent=2", "passwd: files\ngroup: files [NOTFOUND=return] sss\n");
    CHECK(r.calls == "getent group 2001\n");
    CHECK(r.passwd == base + alice);
    // A last line without its newline keeps it; the new one goes on its own.
    r = user_script("root:x:0:0:root:/root:/bin/bash", "root:x:0:", "getent=2");
    CHECK(r.passwd == base + alice);
    CHECK(r.group == groups + "alice:x:2001:\n");
    // Both in the image's files (a saved image), the user's on a last line
    // without its newline: no program runs, nothing is written.
    r = user_script(base + "alice:x:2001:2001::/home/alice:/bin/bash", groups + "alice:x:2001:\n");
    CHECK(r.calls == "");
    CHECK(r.passwd == base + "alice:x:2001:2001::/home/alice:/bin/bash");
    CHECK(r.shadow == "");
    // The image's default user holds the ids: moved to free ones first.
    r = user_script(base + "debian:x:2001:2001::/home/debian:/bin/bash\n", groups + "debian:x:2001:\n", "getent=2");
    CHECK(r.calls ==
          "getent passwd 59999\ngetent group 59999\nusermod -u 59999 debian\n"
          "getent passwd 59999\ngetent group 59999\ngroupmod -g 59999 debian\n"
          "getent group 2001\ngetent passwd alice\n");
    CHECK(r.passwd == base + "debian:x:59999:2001::/home/debian:/bin/bash\n" + alice);
    CHECK(r.group == groups + "debian:x:59999:\nalice:x:2001:\n");
    // Accounts only NSS knows (LDAP): getent finds them, nothing is written.
    r = user_script(base, groups);
    CHECK(r.calls == "getent group 2001\ngetent passwd alice\n");
    CHECK(r.passwd == base);
    CHECK(r.group == groups);
    CHECK(r.shadow == "");
    // A group of the job's name with another gid fails the boot, saying so.
    r = user_script(base, groups + "alice:x:3000:\n", "getent=2");
    CHECK(r.calls == "getent group 2001\nfailed: the image has a group alice with another gid than the job's 2001\n");
    CHECK(r.group == groups + "alice:x:3000:\n");
    // Values that cannot be fields of passwd never reach the guest.
    auto bad = sample_plan();
    bad.home = "/home/a:b";
    CHECK_THROWS_WITH(svm::seed_user_script(bad), Catch::Contains("cannot be a field of the guest's passwd"));
    bad = sample_plan();
    bad.user = "al\nice";
    CHECK_THROWS_WITH(svm::seed_user_script(bad), Catch::Contains("cannot be a field"));
    // Subordinate ids where the image keeps them, as useradd gives them:
    // after the highest range, 100000 at least; lines that are not
    // NAME:START:COUNT in decimal are passed over, the user's own kept.
    const std::string nss = "passwd: files\ngroup: files\n";
    r = user_script(base, groups, "", nss, "");
    CHECK(r.subuid == "alice:100000:65536\n");
    CHECK(r.subgid == "alice:100000:65536\n");
    r = user_script(base, groups, "", nss, "debian:165536:65536\nold:100000:65536\nx:08:1\ny:1:2:3\nz:abc:1");
    CHECK(r.subuid == "debian:165536:65536\nold:100000:65536\nx:08:1\ny:1:2:3\nz:abc:1\nalice:231072:65536\n");
    r = user_script(base, groups, "", nss, "alice:300000:65536\n");
    CHECK(r.subuid == "alice:300000:65536\n");
    r = user_script(base, groups, "", nss, "old:100000:65536\nalice:300000:65536");  // last line, no newline
    CHECK(r.subuid == "old:100000:65536\nalice:300000:65536");
    r = user_script(base, groups, "", nss, "big:600000000:65536\n");
    CHECK(r.subuid == "big:600000000:65536\n");  // beyond useradd's limit: none
    CHECK(r.passwd == base + alice);
    // A file that cannot be written fails the boot, saying which.
    r = user_script("(a directory)", groups, "getent=2");
    CHECK(r.calls.find("failed: cannot add the user alice (uid 2001) to ") != std::string::npos);
    CHECK(r.group == groups + "alice:x:2001:\n");
}

TEST_CASE("the remote command recreates the task's environment and directory", "[core]") {
    svm::GuestCommand c;
    c.argv = {"printf", "%s|", "a b", "it's"};
    c.env = {"SLURM_JOB_ID=42", "SLURM_VM_PLAN=/x", "HOME=/root", "SLURM_X=$(touch /tmp/pwn)", "BAD-NAME=1"};
    c.cwd = "/tmp";
    std::string cmd = svm::remote_shell_command(c);
    CHECK(cmd.find("SLURM_VM_PLAN") == std::string::npos);
    CHECK(cmd.find("HOME=") == std::string::npos);
    auto r = svm::run({"/bin/sh", "-c", cmd + "; echo"});  // run it locally in a shell, as the guest would
    CHECK(r.out == "a b|it's|");
    auto e =
        svm::run({"/bin/sh", "-c",
                  svm::remote_shell_command({{"sh", "-c", "echo $SLURM_JOB_ID $SLURM_X; pwd"}, c.env, "/tmp", false})});
    CHECK(e.out == "42 $(touch /tmp/pwn)\n/tmp\n");
    auto p = sample_plan();
    auto a = svm::ssh_argv(p, "/usr/libexec/slurm-vm/slurm-vm-exec", false);
    CHECK(std::find(a.begin(), a.end(), "StrictHostKeyChecking=yes") != a.end());
    CHECK(std::find(a.begin(), a.end(),
                    "ProxyCommand='/usr/libexec/slurm-vm/slurm-vm-exec' --proxy "
                    "'/run/slurm-vm/node1/job_42/ssh.sock'") != a.end());
    CHECK(a.back() == "node1-vm");
}

TEST_CASE("derived job keys are valid OpenSSH keys, the same on every node, distinct per job and guest", "[core]") {
    std::string secret(48, 'k');
    auto a = svm::job_user_key(secret, 42, 2001);
    auto b = svm::job_user_key(secret, 42, 2001);
    CHECK(a.private_key == b.private_key);
    CHECK(a.public_key != svm::job_user_key(secret, 43, 2001).public_key);
    CHECK(a.public_key != svm::job_user_key(std::string(48, 'x'), 42, 2001).public_key);
    auto h1 = svm::guest_host_key(secret, 42, "node1"), h2 = svm::guest_host_key(secret, 42, "node2");
    CHECK(h1.public_key != h2.public_key);
    svm::test::TempDir d_dir("svm-unit");
    std::string d = d_dir.path();
    svm::write_file_atomic(d + "/k", a.private_key, 0600);
    // OpenSSH itself must accept the private key and derive the same public key.
    auto r = svm::run({"ssh-keygen", "-y", "-f", d + "/k"});
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(svm::trim(r.out) == svm::trim(a.public_key));
    // RFC 8032 test vector 1: the public key of this seed.
    std::string seed;
    const char* hex = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
    for (int i = 0; i < 64; i += 2) seed += static_cast<char>(std::stoi(std::string(hex + i, 2), nullptr, 16));
    auto v = svm::ed25519_from_seed(seed, "t");
    svm::write_file_atomic(d + "/v.pub", v.public_key, 0644);
    auto fp = svm::run({"ssh-keygen", "-l", "-f", d + "/v.pub"});
    CHECK(fp.status == 0);
    CHECK(v.public_key.rfind("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINdamAGCsQq31Uv+08lkBzoO4XLz2qYjJa8CGmj3B1Ea", 0) ==
          0);
}

TEST_CASE("domain XML with passed-through devices: hostdevs, NUMA-bound memory, valid for libvirt", "[core]") {
    svm::DomainSpec s;
    s.name = "slurm-vm-7-n1";
    s.type = "kvm";
    s.host_cpus = {8, 9};
    s.overlay = "/run/o.qcow2";
    s.base = "/img.raw";
    s.base_format = "raw";
    s.hostdevs = {{"0000:3b:00.0", "gpu", 1}, {"0000:3b:00.1", "companion", 1}, {"0000:5e:00.3", "vf", 1}};
    s.numa_node = 1;
    std::string x = svm::domain_xml(s);
    CHECK(x.find("<memory mode='strict' nodeset='1'/>") != std::string::npos);
    CHECK(x.find("<hostdev mode='subsystem' type='pci' managed='no'>") != std::string::npos);
    CHECK(x.find("<address domain='0x0000' bus='0x3b' slot='0x00' function='0x1'/>") != std::string::npos);
    CHECK(x.find("<address domain='0x0000' bus='0x5e' slot='0x00' function='0x3'/>") != std::string::npos);
    CHECK(svm::test::domain_validates(x));
    s.hostdevs = {{"nonsense", "gpu", 1}};
    CHECK_THROWS_AS(svm::domain_xml(s), svm::Error);
}

TEST_CASE("the guest's state file: phases and reasons round-trip, a normal end is no failure", "[core]") {
    using P = svm::GuestState::Phase;
    for (const char* t : {"prepared", "booting", "login", "ready", "failed: no image: x", "stopped: the guest crashed"})
        CHECK(svm::GuestState::parse(t).text() == t);
    CHECK(svm::GuestState::parse("failed: a: b\n").reason == "a: b");
    CHECK(svm::GuestState::parse("failed: a").failure() == "a");
    CHECK(svm::GuestState::parse("stopped: the guest crashed").failure() == "the guest crashed");
    CHECK(svm::GuestState::parse(std::string("stopped: ") + svm::kJobEnded).failure().empty());
    CHECK(svm::GuestState::parse("ready").failure().empty());
    CHECK(svm::GuestState::parse("ready").phase == P::ready);
    CHECK_FALSE(svm::GuestState::parse("ready").ended());
    for (const char* t : {"", "readyish", "ready: x", "failed", "garbage: x"})
        CHECK(svm::GuestState::parse(t).phase == P::none);
}
