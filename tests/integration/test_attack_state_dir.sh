#!/bin/bash
# Attack (issue: one job's user must never reach root, another job, or the
# node): with a job running, its user and another user try what a process on
# the node could do against root's state directory. The job's directory is
# root's, 0700, with only "pass through" for the job's user; libvirt's tree
# for the guest is root's and the job's group's (the user is not in it);
# QEMU's files (overlay, seed, console) are out of the user's reach; QEMU's
# memory and descriptors cannot be inspected through /proc; QEMU has a /dev
# of its own with only the guest's devices; and the guest,
# root in it (the user's image), cannot fill the node's /run through its
# console (the keeper caps it). Nothing drains.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/attacker_image.sh"

wd="$(workdir)"
img="$(attacker_copy "$wd")" || fail "could not build the attacker's image"
cap_kib="$(cluster_setting console_max_kib 16384)"
flood_kib=$((cap_kib * 3))
cat >"$wd/job.sh" <<SCRIPT
#!/bin/sh
# Root in the guest floods the serial console (${flood_kib} KiB).
/usr/local/bin/rootsh -c 'head -c $((flood_kib * 1024)) /dev/zero | tr "\\\\000" "x" >/dev/ttyS0; echo >/dev/ttyS0'
echo flooded
SCRIPT
id="$(held_vm_job "$wd" "the console flood" -N1 -w node1 -t 8 --vm-image="$img")"
dir="$SVM_STATE_ROOT/node1/job_$id"
ovl="/var/lib/slurm-vm/node1/overlays/job_$id/overlay.qcow2"
[[ -f "$ovl" ]] || fail "job $id has no overlay at $ovl"

u() { as_user "$SVM_USER" sh -c "$1" >/dev/null 2>&1; }
o() { as_user "$SVM_USER2" sh -c "$1" >/dev/null 2>&1; }
# What the job's user needs, and nothing more.
u "cat '$dir/plan.json' '$dir/state' '$dir/id_ed25519'" || fail "$SVM_USER cannot read the plan, state and key its tasks need"
u "ls '$dir'" && fail "$SVM_USER can list root's job directory"
u "touch '$dir/x'" && fail "$SVM_USER created a file in root's job directory"
u "mv '$dir/plan.json' '$dir/p'" && fail "$SVM_USER renamed a file in root's job directory"
u "ls '$dir/libvirt'" && fail "$SVM_USER reached into libvirt's tree for the guest"
u "cat '$dir/seed.iso'" && fail "$SVM_USER read the guest's seed (its host key)"
u "test -w '$ovl' || test -r '$ovl' || ls '$(dirname "$ovl")'" && fail "$SVM_USER can reach the overlay"
u "echo forged >>'$dir/console.log'" && fail "$SVM_USER wrote into the guest's console log"
u "echo forged >>'$dir/id_ed25519'" && fail "$SVM_USER can write the key file"
owned="$(find "$dir" -maxdepth 1 -user "$SVM_USER" -printf '%f ' )"
[[ -z "$owned" ]] || fail "files of $SVM_USER in root's job directory: $owned"
q="$(pgrep -f "guest=slurm-vm-$id-node1," | head -n1)"
[[ -n "$q" ]] || fail "no QEMU for job $id"
# QEMU got the image, kernel and initrd without their paths: the image as a
# descriptor (an fdset), the kernel and initrd as root's copies.
args="$(tr '\0' '\n' <"/proc/$q/cmdline")"
for f in "$img" "$VM_TEST_KERNEL" "$VM_TEST_INITRD"; do
    grep -qF "$f" <<<"$args" && fail "QEMU's command line names the user's $f"
