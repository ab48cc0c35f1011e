#!/bin/bash
# The shares give the guest the job user's rights on the host and nothing
# more: QEMU serves them running as the user, so a file of another user
# (0600, in the submit directory's parent, the user's home) cannot be read
# from the guest, nor a root-owned directory written, while the user's own
# files can.
source "$(dirname "$0")/lib.sh"

wd="$(workdir)"
home="$(dirname "$wd")"
secret="$home/svmtest-secret-of-$SVM_USER2.$$"
rootdir="$home/svmtest-rootdir.$$"
cleanup() { rm -rf "$secret" "$rootdir"; }
on_exit cleanup
echo "not for $SVM_USER" >"$secret"
chown "$SVM_USER2:" "$secret"
chmod 0600 "$secret"
mkdir -p "$rootdir"
chmod 0755 "$rootdir"
echo "mine" >"$wd/mine.txt"
cat >"$wd/job.sh" <<SCRIPT
#!/bin/bash
echo "whoami \$(id -un) in \$(hostname)"
# cat's complaint on stdout too: one stream keeps the lines in order.
cat "$secret" 2>&1 && echo "READ-SECRET" || echo "secret refused"
touch "$rootdir/x" 2>/dev/null && echo "WROTE-ROOTDIR" || echo "rootdir refused"
cat mine.txt
echo "written in the guest" >from-guest.txt
SCRIPT
id="$(vm_batch "$wd" -N1 -t 5)"
wait_ended "$id" COMPLETED 600 "$wd/slurm-$id.out"
out="$(cat "$wd/slurm-$id.out")"
grep -q "^whoami $SVM_USER in node[1-3]-vm$" <<<"$out" || fail "the script did not run as $SVM_USER in a guest: $out"
grep -q "READ-SECRET\|not for" <<<"$out" && fail "the guest read $secret (another user's 0600 file): $out"
grep -q "^secret refused$" <<<"$out" || fail "reading $secret did not fail cleanly: $out"
grep -q "^cat: $secret: Permission denied$" <<<"$out" || fail "reading $secret did not fail with EACCES: $out"
grep -q "WROTE-ROOTDIR" <<<"$out" && fail "the guest wrote into root's $rootdir: $out"
[[ -e "$rootdir/x" ]] && fail "$rootdir/x exists on the host"
grep -q "^mine$" <<<"$out" || fail "the guest could not read the user's own file: $out"
[[ "$(cat "$wd/from-guest.txt" 2>/dev/null)" == "written in the guest" ]] || fail "the guest's file is not on the host"
[[ "$(stat -c %U "$wd/from-guest.txt")" == "$SVM_USER" ]] || fail "the guest's file is not owned by $SVM_USER on the host"
wait_clean "$id" 60
no_node_drained
pass "job $id: another user's 0600 file and a root directory stayed out of reach through the share; the user's own files worked"
