#include "seed.hpp"

#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>

#include "domain_xml.hpp"
#include "error.hpp"
#include "fs.hpp"
#include "irq_profile.hpp"
#include "proc.hpp"
#include "seed_iso.hpp"
#include "srun_relay.hpp"
#include "ssh_keys.hpp"

namespace svm {

std::string ready_marker(const JobPlan& p) {
    return "SLURM_VM_READY job=" + std::to_string(p.job_id) + " node=" + p.node;
}

std::string set_up_marker(const JobPlan& p) {
    return "SLURM_VM_SET_UP job=" + std::to_string(p.job_id) + " node=" + p.node;
}

std::string agent_marker(const JobPlan& p) {
    return "SLURM_VM_AGENT job=" + std::to_string(p.job_id) + " node=" + p.node;
}

std::string seed_meta_data(const JobPlan& p) {
    return "instance-id: slurm-vm-" + std::to_string(p.job_id) + "-" + p.node + "\n" + "local-hostname: " + p.hostname +
           "\n";
}

std::string seed_network_config(const JobPlan& p) {
    if (p.ip.empty()) return "version: 2\nethernets: {}\n";
    std::string s = "version: 2\nethernets:\n  job0:\n    match:\n      macaddress: \"" + p.mac + "\"\n";
    s += "    addresses: [\"" + p.ip + "/" + std::to_string(p.prefix_len) + "\"]\n";
    if (!p.gateway.empty()) s += "    gateway4: \"" + p.gateway + "\"\n";
    return s;
}

namespace {

// Shell lines that wait up to `tries` half-seconds (a driver may still be
// probing) for network interfaces whose address matches the case pattern
// (hex digits, colons and '*' only) and append their names to $var.
std::string wait_for_netdevs(const std::string& var, const std::string& pattern, int tries, const std::string& in) {
    if (pattern.empty() || pattern.find_first_not_of("0123456789abcdefABCDEF:*") != std::string::npos)
        SVM_THROW("not an interface address pattern: \"" + pattern + "\"");
    std::string s;
    s += in + var + "=\"\"\n";
    std::string count;  // no seq(1): the image may be minimal
    for (int i = 1; i <= tries; ++i) count += (i > 1 ? " " : "") + std::to_string(i);
    s += in + "for i in " + count + "; do\n";
    s += in + "  for d in /sys/class/net/*; do\n";
    s += in + "    a=; read -r a <\"$d/address\" 2>/dev/null\n";
    s += in + "    case \"$a\" in " + pattern + ") " + var + "=\"${" + var + ":+$" + var + " }${d##*/}\" ;; esac\n";
    s += in + "  done\n";
    s += in + "  [ -n \"$" + var + "\" ] && break; sleep 0.5\n";
    s += in + "done\n";
    return s;
}

}  // namespace

std::string seed_fabric_script(const JobPlan& p) {
    if (p.fabric_ip.empty()) return "";
    std::string guid;
    for (char c : p.vf_port_guid) guid += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (guid.empty() || guid.find_first_not_of("0123456789abcdef:") != std::string::npos)
        SVM_THROW("the plan's VF port GUID \"" + p.vf_port_guid + "\" is not a GUID");
    auto q = shell_quote;
    std::string addr = p.fabric_ip + "/" + std::to_string(p.fabric_prefix_len);
    std::string s;
    // The VF's IPoIB interface: its 20-byte address ends with the port GUID
    // the host gave the VF. The ib_ipoib driver may still be probing.
    s += "# The job's network: IPoIB on the InfiniBand VF (port GUID " + guid + ").\n";
    s += "modprobe ib_ipoib 2>/dev/null\n";
    s += wait_for_netdevs("ib", "*" + guid, 40, "");
    s += "ib=${ib%% *}\n";
    s += "[ -n \"$ib\" ] || fail " +
         q("no IPoIB interface with port GUID " + guid +
           " (the image needs the InfiniBand drivers: mlx5_ib, ib_ipoib)") +
         "\n";
    s += "ip link set \"$ib\" up || fail \"cannot bring up $ib\"\n";
    s += "ip addr replace " + q(addr) + " dev \"$ib\" || fail \"cannot give $ib " + addr + "\"\n";
    s += "log \"job network: $ib " + addr + "\"\n";
    return s;
}

std::string seed_irq_script(const JobPlan& p) {
    const IrqProfile* prof = find_irq_profile(p.irq_profile);
    if (!prof) SVM_THROW("unknown interrupt moderation profile \"" + p.irq_profile + "\" in the plan");
    if (prof->settings.empty() || p.vf_link_layer.empty()) return "";
    auto q = shell_quote;
    auto lower = [](std::string v) {
        std::transform(v.begin(), v.end(), v.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        return v;
    };
    // What the VF's interface shows in /sys/class/net/*/address: its MAC, or
    // (IPoIB) 20 bytes ending with the port GUID. Used as an unquoted case
    // pattern, so only hex digits and colons pass.
    std::string pattern;
    if (p.vf_link_layer == "infiniband" && !p.vf_port_guid.empty()) pattern = "*" + lower(p.vf_port_guid);
    else if (!p.vf_mac.empty()) pattern = lower(p.vf_mac);
    if (pattern.find_first_not_of("0123456789abcdef:*") != std::string::npos) pattern.clear();
    std::string args;
    for (const auto& [k, v] : prof->settings) args += " " + k + " " + v;
    std::string tag = "interrupt moderation profile " + prof->name;
    std::string s;
    s += "# The VF's interrupt moderation: profile " + prof->name + " (ethtool -C" + args + ").\n";
    s += "svm_irq() {\n";
    s += "  command -v ethtool >/dev/null 2>&1 || { log " +
         q(tag + " not applied: ethtool is not installed in the image") + "; return 0; }\n";
    if (!pattern.empty()) s += wait_for_netdevs("devs", pattern, 20, "  ");
    else s += "  devs=\"\"\n";
    // Else: every NIC with a driver that is not virtio's (the job's network is virtio).
    s += "  if [ -z \"$devs\" ]; then\n";
    s += "    for d in /sys/class/net/*; do\n";
    s += "      [ -e \"$d/device/driver\" ] || continue\n";
    s += "      drv=$(readlink \"$d/device/driver\"); [ \"${drv##*/}\" = virtio_net ] && continue\n";
    s += "      devs=\"$devs ${d##*/}\"\n";
    s += "    done\n";
    s += "  fi\n";
    s += "  [ -n \"$devs\" ] || { log " + q(tag + " not applied: no network interface of the VF found") +
         "; return 0; }\n";
    s += "  for dev in $devs; do\n";
    s += "    if out=$(ethtool -C \"$dev\"" + args + " 2>&1); then\n";
    s += "      log \"" + tag + " applied to $dev\"\n";
    s += "      continue\n";
    s += "    fi\n";
    // Drivers differ in what they accept: take what they do, say what they refused.
    s += "    ok=\"\"; no=\"\"\n";
    s += "    set --" + args + "\n";
    s += "    while [ $# -ge 2 ]; do\n";
    s += "      if ethtool -C \"$dev\" \"$1\" \"$2\" >/dev/null 2>&1; then ok=\"$ok $1 $2\"; else no=\"$no $1 $2\"; "
         "fi\n";
    s += "      shift 2\n";
    s += "    done\n";
    s += "    log \"" + tag +
         " on $dev: the driver refused$no (ethtool: $(echo \"$out\" | head -n 1))${ok:+; applied$ok}\"\n";
    s += "  done\n";
    s += "}\n";
    s += "svm_irq\n";
    return s;
}

std::string seed_shares_script(const JobPlan& p, const std::string& filesystems) {
    if (p.shares.empty()) return "";
    auto q = shell_quote;
    bool vfs = p.shares_via == "virtiofs";
    std::string fs = vfs ? "virtiofs" : "9p";
    std::string s;
    s += "# The job's shares (" + fs + ").\n";
    // The kernel's file systems read by the shell (no process); the module
    // loaded only when missing.
    s += "svm_fs() { while read -r a b; do [ \"$a\" = \"$1\" ] || [ \"$b\" = \"$1\" ] && return 0; done "
         "<" +
         shell_quote(filesystems) + "; return 1; }\n";
    s += vfs ? "svm_fs virtiofs || modprobe virtiofs 2>/dev/null\n"
             : "{ svm_fs 9p && [ -d /sys/module/9pnet_virtio ]; } || { modprobe 9pnet_virtio; modprobe 9p; } "
               "2>/dev/null\n";
    // An image whose kernel cannot mount them fails the job at once, saying so.
    s += "svm_fs " + fs + " || fail " +
         q("the image's kernel has no " + fs + " file system (" +
           (vfs ? "CONFIG_VIRTIO_FS: every current distribution kernel has it as the module virtiofs"
                : "CONFIG_9P_FS and CONFIG_NET_9P_VIRTIO: Debian's cloud and RHEL-family kernels lack them; the site "
                  "can serve shares over virtiofs") +
           "), so the job's directories cannot be shown in the guest") +
         "\n";
    for (size_t i = 0; i < p.shares.size(); ++i) {
        std::string tag = "svmshare" + std::to_string(i);
        std::string opts = vfs ? "-t virtiofs" : "-t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none";
        s += "{ [ -d " + q(p.shares[i]) + " ] || mkdir -p " + q(p.shares[i]) + "; } && mount " + opts + " " + tag +
             " " + q(p.shares[i]) + " || fail " + q("cannot mount " + p.shares[i] + " (" + fs + ")") + "\n";
    }
    return s;
}

std::string seed_sshd_start_script(const std::string& systemd_dir) {
    return "if [ -d " + shell_quote(systemd_dir) +
           " ]; then\n"
           "  u=ssh.service; systemctl cat $u >/dev/null 2>&1 || u=sshd.service\n"
           "  if systemctl is-active --quiet $u; then systemctl restart $u || fail \"restart $u\"\n"
           "  else systemctl --no-block start $u || fail \"start $u\"; fi\n"
           "elif [ -s /run/sshd.pid ] && kill -HUP \"$(cat /run/sshd.pid)\" 2>/dev/null; then :\n"
           "else /usr/sbin/sshd || fail sshd; fi\n";
}

std::string seed_no_motd_script(const std::string& pam_file) {
    std::string f = shell_quote(pam_file);
    return "if [ -f " + f + " ]; then sed -i 's/^[[:space:]]*session[[:space:]]\\{1,\\}optional[[:space:]]\\{1,\\}" +
           "pam_motd\\.so/# slurm-vm, no MOTD in job sessions: &/' " + f + "; fi\n";
}

std::string agent_script() {
    // $1 its command port, $2 stdout's, $3 stderr's, $4 the job's user, $5
    // its directory (root's, with the FIFO "srun"), $6 runuser, $7 setsid.
    // Its environment is already clean (seed_agent_script). The header:
    // magic, nonce, lengths of the command and of its stdin, pid file. Few
    // processes: each costs tens of milliseconds of an emulated guest's one
    // busy vCPU. runuser in su's form ("-s SHELL -c CMD -- USER") starts the
    // command in a session of its own and sets SHELL, HOME, USER and LOGNAME:
    // no env or setsid to start. Not for root (util-linux keeps root's
    // session): then setsid does, as before. The command (POSIX sh, made on
    // the host) runs in /bin/sh, lighter to start than a login shell such as
    // bash (tens of ms under emulation); SHELL is set back to the user's.
    return R"AGENT(exec 3<>"$1" 4<>"$2" 5<>"$3" || exit 1
IFS=' ' read -r m n cl il pf <&3 || exit 0
[ "$m" = SVM-AGENT-1 ] || exit 0
case "$n" in ''|*[!0-9a-f]*) exit 0;; esac
case "$cl:$il" in *[!0-9:]*|:*|*:) exit 0;; esac
case "$pf" in /*) case "$pf" in *[!A-Za-z0-9._/-]*) exit 0;; esac;; *) exit 0;; esac
: >"$5/taken"
c=$(head -c "$cl" <&3; echo .); c=${c%.}
i=/dev/null
if [ "$il" -gt 0 ]; then i="$5/stdin"; (umask 077; head -c "$il" <&3 >"$i") && chown "$4" "$i" || exit 1; fi
s= id=; while IFS=: read -r u _ x _ _ _ sh; do [ "$u" = "$4" ] && s=$sh id=$x && break; done </etc/passwd
if [ -z "$id" ]; then e=$(getent passwd "$4") && s=${e##*:} && id=${e#*:*:} && id=${id%%:*}; fi
[ -x "$s" ] || s=/bin/sh
exec 6<>"$5/srun" || exec 6</dev/null
cd / && umask 022
if [ "$id" != 0 ]; then SVM_SHELL=$s "$6" -s /bin/sh -c 'SHELL=$SVM_SHELL; unset SVM_SHELL; '"$c" -- "$4" <"$i" >&4 2>&5 3>&- 6>&- &
else SHELL="$s" "$6" -u "$4" -- "$7" /bin/sh -c "$c" <"$i" >&4 2>&5 3>&- 6>&- &
fi
t=$!
(while IFS=' ' read -r w a <&3; do
  [ "$w" = signal ] || continue
  case "$a" in ''|*[!A-Z0-9]*) continue;; esac
  p=$(cat "$pf" 2>/dev/null)
  case "$p" in ''|*[!0-9]*|1) kill -s "$a" "$t";; *) kill -s "$a" -- "-$p" || kill -s "$a" "$p";; esac
done) 2>/dev/null 4>&- 5>&- 6>&- &
r=$!
(while read -r _ <&6; do echo srun >&3; done) 2>/dev/null 4>&- 5>&- &
w=$!
wait "$t"; rc=$?
[ -p "$5/started" ] && { echo ended 1<>"$5/started"; } 2>/dev/null
kill "$r" "$w" 2>/dev/null; wait "$r" "$w"
[ "$i" = /dev/null ] || rm -f "$i"
printf %s "$n" >&4; printf %s "$n" >&5
echo "exit $rc" >&3
while IFS=' ' read -r w a <&3; do [ "$w" = sync ] && { sync; echo "synced $?" >&3; }; done
)AGENT";
}

std::string seed_agent_script(const JobPlan& p) {
    std::string s;
    s += "# The job's first command, without SSH: the guest's agent on the serial ports " +
         std::string(kAgentPortNames[0]) + "* (see seed.hpp).\n";
    s += "[ -d /sys/module/virtio_console ] || modprobe virtio_console 2>/dev/null\n";
    s += "a= ao= ae=\n";
    s += "for v in /sys/class/virtio-ports/*; do read -r nm <\"$v/name\" 2>/dev/null || continue; case \"$nm\" in";
    const char* vars[kAgentPorts] = {"a", "ao", "ae"};
    for (size_t i = 0; i < kAgentPorts; ++i)
        s += " " + std::string(kAgentPortNames[i]) + ") " + vars[i] + "=/dev/${v##*/};;";
    s += " esac; done\n";
    s += "ru=$(command -v runuser) ss=$(command -v setsid)\n";
    s += "if [ -c \"$a\" ] && [ -c \"$ao\" ] && [ -c \"$ae\" ] && [ -n \"$ru\" ] && [ -n \"$ss\" ]; then\n";
    s += "  \"$ss\" env -i PATH=/usr/local/bin:/usr/bin:/bin /bin/sh -c " + shell_quote(agent_script()) +
         " svm-agent \"$a\" \"$ao\" \"$ae\" " + shell_quote(p.user) + " " + kGuestFlagDir +
         " \"$ru\" \"$ss\" </dev/null >/dev/null 2>&1 &\n";
    s += "  log " + shell_quote(agent_marker(p)) + "\n";
    s += "fi\n";
    return s;
}

