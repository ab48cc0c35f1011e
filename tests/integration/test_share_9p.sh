#!/bin/bash
# A site may serve shares over 9p instead of virtio-fs ("shares_via": "9p"):
# node2 set so, a job there sees its submit directory over 9p (served by QEMU
# as the user, no virtiofsd, guest memory not shared), reads and writes it
# as the user, and nothing is left.
source "$(dirname "$0")/lib.sh"

# shellcheck disable=SC2034 # read by the on_exit command below
NODE_CFG="$SVM_CLUSTER_DIR/etc/slurm-vm.node2.json"
on_exit 'rm -f "$NODE_CFG"'
node_shares_9p node2 >/dev/null

wd="$(workdir)"
echo "from the host" >"$wd/in.txt"
chown -R "$SVM_USER:" "$wd"
# shellcheck disable=SC2046 # vm_opts: options, one a word
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node2 -t 5 $(vm_opts) --wrap \
    'grep " $(dirname "$PWD") \| $PWD " /proc/mounts | cut -d" " -f3; cat in.txt; echo "from the guest" >out.txt')"
log "job $id"
st="$(wait_job "$id" 600)"
out="$(cat "$wd/slurm-$id.out" 2>/dev/null)"
[[ "$st" == COMPLETED ]] || fail "job $id ended $st: $out"
grep -qx "9p" <<<"$out" || fail "the submit directory is not a 9p mount in the guest: $out"
grep -qx "from the host" <<<"$out" || fail "the guest did not read the host's file: $out"
[[ "$(cat "$wd/out.txt" 2>/dev/null)" == "from the guest" ]] || fail "the guest's file is not on the host"
[[ "$(stat -c %U "$wd/out.txt")" == "$SVM_USER" ]] || fail "the guest's file is not $SVM_USER's on the host"
grep -q "shares over 9p" "/var/log/slurm-vm/node2/job_$id.log" || fail "the keeper did not log shares over 9p"
wait_clean "$id" 60
no_node_drained
pass "job $id: shares over 9p where the site chose it"
