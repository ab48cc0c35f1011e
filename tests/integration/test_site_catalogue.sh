#!/bin/bash
# Virtual nodes offered by the site: a catalogue image by name (`slurm-vm
# images` lists it), a partition whose jobs run in a VM unless they say
# --vm-image=none, and one that requires a VM: there --vm-image=none is
# refused by sbatch with one sentence (and by the node when sbatch could not
# see the partition: the job fails, no node drains), and a job without
# --vm-image runs in the partition's image.
source "$(dirname "$0")/lib.sh"

cfg="$SVM_CLUSTER_DIR/etc/slurm-vm.json"
keep_cluster_config
cleanup() {
    scontrol delete PartitionName=vmonly 2>/dev/null || true
    scontrol delete PartitionName=vmdef 2>/dev/null || true
}
on_exit cleanup
python3 - "$cfg" "$VM_TEST_IMAGE" "$VM_TEST_KERNEL" "$VM_TEST_INITRD" <<'PY'
import json, sys
path, image, kernel, initrd = sys.argv[1:5]
c = json.load(open(path))
c["images"] = {"testimg": {"path": image, "kernel": kernel, "initrd": initrd,
                           "description": "the test suite's guest image"}}
c["partitions"] = {"vmonly": {"vm": "required", "image": "testimg"},
                   "vmdef": {"vm": "default", "image": "testimg"}}
json.dump(c, open(path + ".new", "w"), indent=1)
PY
mv "$cfg.new" "$cfg"
for p in vmonly vmdef; do
    scontrol create PartitionName=$p Nodes=node1,node2 MaxTime=INFINITE State=UP
done

# The catalogue, as a user sees it.
out="$(as_user "$SVM_USER" "$SVM_BUILD_DIR/admin/slurm-vm" images --config "$cfg")" ||
    fail "slurm-vm images failed: $out"
grep -q "^testimg  $VM_TEST_IMAGE" <<<"$out" || fail "slurm-vm images does not list testimg: $out"
grep -q "vmonly: always (--vm-image=none is refused); image testimg" <<<"$out" ||
    fail "slurm-vm images does not show vmonly's policy: $out"
pass "slurm-vm images lists the catalogue and the VM partitions"

wd="$(workdir)"
cat >"$wd/job.sh" <<'JOB'
#!/bin/bash
echo "HOSTNAME=$(hostname)"
JOB
# The partition only in the script, where sbatch's plugin cannot see it.
printf '#!/bin/bash\n#SBATCH -p vmonly\necho "HOSTNAME=$(hostname)"\n' >"$wd/hidden.sh"
chmod 755 "$wd"/*.sh
chown -R "$SVM_USER:" "$wd"
before="$(squeue -h -o %i | wc -l)"

# Refused at submit, one sentence each.
sbatch_refused "$wd" "--vm-image=none in vmonly" \
    "slurm-vm: partition vmonly runs every job in a virtual machine, so --vm-image=none is refused there" \
    -N1 -p vmonly --vm-image=none job.sh
out="$(cd "$wd" && as_user "$SVM_USER" env SBATCH_PARTITION=vmonly sbatch --parsable -N1 --vm-image=none job.sh 2>&1)" &&
    fail "--vm-image=none with SBATCH_PARTITION=vmonly accepted (job $out)"
grep -q "partition vmonly runs every job" <<<"$out" || fail "SBATCH_PARTITION=vmonly: $out"
sbatch_refused "$wd" "an unknown catalogue name" \
    "slurm-vm: --vm-image=rocky42 is not an image of this site's catalogue (\`slurm-vm images\` lists them" \
    -N1 --vm-image=rocky42 job.sh
[[ "$(squeue -h -o %i | wc -l)" == "$before" ]] || fail "a refused submission created a job"
no_node_drained
pass "refused at submit: --vm-image=none where a VM is required, an unknown image name"

# Jobs: no --vm-image in vmonly (the partition's image), a catalogue name in
# the default partition, --vm-image=none in vmdef (the host), and the hidden
# partition (refused by the node).
j_part="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -p vmonly -w node1 --mem=1500 job.sh)"
j_name="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -w node2 --mem=1500 --vm-image=testimg job.sh)"
j_host="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 -p vmdef --vm-image=none job.sh)"
j_hidden="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N1 --vm-image=none hidden.sh)"
log "jobs: partition image $j_part, catalogue name $j_name, host $j_host, hidden partition $j_hidden"

st="$(wait_job "$j_host" 300)"
[[ "$st" == COMPLETED ]] || fail "--vm-image=none in vmdef: job $j_host $st: $(cat "$wd/slurm-$j_host.out")"
grep -q "^HOSTNAME=" "$wd/slurm-$j_host.out" && ! grep -q -- "-vm$" "$wd/slurm-$j_host.out" ||
    fail "--vm-image=none in vmdef did not run on the host: $(cat "$wd/slurm-$j_host.out")"
pass "--vm-image=none in a partition that defaults to VMs runs on the host (job $j_host)"

st="$(wait_job "$j_hidden" 300)"
[[ "$st" == FAILED ]] || fail "the node did not refuse --vm-image=none in vmonly (job $j_hidden is $st): $(cat "$wd/slurm-$j_hidden.out" 2>/dev/null)"
grep -q "partition vmonly runs every job in a virtual machine" "$wd/slurm-$j_hidden.out" ||
    fail "job $j_hidden's output lacks the reason: $(cat "$wd/slurm-$j_hidden.out")"
grep -q "^HOSTNAME=" "$wd/slurm-$j_hidden.out" && fail "job $j_hidden ran on the host: $(cat "$wd/slurm-$j_hidden.out")"
pass "the node refuses --vm-image=none in vmonly when sbatch did not see the partition (job $j_hidden failed, said why)"

for j in "$j_part" "$j_name"; do
    st="$(wait_job "$j" 900)"
    [[ "$st" == COMPLETED ]] || fail "job $j is $st: $(cat "$wd/slurm-$j.out")"
done
grep -qx "HOSTNAME=node1-vm" "$wd/slurm-$j_part.out" ||
    fail "a job without --vm-image in vmonly did not run in the guest: $(cat "$wd/slurm-$j_part.out")"
grep -qx "HOSTNAME=node2-vm" "$wd/slurm-$j_name.out" ||
    fail "--vm-image=testimg did not run in the guest: $(cat "$wd/slurm-$j_name.out")"
for j in "$j_part" "$j_name"; do
    comment="$(sacct -n -X -P -j "$j" -o AdminComment 2>/dev/null || true)"
    python3 - "$comment" "$VM_TEST_IMAGE" <<'PY' || fail "job $j's VM record does not name the catalogue image: $comment"
import json, sys
n = list(json.loads(sys.argv[1])["slurm_vm"]["nodes"].values())[0]
assert n["source"] == "testimg" and n["image"] == sys.argv[2], n
PY
done
for j in "$j_part" "$j_name" "$j_hidden"; do wait_clean "$j" 120; done
no_node_drained
pass "partition vmonly ran job $j_part in its image, --vm-image=testimg ran job $j_name in the catalogue's image"
