#!/bin/bash
# Another ordinary user injects frames into a job's network. A 2-node VM job
# of svmuser on node1 and node2; then svmuser2, unprivileged, sends crafted
# VXLAN packets (plain UDP to port 4789) with the job's VNI, posing as the
# peer's guest (10.213.0.11, to the head's guest) and as the peer's host side
# (a TCP SYN to the head's VM record relay, 169.254.0.10:7390): from node2's
# underlay (a node of the job) to node1's address, and on node1 itself to
# 127.0.0.1 and to node1's own underlay address. Counters where frames from
# the VXLAN enter the job's bridge on node1 show that none arrived, while the
# peer's guest traffic did and mpirun between the guests still works. With
# the nodes' output guards flushed for a moment (by root), node1's input guard
# alone still refuses its own users' packets, and the control: node2's (a node
# of the job) then arrive, which proves the crafted packets would.
source "$(dirname "$0")/lib.sh"

port=4789
wd="$(workdir)"
cat >"$wd/job.sh" <<'JOB'
#!/bin/bash
up() { timeout 5 bash -c "exec 3<>/dev/tcp/$1/22" 2>/dev/null; }
for i in $(seq 1 300); do up 10.213.0.11 && break; sleep 1; done
up 10.213.0.11 && echo "peer up" || echo "peer down"
touch ready
while [ ! -e go ]; do sleep 1; done
mpirun hostname | sed "s/^/rank on /"
up 10.213.0.11 && echo "peer still up" || echo "peer lost"
while [ ! -e finish ]; do sleep 1; done
echo done
JOB
chown -R "$SVM_USER:" "$wd"
# The attacker's program, svmuser2's own: crafted VXLAN in plain UDP.
awd="$(workdir "$SVM_USER2")"
cat >"$awd/inject.py" <<'PY'
import socket, struct, sys
src, dst, vni, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
def ip4(a, b, proto, payload):  # id 24301 marks the crafted packets
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 24301, 0, 64, proto, 0, a, b)
    return h[:10] + struct.pack("!H", csum(h)) + h[12:] + payload
def frame(dmac, smac, sip, dip, proto, l4):
    a, b = socket.inet_aton(sip), socket.inet_aton(dip)
    if proto == 6:
        l4 = l4[:16] + struct.pack("!H", csum(a + b + struct.pack("!BBH", 0, 6, len(l4)) + l4)) + l4[18:]
    return bytes.fromhex(dmac) + bytes.fromhex(smac) + b"\x08\x00" + ip4(a, b, proto, l4)
udp = struct.pack("!HHHH", 4242, 4242, 12, 0) + b"inje"
syn = struct.pack("!HHIIBBHHH", 40999, 7390, 1, 0, 5 << 4, 0x02, 65535, 0, 0)
frames = [frame("52540000000a", "52540000000b", "10.213.0.11", "10.213.0.10", 17, udp),
          frame("52540100000a", "52540100000b", "169.254.0.11", "169.254.0.10", 6, syn)]
hdr = struct.pack("!II", 0x08000000, vni << 8)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((src, 0))
sent, refused = 0, 0
for i in range(n):
    for f in frames:
        try:
            s.sendto(hdr + f, (dst, int(sys.argv[5])))
            sent += 1
        except OSError:
            refused += 1
print("sent %d refused %d" % (sent, refused))
PY
chown -R "$SVM_USER2:" "$awd"

# shellcheck disable=SC2046
id="$(cd "$wd" && as_user "$SVM_USER" sbatch --parsable -N2 --ntasks-per-node=1 -w node1,node2 --mem=1200 -t 10 \
    $(vm_opts) job.sh)" || fail "sbatch failed"
vx="svx$(printf %x "$id")"
ns="svmj${id}n0"
log "job $id submitted (VNI $id, $vx)"
end=$(( $(date +%s) + 600 ))
until [[ -e "$wd/ready" ]]; do
    (( $(date +%s) < end )) || fail "job $id never got ready: $(cat "$wd/slurm-$id.out" 2>/dev/null)"
    case "$(job_field "$id" JobState)" in PENDING|RUNNING|CONFIGURING) ;; *) fail "job $id ended: $(cat "$wd/slurm-$id.out" 2>/dev/null)" ;; esac
    sleep 1
done
for n in node1 node2; do
    ip netns exec "svmu-$n" nft list chain inet svm_underlay "job_$id" >/dev/null ||
        fail "no VXLAN guard of job $id in $n's underlay"
