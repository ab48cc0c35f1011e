#!/bin/bash
# Two 2-node VM jobs at once on the same two nodes, with job ids equal modulo
# 254 (under the former address scheme they clashed and the second drained a
# node): both run, their guests have the very same addresses and MACs, each on
# a segment of its own (a namespace per job and node, a VXLAN per job between
# the nodes' underlay namespaces). Inside each, mpirun reaches the job's own
# guests. Then the first guest of each job, root in its guest (the attacker
# image), sends TCP, an ARP request, an Ethernet broadcast, a spoofed source
# address and a spoofed source MAC, and tries the head node's VM record relay
# (the host side of the segment); counters in both jobs' namespaces (host
# side, root) show that its own peer got the honest traffic, the spoofed
# frames stopped at its tap, and nothing at all reached the other job.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/attacker_image.sh"

img_src="$(attacker_image)" || fail "no attacker image"
declare -A wd id base smac arpt bcast
base=([a]=4240 [b]=5240)
smac=([a]=52:54:00:00:00:63 [b]=52:54:00:00:00:64)
arpt=([a]=10.213.0.12 [b]=10.213.0.13)
bcast=([a]=10.213.0.99 [b]=10.213.0.98)
script='#!/bin/bash
read -r base smac arpt bcast <params
up() { timeout 5 bash -c "exec 3<>/dev/tcp/$1/22" 2>/dev/null; }
for i in $(seq 1 300); do up 10.213.0.11 && break; sleep 1; done
up 10.213.0.11 && echo "peer up" || echo "peer down"
mpirun cat token | sed "s/^/rank says /"
touch ready
while [ ! -e go ]; do sleep 1; done
timeout 3 bash -c "exec 3<>/dev/tcp/10.213.0.11/$base" 2>/dev/null; echo "tcp sent"
timeout 3 bash -c "exec 3<>/dev/tcp/$arpt/$base" 2>/dev/null; echo "arp sent"
cat >attack.sh <<ATTACK
nic=\$(grep -l 52:54:00:00:00:0a /sys/class/net/*/address | cut -d/ -f5)
ip neigh replace $bcast lladdr ff:ff:ff:ff:ff:ff dev \$nic nud permanent
for i in 1 2 3; do echo b >/dev/udp/$bcast/$((base + 1)); done
ip addr add 10.213.0.77/32 dev \$nic
ip route replace 10.213.0.11/32 dev \$nic src 10.213.0.77
for i in 1 2 3; do echo s >/dev/udp/10.213.0.11/$((base + 2)); done
ip route del 10.213.0.11/32 dev \$nic; ip addr del 10.213.0.77/32 dev \$nic
ip link set \$nic address $smac
for i in 1 2 3; do echo m >/dev/udp/10.213.0.11/$((base + 3)); done
ip link set \$nic address 52:54:00:00:00:0a
ip route add 169.254.0.0/16 dev \$nic
timeout 3 bash -c "exec 3<>/dev/tcp/169.254.0.10/7390" 2>/dev/null && echo "relay reached" || echo "relay not reached"
ip route del 169.254.0.0/16 dev \$nic
ATTACK
/usr/local/bin/rootsh -c "bash $PWD/attack.sh" 2>&1; echo "attacks sent"
sleep 2
touch attacked
while [ ! -e finish ]; do sleep 1; done
echo done'

for j in a b; do
    wd[$j]="$(workdir)"
    printf '%s\n' "$script" >"${wd[$j]}/job.sh"
    echo "token-of-job-$j" >"${wd[$j]}/token"
    echo "${base[$j]} ${smac[$j]} ${arpt[$j]} ${bcast[$j]}" >"${wd[$j]}/params"
    cp "$img_src" "${wd[$j]}/attacker.qcow2"
    chown -R "$SVM_USER:" "${wd[$j]}"
done
submit() { # j
    (cd "${wd[$1]}" && as_user "$SVM_USER" sbatch --parsable -N2 --ntasks-per-node=1 -w node1,node2 --mem=1200 -t 10 \
        --vm-image="${wd[$1]}/attacker.qcow2" --vm-kernel="$VM_TEST_KERNEL" --vm-initrd="$VM_TEST_INITRD" job.sh)
}
id[a]="$(submit a)"
# Job ids up to a + 253 go to held jobs of root's, cancelled at once, so that
# b gets a + 254 (nothing else submits on this cluster meanwhile).
burn=()
while :; do
    x="$(sbatch --parsable --hold -t 1 -o /dev/null --wrap true)"
    burn+=("$x")
    (( x < id[a] + 253 )) || break
done
scancel "${burn[@]}"
id[b]="$(submit b)"
(( id[a] % 254 == id[b] % 254 )) || fail "could not line up the ids: ${id[a]} and ${id[b]}"
log "jobs ${id[a]} and ${id[b]} submitted (equal modulo 254)"

end=$(( $(date +%s) + 600 ))
for j in a b; do
    until [[ -e "${wd[$j]}/ready" ]]; do
        (( $(date +%s) < end )) || fail "job ${id[$j]} never got ready: $(cat "${wd[$j]}/slurm-${id[$j]}.out" 2>/dev/null)"
        st="$(job_field "${id[$j]}" JobState)"
        case "$st" in PENDING|RUNNING|CONFIGURING) ;; *) fail "job ${id[$j]} ended $st: $(cat "${wd[$j]}/slurm-${id[$j]}.out" 2>/dev/null)" ;; esac
        sleep 1
    done
done
log "both jobs run, both mpirun done"

other() { [[ "$1" == a ]] && echo b || echo a; }
# Counters at the first hook every frame passes in a job's namespace, from
# any port (the tap or the VXLAN).
for j in a b; do
    o="$(other "$j")"
    bj=${base[$j]} bo=${base[$o]}  # plain names in the arithmetic below (shellcheck)
    for i in 0 1; do
        ns="svmj${id[$j]}n$i"
        ip netns list | grep -q "^$ns" || fail "no namespace $ns while job ${id[$j]} runs"
        ip netns exec "$ns" nft -f - <<NFT || fail "cannot add the test's counters in $ns"
table bridge svmtest {
  chain pre {
    type filter hook prerouting priority -300; policy accept;
    tcp dport ${base[$j]} counter comment "tcp"
    udp dport $((bj + 1)) counter comment "bcast"
    udp dport $((bj + 2)) counter comment "spoof_ip"
    ether saddr ${smac[$j]} counter comment "spoof_mac"
    tcp dport ${base[$o]} counter comment "other"
    udp dport $((bo + 1))-$((bo + 3)) counter comment "other"
    ether saddr ${smac[$o]} counter comment "other"
    arp daddr ip { ${arpt[$o]}, ${bcast[$o]} } counter comment "other"
    ether type arp arp daddr ip ${arpt[$j]} counter comment "arp"
  }
}
NFT
    done
done
for j in a b; do touch "${wd[$j]}/go"; chown "$SVM_USER:" "${wd[$j]}/go"; done
for j in a b; do
    wait_output "${wd[$j]}/slurm-${id[$j]}.out" "^attacks sent" "job ${id[$j]}'s attacks" 120
    until [[ -e "${wd[$j]}/attacked" ]]; do sleep 1; done
done
count() { # j node_index name -> packets summed over that name's rules
    ip netns exec "svmj${id[$1]}n$2" nft list table bridge svmtest |
        awk -v c="\"$3\"" '$0 ~ "comment " c "$" { for (k = 1; k < NF; k++) if ($k == "packets") s += $(k + 1) } END { print s + 0 }'
}
for j in a b; do
    n0() { count "$j" 0 "$1"; }
    n1() { count "$j" 1 "$1"; }
    c="job ${id[$j]}"
    log "$c counters: guest side tcp=$(n0 tcp) arp=$(n0 arp) bcast=$(n0 bcast) spoof_ip=$(n0 spoof_ip) spoof_mac=$(n0 spoof_mac) other=$(n0 other);" \
        "peer side tcp=$(n1 tcp) arp=$(n1 arp) bcast=$(n1 bcast) spoof_ip=$(n1 spoof_ip) spoof_mac=$(n1 spoof_mac) other=$(n1 other)"
    # Sent: seen where the guest's tap enters its job's bridge.
    for k in tcp arp bcast spoof_ip spoof_mac; do
        (( $(n0 "$k") > 0 )) || fail "$c: its guest's $k traffic never reached its tap (the test proves nothing)"
    done
    (( $(n1 tcp) > 0 )) || fail "$c: its own TCP did not reach its peer's node"
    for k in arp bcast spoof_ip spoof_mac; do
        (( $(n1 "$k") == 0 )) || fail "$c: $k frames of its first guest crossed to its second node"
    done
    for i in 0 1; do
        (( $(count "$j" "$i" other) == 0 )) || fail "$c: frames of the other job's guest reached its namespace on node index $i"
    done
done
for j in a b; do touch "${wd[$j]}/finish"; chown "$SVM_USER:" "${wd[$j]}/finish"; done
for j in a b; do
    st="$(wait_job "${id[$j]}" 300)"
    out="$(cat "${wd[$j]}/slurm-${id[$j]}.out")"
    [[ "$st" == COMPLETED ]] || fail "job ${id[$j]} ended $st: $out"
    grep -qx "peer up" <<<"$out" || fail "job ${id[$j]}: its second guest was not reachable: $out"
    grep -qx "relay not reached" <<<"$out" || fail "job ${id[$j]}: root in the guest reached the head's record relay: $out"
    [[ "$(grep -c "^rank says token-of-job-$j$" <<<"$out")" == 2 ]] ||
        fail "job ${id[$j]}: mpirun did not run on its own two guests: $out"
    grep -q "token-of-job-$(other "$j")" <<<"$out" && fail "job ${id[$j]}: mpirun reached the other job's guest: $out"
done
for j in a b; do wait_clean "${id[$j]}" 60; done
no_node_drained
pass "jobs ${id[a]} and ${id[b]} (equal modulo 254, same addresses): both ran mpirun on their own guests; TCP, ARP, broadcast, spoofed address and MAC reached nothing of the other job; spoofed frames stopped at the tap"