namespace {

// A file's whole content as one `printf` of the shell (a builtin: no process).
std::string write_file_line(const std::string& path, const std::string& content) {
    return "printf %s " + shell_quote(content) + " >" + path + "\n";
}

// A file installed whole by one process (`install -D OPTIONS`: its directory
// too) from a here-document ended by `end`; the boot fails with `why` (a
// shell word) if it cannot be. /proc/self/fd/0: an image without udev has
// no /dev/stdin.
std::string install_from_here_doc(const std::string& options, const std::string& path, std::string content,
                                  const std::string& end, const std::string& why) {
    if (content.empty() || content.back() != '\n') content += '\n';
    if (content.find("\n" + end + "\n") != std::string::npos || content.rfind(end + "\n", 0) == 0)
        SVM_THROW(path + " would contain the line " + end);
    return "install -D " + options + " /proc/self/fd/0 " + path + " <<'" + end + "' || fail " + why + "\n" + content +
           end + "\n";
}

// srun for the batch script (lib/guest/srun_relay.hpp), first on its PATH:
// installed here, so that the job's first command starts no program to make it.
std::string seed_srun_script() {
    std::string dir = kGuestSrunDir;
    return install_from_here_doc("-m 0755", dir + "/srun", guest_srun_shim(), "SVM_SRUN",
                                 "\"cannot install srun in " + dir + "\"");
}

// What the job's commands need of SSH as clients (mpirun logging into the
// other guests): the job's key, its guests' host keys, the settings.
std::string ssh_client_script(const JobPlan& p, const SeedKeys& k) {
    std::string s;
    s += "[ -d /etc/ssh/ssh_config.d ] || mkdir -p -m 0755 /etc/ssh/ssh_config.d\n";
    s += write_file_line("/etc/ssh/ssh_known_hosts", k.known_hosts);
    // The key, the user's, and its directory.
    s += install_from_here_doc("-m 0600 -o " + std::to_string(p.uid) + " -g " + std::to_string(p.gid),
                               "/etc/ssh/slurm-vm/id_ed25519", k.user_private, "SVM_KEY",
                               "\"cannot write the job's SSH key\"");
    s += write_file_line("/etc/ssh/ssh_config.d/slurm-vm.conf",
                         "Host *\n"
                         "  IdentityFile /etc/ssh/slurm-vm/id_ed25519\n"
                         "  StrictHostKeyChecking yes\n"
                         "  GlobalKnownHostsFile /etc/ssh/ssh_known_hosts\n"
                         "  UserKnownHostsFile /dev/null\n"
                         "  KexAlgorithms " +
                             std::string(kGuestKex) +
                             "\n"
                             "  LogLevel ERROR\n");
    return s;
}

// What sshd needs: the guests' host key, the job's authorized key, its
// settings, no MOTD, its privilege separation directory. Keys live outside
// the user's home (which may be the user's real home, shared).
std::string ssh_server_script(const SeedKeys& k) {
    std::string s;
    s += "[ -d /etc/ssh/sshd_config.d ] || mkdir -p -m 0755 /etc/ssh/sshd_config.d\n";
    s += "umask 077\n";
    s += write_file_line("/etc/ssh/slurm-vm/ssh_host_ed25519_key", k.host_private);
    s += "umask 022\n";
    s += write_file_line("/etc/ssh/slurm-vm/ssh_host_ed25519_key.pub", trim(k.host_public) + "\n");
    s += write_file_line("/etc/ssh/slurm-vm/authorized_keys", trim(k.user_public) + "\n");
    s += write_file_line("/etc/ssh/sshd_config.d/slurm-vm.conf",
                         "HostKey /etc/ssh/slurm-vm/ssh_host_ed25519_key\n"
                         "AuthorizedKeysFile /etc/ssh/slurm-vm/authorized_keys\n"
                         "PasswordAuthentication no\n"
                         "KbdInteractiveAuthentication no\n"
                         "PermitRootLogin no\n"
                         "UseDNS no\n");
    s += seed_no_motd_script();
    s += "grep -q '^Include /etc/ssh/sshd_config.d' /etc/ssh/sshd_config 2>/dev/null || "
         "sed -i '1i Include /etc/ssh/sshd_config.d/*.conf' /etc/ssh/sshd_config\n";
    s += "[ -d /run/sshd ] || mkdir -p -m 0755 /run/sshd\n";  // sshd's privilege separation
    return s;
}

// The guest's NIC, found by its MAC whatever the image names it, gets the
// job's address (one `ip` for both steps).
std::string network_script(const JobPlan& p) {
    if (p.ip.empty()) return "";
    auto q = shell_quote;
    std::string addr = p.ip + "/" + std::to_string(p.prefix_len);
    std::string s = wait_for_netdevs("nic", p.mac, 20, "");
    s += "nic=${nic%% *}\n";
    s += "[ -n \"$nic\" ] || fail \"no network interface with MAC " + p.mac + "\"\n";
    s += "printf 'link set dev %s up\\naddr replace %s dev %s\\n' \"$nic\" " + q(addr) +
         " \"$nic\" | ip -batch - || fail \"cannot give $nic the address " + addr + "\"\n";
    if (!p.gateway.empty()) s += "ip route replace default via " + q(p.gateway) + " 2>/dev/null || true\n";
    return s;
}

}  // namespace

