#!/bin/sh
# The VF's interrupt moderation (seed_irq_script, lib/guest/seed.hpp): the
# interfaces found by the VF's address pattern, else every NIC whose driver
# is not virtio's (the job's network is virtio); drivers differ in what they
# accept: take what they do, say what they refused. From the host:
# SVM_IRQ_PROFILE (its name), SVM_IRQ_ARGS (ethtool -C's words),
# SVM_IRQ_PATTERN (the VF's address as a case pattern, or empty).
svm_irq() {
  tag="interrupt moderation profile $SVM_IRQ_PROFILE"
  command -v ethtool >/dev/null 2>&1 || { log "$tag not applied: ethtool is not installed in the image"; return 0; }
  devs=
  if [ -n "$SVM_IRQ_PATTERN" ]; then svm_netdevs "$SVM_IRQ_PATTERN" 20; fi
  if [ -z "$devs" ]; then
    for d in /sys/class/net/*; do
      [ -e "$d/device/driver" ] || continue
      drv=$(readlink "$d/device/driver"); [ "${drv##*/}" = virtio_net ] && continue
      devs="$devs ${d##*/}"
    done
  fi
  [ -n "$devs" ] || { log "$tag not applied: no network interface of the VF found"; return 0; }
  # shellcheck disable=SC2086 # $devs and SVM_IRQ_ARGS: lists of words
  for dev in $devs; do
    if out=$(ethtool -C "$dev" $SVM_IRQ_ARGS 2>&1); then
      log "$tag applied to $dev"
      continue
    fi
    ok="" no=""
    set -- $SVM_IRQ_ARGS
    while [ $# -ge 2 ]; do
      if ethtool -C "$dev" "$1" "$2" >/dev/null 2>&1; then ok="$ok $1 $2"; else no="$no $1 $2"; fi
      shift 2
    done
    log "$tag on $dev: the driver refused$no (ethtool: $(echo "$out" | head -n 1))${ok:+; applied$ok}"
  done
}
svm_irq