done
# Where frames from the VXLAN enter the job's bridge on node1 (root's view).
ip netns exec "$ns" nft -f - <<NFT || fail "cannot add the test's counters in $ns"
table bridge svmtest {
  chain pre {
    type filter hook prerouting priority -300; policy accept;
    iifname "$vx" ip id 24301 tcp dport 7390 counter comment "relay"
    iifname "$vx" ip id 24301 counter comment "crafted"
    iifname "$vx" ip saddr 10.213.0.11 counter comment "peer"
  }
}
NFT
count() { # name -> packets
    ip netns exec "$ns" nft list table bridge svmtest |
        awk -v c="\"$1\"" '$0 ~ "comment " c "$" { for (k = 1; k < NF; k++) if ($k == "packets") s += $(k + 1) } END { print s + 0 }'
}
inject() { # node src dst -> "sent N refused M"
    ip netns exec "svmu-$1" runuser -u "$SVM_USER2" -- /usr/bin/python3 "$awd/inject.py" "$2" "$3" "$id" 100 "$port"
}
log "from node2's underlay, as $SVM_USER2: $(inject node2 10.215.0.2 10.215.0.1)"
log "on node1, to 127.0.0.1: $(inject node1 127.0.0.1 127.0.0.1)"
log "on node1, to its own address: $(inject node1 10.215.0.1 10.215.0.1)"
sleep 1
log "counters on node1: crafted=$(count crafted) relay=$(count relay) peer=$(count peer)"
(( $(count crafted) == 0 )) || fail "another user's crafted frames entered job $id's segment"
(( $(count relay) == 0 )) || fail "another user's TCP reached the head's record relay"

# Without the output guards (flushed by root for a moment, restored after):
# node1's input guard alone still refuses what node1's users send to
# 127.0.0.1 and to its own address; and, the control, the same packets from
# node2 (a node of the job: its address is let in) do arrive, the relay's too.
restore() { ip netns exec "svmu-$1" nft add rule inet svm_underlay output udp dport "$port" meta skuid '>=' 0 counter drop; }
for n in node1 node2; do
    on_exit "ip netns exec svmu-$n nft list chain inet svm_underlay output | grep -q skuid || restore $n"
    ip netns exec "svmu-$n" nft flush chain inet svm_underlay output || fail "cannot flush $n's output guard"
done
log "input guard alone, on node1 to 127.0.0.1: $(inject node1 127.0.0.1 127.0.0.1)"
log "input guard alone, on node1 to its own address: $(inject node1 10.215.0.1 10.215.0.1)"
sleep 1
(( $(count crafted) == 0 )) || fail "node1's input guard let its own users' crafted frames in"
log "control, node2 without its output guard: $(inject node2 10.215.0.2 10.215.0.1)"
for n in node1 node2; do restore "$n" || fail "cannot restore $n's output guard"; done
sleep 1
log "counters on node1: crafted=$(count crafted) relay=$(count relay)"
(( $(count crafted) > 0 )) || fail "the control's crafted frames did not arrive either (the test proves nothing)"
(( $(count relay) > 0 )) || fail "the control's TCP did not reach the relay's address either (the test proves nothing)"

touch "$wd/go"; chown "$SVM_USER:" "$wd/go"
wait_output "$wd/slurm-$id.out" "^peer " "job $id's own traffic" 120
(( $(count peer) > 0 )) || fail "no frame of the peer guest's reached node1's bridge (the counters see nothing)"
touch "$wd/finish"; chown "$SVM_USER:" "$wd/finish"
st="$(wait_job "$id" 300)"
out="$(cat "$wd/slurm-$id.out")"
[[ "$st" == COMPLETED ]] || fail "job $id ended $st: $out"
grep -qx "peer up" <<<"$out" || fail "job $id: its second guest was not reachable: $out"
grep -qx "peer still up" <<<"$out" || fail "job $id: its second guest was lost: $out"
[[ "$(grep -c "^rank on node[12]-vm" <<<"$out")" == 2 ]] || fail "job $id: mpirun did not run on its two guests: $out"
wait_clean "$id" 120
no_node_drained
pass "job $id: $SVM_USER2's crafted VXLAN (from node2, and on node1 to 127.0.0.1 and its own address) reached nothing; the guests' own traffic and mpirun worked; nothing left"