done
grep -q '/dev/fdset/' <<<"$args" || fail "QEMU does not get the image as a descriptor"
# QEMU's /dev is its own: only the devices a guest needs (a mount namespace).
# (-r: QEMU's own root, which need not be its mount namespace's root, as in
# a chroot.)
qdev="$(nsenter -t "$q" -m -r ls /dev | tr '\n' ' ')"
for e in $qdev; do
    case "$e" in full|kvm|null|ptmx|pts|random|shm|urandom|zero|vfio|hugepages|hugepages*|mqueue|net) ;;
        *) fail "QEMU sees /dev/$e of the host (its /dev: $qdev)" ;;
    esac
done
[[ "$(nsenter -t "$q" -m readlink /proc/self/ns/mnt)" != "$(readlink /proc/self/ns/mnt)" ]] ||
    fail "QEMU shares the host's mount namespace"
u "cat /proc/$q/environ" && fail "$SVM_USER read QEMU's environment"
# Listing QEMU's descriptor numbers is the owner's; following one is not.
# (By its end: in a chroot, the kernel shows a path outside the reader's root
# from the root of QEMU's namespace.)
ofd="$(find "/proc/$q/fd" -lname "*$ovl" -printf '%f\n' | head -n1)"
[[ -n "$ofd" ]] || fail "QEMU of job $id holds no descriptor of its overlay"
u "head -c1 /proc/$q/fd/$ofd" && fail "$SVM_USER opened the overlay through QEMU's descriptor $ofd"
u "readlink /proc/$q/fd/$ofd" && fail "$SVM_USER followed QEMU's descriptor $ofd"
u "head -c1 /proc/$q/mem" && fail "$SVM_USER read QEMU's memory"
# Another user sees nothing of the job.
o "cat '$dir/plan.json'" && fail "$SVM_USER2 read job $id's plan"
o "cat '$dir/state'" && fail "$SVM_USER2 read job $id's state"
o "cat '$dir/domain.xml'" && fail "$SVM_USER2 read job $id's domain"
o "head -c1 '$dir/kernel'" && fail "$SVM_USER2 read job $id's kernel (the node's copy of the user's)"
[[ "$(stat -c '%U %a %h' "$dir/kernel")" == "root 444 "* && "$(stat -c %h "$dir/kernel")" -ge 2 ]] ||
    fail "job $id's kernel is not a link to the node's copy, root's 0444: $(stat -c '%U %a %h' "$dir/kernel")"
# The node's caches of what an image version and virtiofsd say, and of the
# kernels and initrds given (a kept qemu-img verdict lets a later job skip
# qemu-img; a kept overlay or kernel becomes the next job's): root's alone,
# neither readable nor writable by a user, so no user can plant a verdict,
# an overlay or a kernel.
caches=(image-checks overlays boot-files)
[[ "$(cluster_setting shares_via virtiofs)" == virtiofs ]] && caches+=(virtiofsd-kinds)
for c in "${caches[@]}"; do
    cd_="$SVM_STATE_ROOT/node1/$c"
    [[ "$(stat -c '%U %a' "$cd_" 2>/dev/null)" == "root 700" ]] ||
        fail "$cd_ is not root's 0700 after job $id: $(stat -c '%U %a' "$cd_" 2>&1)"
    u "ls '$cd_'" && fail "$SVM_USER listed the node's cache $cd_"
    u "touch '$cd_/planted'" && fail "$SVM_USER planted a file in the node's cache $cd_"
    u "cat '$cd_'/*" && fail "$SVM_USER read the node's cache $cd_"
done
# The console stayed within its cap (plus the 64 KiB kept and a line).
size=$(stat -c %s "$dir/console.log")
(( size <= (cap_kib + 80) * 1024 )) || fail "the console log grew to $size bytes (cap ${cap_kib} KiB)"
grep -q "slurm-vm: console cut at" "$dir/console.log" || fail "the console flood was not cut ($size bytes)"
log "console after a ${flood_kib} KiB flood: $size bytes"

release_job "$id"
wait_ended "$id" COMPLETED 300 "$wd/slurm-$id.out"
wait_clean "$id" 120
no_node_drained
pass "root's job directory, libvirt's tree, QEMU's files and /proc stayed out of the users' reach; the console flood was capped"
