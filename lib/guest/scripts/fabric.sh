#!/bin/sh
# The job's network on IPoIB: the VF's IPoIB interface, whose 20-byte
# address ends with the port GUID the host gave the VF, gets the job's
# fabric address. The ib_ipoib driver may still be probing. From the host:
# SVM_PORT_GUID (lower case hex digits and colons), SVM_FABRIC_ADDRESS.
modprobe ib_ipoib 2>/dev/null
svm_netdevs "*$SVM_PORT_GUID" 40
# shellcheck disable=SC2154 # devs: svm_netdevs's (netdevs.sh)
ib=${devs%% *}
[ -n "$ib" ] || fail "no IPoIB interface with port GUID $SVM_PORT_GUID (the image needs the InfiniBand drivers: mlx5_ib, ib_ipoib)"
ip link set "$ib" up || fail "cannot bring up $ib"
ip addr replace "$SVM_FABRIC_ADDRESS" dev "$ib" || fail "cannot give $ib $SVM_FABRIC_ADDRESS"
log "job network: $ib $SVM_FABRIC_ADDRESS"