std::string seed_user_script(const JobPlan& p, const std::string& etc) {
    // Fields of passwd and group lines: no separator, no line break.
    for (const std::string* f : {&p.user, &p.group, &p.home})
        if (f->find_first_of(":\n") != std::string::npos)
            SVM_THROW("the job's user, group or home \"" + *f + "\" cannot be a field of the guest's passwd");
    auto q = shell_quote;
    std::string uid = std::to_string(p.uid), gid = std::to_string(p.gid);
    std::string passwd = q(etc + "/passwd"), group = q(etc + "/group");
    std::string s;
    // svm_find FILE FIELD VALUE: the first field (the name) of the line whose
    // FIELD-th field (1 or 3) is VALUE, in $o.
    s += "svm_find() { o=; while IFS=: read -r n _ i _ || [ -n \"$n\" ]; do if [ \"$2\" = 1 ]; then i=$n; fi; "
         "[ \"$i\" = \"$3\" ] && o=$n && return 0; done <\"$1\"; return 1; }\n";
    // svm_add FILE LINE: LINE appended to FILE, on a line of its own even if
    // the file's last line has no newline.
    s += "svm_add() { l=; while IFS= read -r l; do :; done <\"$1\"; [ -z \"$l\" ] || l='\n'; "
         "printf '%s%s\\n' \"$l\" \"$2\" >>\"$1\"; }\n";
    if (p.uid >= 1000 || p.gid >= 1000)
        s += "svm_free_id() { n=59999; while getent passwd $n >/dev/null || getent group $n >/dev/null; do "
             "n=$((n - 1)); done; echo $n; }\n";
    if (p.uid >= 1000)
        s += "svm_find " + passwd + " 3 " + uid + "; [ -z \"$o\" ] || [ \"$o\" = " + q(p.user) +
             " ] || usermod -u \"$(svm_free_id)\" \"$o\" || fail \"usermod $o (it holds uid " + uid + ")\"\n";
    if (p.gid >= 1000)
        s += "svm_find " + group + " 3 " + gid + "; [ -z \"$o\" ] || [ \"$o\" = " + q(p.group) +
             " ] || groupmod -g \"$(svm_free_id)\" \"$o\" || fail \"groupmod $o (it holds gid " + gid + ")\"\n";
    // What groupadd and useradd -M would write, without them: under
    // emulation the two took 0.6 s of the guest's start. svm_nss DB KEY:
    // whether NSS knows KEY beyond the files, asked (getent) only when
    // nsswitch.conf names a source other than files or systemd for DB.
    s += "svm_nss() { while read -r k v || [ -n \"$k\" ]; do [ \"$k\" = \"$1:\" ] || continue; for w in $v; do "
         "case \"$w\" in files|systemd) ;; *) getent \"$1\" \"$2\" >/dev/null; return; esac; done; return 1; "
         "done <" +
         q(etc + "/nsswitch.conf") + "; return 1; } 2>/dev/null\n";
    std::string g = p.group + " (gid " + gid + ")", u = p.user + " (uid " + uid + ")";
    s += "if ! svm_find " + group + " 3 " + gid + " && ! svm_nss group " + gid + "; then\n";
    s += "  ! svm_find " + group + " 1 " + q(p.group) + " || fail " +
         q("the image has a group " + p.group + " with another gid than the job's " + gid) + "\n";
    s += "  svm_add " + group + " " + q(p.group + ":x:" + gid + ":") + " && { [ ! -f " + q(etc + "/gshadow") +
         " ] || svm_add " + q(etc + "/gshadow") + " " + q(p.group + ":!::") + "; } || fail " +
         q("cannot add the group " + g + " to " + etc + "/group") + "\n";
    s += "fi\n";
    // svm_sub FILE: the user's subordinate ids where the image keeps them
    // (rootless containers), as useradd gives them: 65536 from the end of
    // the highest range there, 100000 at least, up to useradd's limit; none
    // if the user has a line there already (one pass over the file). Lines
    // other than NAME:START:COUNT in decimal (no leading zero, which the
    // shell's arithmetic would read as octal) are passed over.
    s += "svm_sub() { [ -f \"$1\" ] || return 0; sm=100000; "
         "while IFS=: read -r sn sa sc || [ -n \"$sn\" ]; do [ \"$sn\" != " +
         q(p.user) +
         " ] || return 0; "
         "case \"$sa:$sc\" in "
         "*[!0-9:]*|*:*:*|:*|*:|0?*|*:0?*|???????????*:*|*:???????????*) continue;; esac; [ $((sa + sc)) -le $sm ] || "
         "sm=$((sa + sc)); done <\"$1\"; [ $((sm + 65535)) -le 600100000 ] || return 0; svm_add \"$1\" " +
         q(p.user + ":") + "\"$sm:65536\" || fail " + q("cannot give the user " + u + " subordinate ids in") +
         " \"$1\"; }\n";
    s += "if ! svm_find " + passwd + " 1 " + q(p.user) + " && ! svm_nss passwd " + q(p.user) + "; then\n";
    s += "  svm_add " + passwd + " " + q(p.user + ":x:" + uid + ":" + gid + "::" + p.home + ":/bin/bash") +
         " && { [ ! -f " + q(etc + "/shadow") + " ] || svm_add " + q(etc + "/shadow") + " " + q(p.user + ":!:::::::") +
         "; } || fail " + q("cannot add the user " + u + " to " + etc + "/passwd") + "\n";
    s += "  svm_sub " + q(etc + "/subuid") + "; svm_sub " + q(etc + "/subgid") + "\n";
    s += "fi\n";
    return s;
}

