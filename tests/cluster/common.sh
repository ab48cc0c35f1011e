# Shared definitions for tests/cluster/{up,down,env}. Sourced, not executed.
# shellcheck shell=bash disable=SC2034

SVM_CLUSTER_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SVM_REPO="$(cd "$SVM_CLUSTER_SRC/../.." && pwd)"
SVM_CLUSTER_DIR="${SVM_CLUSTER_DIR:-/var/tmp/slurm-vm-cluster}"
SVM_BUILD_DIR="${SVM_BUILD_DIR:-$SVM_REPO/build}"

# Everything the cluster listens on is on 127.0.0.1, on ports no stock install uses.
SVM_CTLD_PORT=17817
SVM_DBD_PORT=17819
SVM_SLURMD_PORT_FIRST=17821 # node1; node2 = +1, node3 = +2
SVM_MYSQL_PORT=17806
SVM_REGISTRY_PORT=17830 # docker-registry: registry images (--vm-image=docker://...)
SVM_NODES=(node1 node2 node3)

# Guest network: each node's "host" network is a namespace of its own
# (svmu-<node>, address 10.215.0.<n>/24 on veth u0) joined to the others by a
# bridge in a further namespace (the underlay switch); the jobs' VXLAN
# segments run between those addresses, so cross-node traffic really crosses
# "hosts". The slurmd daemons themselves stay in this host's namespace.
SVM_UNDERLAY_NS=svmunder
SVM_UNDERLAY_BR=svmubr
SVM_NODE_NS_PREFIX=svmu-
SVM_NETNS=slurmvm # the former shared guest network: removed by down if found

# Daemons started by `up` carry this variable in their environment (and so do
# their children, e.g. slurmstepd), so that `down` can find exactly them.
SVM_MARK_VAR=SVM_TEST_CLUSTER

ETC="$SVM_CLUSTER_DIR/etc"
LOG="$SVM_CLUSTER_DIR/log"
SPOOL="$SVM_CLUSTER_DIR/spool"
RUN="$SVM_CLUSTER_DIR/run"
BIN="$SVM_CLUSTER_DIR/bin"
DB="$SVM_CLUSTER_DIR/mysql"
export SLURM_CONF="$ETC/slurm.conf"

say() { printf '[cluster] %s\n' "$*" >&2; }
die() { printf '[cluster] ERROR: %s\n' "$*" >&2; exit 1; }

# pid_alive PIDFILE [EXE-SUBSTRING]: true if the pid file names a live process
# (whose command line contains EXE-SUBSTRING, when given).
pid_alive() {
    local f="$1" want="${2:-}" pid cmd
    [[ -r "$f" ]] || return 1
    pid="$(tr -dc '0-9' <"$f")"
    [[ -n "$pid" && -d "/proc/$pid" ]] || return 1
    if [[ -n "$want" ]]; then
        cmd="$( { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null)" || return 1
        [[ "$cmd" == *"$want"* ]] || return 1
    fi
    return 0
}

pid_of() { tr -dc '0-9' <"$1"; }

# marked_pids: pids of processes that carry our mark (daemons started by `up`
# for this cluster dir, and their descendants such as slurmstepd).
marked_pids() {
    local p
    for p in /proc/[0-9]*; do
        p="${p#/proc/}"
        [[ "$p" == "$$" || "$p" == "$BASHPID" ]] && continue
        if grep -qsxzF "$SVM_MARK_VAR=$SVM_CLUSTER_DIR" "/proc/$p/environ" 2>/dev/null; then
            echo "$p"
        fi
    done
}

# qemu_pids PATTERN...: pids of qemu-system-* processes whose command line
# contains any PATTERN (fixed strings: directories), where that directory is
# ours: a guest of another cluster on this host (in a mount namespace of its
# own, with its own /run/slurm-vm) has the same paths but not the same files.
qemu_pids() {
    local p cmd exe
    for p in /proc/[0-9]*; do
        p="${p#/proc/}"
        exe="$( { tr '\0' '\n' <"/proc/$p/cmdline"; } 2>/dev/null | head -n1)" || continue
        [[ "$(basename -- "$exe" 2>/dev/null)" == qemu-system* ]] || continue
        cmd="$( { tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null)"
        for pat in "$@"; do
            [[ "$cmd" == *"$pat"* ]] || continue
            [[ ! -e "$pat" || "/proc/$p/root$pat" -ef "$pat" ]] || continue
            echo "$p"
            break
        done
    done
}

# cgroup_pids: pids still inside the job cgroups of our three slurmd (cgroup v1
# puts them under /sys/fs/cgroup/<controller>/slurm_<node>/...).
cgroup_pids() {
    local n
    for n in "${SVM_NODES[@]}"; do
        for c in /sys/fs/cgroup/*/slurm_"$n"; do
            [[ -d "$c" ]] || continue
            find "$c" -name cgroup.procs -exec cat {} + 2>/dev/null
        done
    done | sort -un
}
