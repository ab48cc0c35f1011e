#!/bin/sh
# The job's first command, without SSH: the guest's agent (agent.sh) on the
# serial ports SVM_AGENT_PORT, SVM_AGENT_PORT_OUT, SVM_AGENT_PORT_ERR (see
# seed.hpp), in a session of its own, in the background, its environment
# cleared, as soon as the job's user (SVM_USER) exists. From the host too:
# SVM_AGENT (the agent's text), SVM_FLAGS, SVM_AGENT_MARKER. A guest without
# the ports, their driver, runuser or setsid says nothing.
[ -d /sys/module/virtio_console ] || modprobe virtio_console 2>/dev/null
a='' ao='' ae=''
for v in /sys/class/virtio-ports/*; do read -r nm <"$v/name" 2>/dev/null || continue; case "$nm" in "$SVM_AGENT_PORT") a=/dev/${v##*/};; "$SVM_AGENT_PORT_OUT") ao=/dev/${v##*/};; "$SVM_AGENT_PORT_ERR") ae=/dev/${v##*/};; esac; done
ru=$(command -v runuser) ss=$(command -v setsid)
if [ -c "$a" ] && [ -c "$ao" ] && [ -c "$ae" ] && [ -n "$ru" ] && [ -n "$ss" ]; then
  "$ss" env -i PATH=/usr/local/bin:/usr/bin:/bin /bin/sh -c "$SVM_AGENT" svm-agent "$a" "$ao" "$ae" "$SVM_USER" "$SVM_FLAGS" "$ru" "$ss" </dev/null >/dev/null 2>&1 &
  log "$SVM_AGENT_MARKER"
fi