std::string seed_hosts_script(const JobPlan& p, const std::string& files) {
    std::string hosts;
    for (const auto& peer : p.peers)
        hosts += (peer.fabric_ip.empty() ? peer.ip : peer.fabric_ip) + " " + peer.hostname + " # slurm-vm\n";
    std::string s;
    s += "svm_hosts() { h=; while IFS= read -r l || [ -n \"$l\" ]; do case \"$l\" in *'# slurm-vm') ;; *) h=\"$h$l\n\" "
         ";; esac; done <\"$1\"; printf '%s%s' \"$h\" \"$2\" >\"$1\"; }\n";
    s += "for hf in " + files + "; do if [ -f \"$hf\" ]; then svm_hosts \"$hf\" " + shell_quote(hosts) + "; fi; done\n";
    return s;
}

std::string seed_user_data(const JobPlan& p, const SeedKeys& k) {
    auto q = shell_quote;
    std::string s;
    // A boothook: cloud-init runs it as root on every boot, early in its
    // network stage, before sshd and the image's other services start (a
    // user-data script would wait for all of them: about 12 s of a stock
    // image's boot under emulation). Later modules of that stage still run
    // after it: see the hosts and sshd lines below. Under emulation every
    // process costs tens of milliseconds of the guest's one busy vCPU: what
    // the job's first command needs comes first, with the shell's builtins
    // where they do; what only sshd needs comes after the flag "ready".
    s += "#cloud-boothook\n";
    s += "#!/bin/sh\n";
    s += "# slurm-vm: per-boot settings of the guest of job " + std::to_string(p.job_id) + " on " + p.node + ".\n";
    s += "# Generated on the host; runs as root on every boot (a cloud-init boothook).\n";
    s += "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n";
    s += "log() { echo \"slurm-vm: $*\" >/dev/ttyS0 2>/dev/null || echo \"slurm-vm: $*\"; }\n";
    std::string flags = kGuestFlagDir;
    // The host's entropy (domain_xml.cpp): an image without udev would not
    // load its driver, and SSH waits until the kernel is seeded. First when
    // the job's first command logs into the other guests, else with sshd.
    const std::string rng = "[ -d /sys/module/virtio_rng ] || modprobe virtio_rng 2>/dev/null\n";
    if (p.peers.size() > 1) s += rng;
    s += "[ -e " + flags + " ] && rm -rf " + flags + "; mkdir -p -m 0755 " + flags + " && mkfifo -m 0666 " + flags +
         "/go " + flags + "/srun " + flags + "/started\n";
    // Opened read-write: never blocks; the first command holds it open too.
    s += "svm_wake() { echo go 1<>" + flags + "/go; } 2>/dev/null\n";
    s += "fail() { : >" + flags + "/failed; svm_wake; log \"SLURM_VM_FAILED $*\"; exit 1; }\n";
    // The kernel's hostname written by the shell (no process), as hostname(1) sets it.
    s += "{ echo " + q(p.hostname) + " >/proc/sys/kernel/hostname; } 2>/dev/null || hostname " + q(p.hostname) +
         "; echo " + q(p.hostname) + " >/etc/hostname\n";
    // The shares and the job's working directory in the background, from
    // here: mounting waits on the host's virtiofsd (and loading the module on
    // the disk) while the steps below keep the vCPU busy. Awaited before the
    // flag "ready"; its failure has said why (fail()).
    std::string mounts = seed_shares_script(p);
    if (!p.workdir.empty())
        mounts += "[ -d " + q(p.workdir) + " ] || { mkdir -p " + q(p.workdir) + " && chown " + std::to_string(p.uid) +
                  ":" + std::to_string(p.gid) + " " + q(p.workdir) + " 2>/dev/null; }\n";
    if (!mounts.empty()) s += "(\n" + mounts + ") &\nsvm_mounts=$!\n";
    // The job's traffic goes where the peers' hostnames point: the IPoIB
    // addresses when the job has a fabric, else the bridge's. Also in
    // cloud-init's hosts templates, which an image with manage_etc_hosts
    // renders into /etc/hosts after this script. Earlier lines of ours go
    // (a saved image's); the file is rewritten in place by the shell.
    s += seed_hosts_script(p);
    s += seed_user_script(p);
    s += seed_agent_script(p);  // needs only the user
    s += ssh_client_script(p, k);
    s += seed_srun_script();
    s += network_script(p);
    s += seed_fabric_script(p);
    s += seed_irq_script(p);
    // The job's first command needs no daemon: it may start while the
    // daemon does. The marker (the keeper's readiness, then TCP 22) comes
    // after it.
    // When the agent took it, the daemon waits until that command has
    // started (it says so on the FIFO "started", or the agent once it
    // ended): on one busy vCPU the two would share it, and the command is
    // what the job waits for. Held open from before the flag: no line is lost.
    if (!mounts.empty()) s += "wait \"$svm_mounts\" || exit 1\n";
    s += "exec 7<>" + flags + "/started\n";
    s += ": >" + flags + "/ready; svm_wake; log " + q(set_up_marker(p)) + "\n";
    s += "[ -e " + flags + "/taken ] && read _ <&7; exec 7<&-\n";
    if (p.peers.size() <= 1) s += rng;
    s += ssh_server_script(k);
    s += seed_sshd_start_script();
    s += "log " + q(ready_marker(p)) + "\n";
    return s;
}

void build_seed_iso(const JobPlan& p, const SeedKeys& k, const std::string& out) {
    replace_file(out,
                 iso9660_image("cidata", {{"user-data", seed_user_data(p, k)},
                                          {"meta-data", seed_meta_data(p)},
                                          {"network-config", seed_network_config(p)}}),
                 0600);
}

}  // namespace svm
