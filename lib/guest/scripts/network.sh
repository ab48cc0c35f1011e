#!/bin/sh
# The guest's NIC, found by its MAC whatever the image names it, gets the
# job's address (one `ip` for both steps). From the host: SVM_MAC,
# SVM_ADDRESS (address/prefix), SVM_GATEWAY (or empty).
svm_netdevs "$SVM_MAC" 20
# shellcheck disable=SC2154 # devs: svm_netdevs's (netdevs.sh)
nic=${devs%% *}
[ -n "$nic" ] || fail "no network interface with MAC $SVM_MAC"
printf 'link set dev %s up\naddr replace %s dev %s\n' "$nic" "$SVM_ADDRESS" "$nic" | ip -batch - || fail "cannot give $nic the address $SVM_ADDRESS"
if [ -n "$SVM_GATEWAY" ]; then ip route replace default via "$SVM_GATEWAY" 2>/dev/null || true; fi
