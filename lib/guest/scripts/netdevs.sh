#!/bin/sh
# svm_netdevs PATTERN TRIES: the network interfaces whose address matches
# the case pattern PATTERN (hex digits, colons and '*' only: the host checks)
# in $devs, waited for up to TRIES half-seconds (a driver may still be
# probing). No seq(1): the image may be minimal.
svm_netdevs() {
    devs='' i=0
    while [ "$i" -lt "$2" ]; do
        i=$((i + 1))
        for d in /sys/class/net/*; do
            a=; read -r a <"$d/address" 2>/dev/null
            # shellcheck disable=SC2254 # PATTERN is a pattern
            case "$a" in $1) devs="${devs:+$devs }${d##*/}" ;; esac
        done
        [ -n "$devs" ] && break; sleep 0.5
    done
}
