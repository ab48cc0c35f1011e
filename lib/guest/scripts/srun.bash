#!/bin/bash
# srun in a slurm-vm guest: the command line goes to the batch step on the
# host (through the port SLURM_VM_SRUN_PORT that an SSH session forwards),
# which runs the real srun; every task runs in the guest of its node.
port="${SLURM_VM_SRUN_PORT:-}"
# Where the batch script runs through the guest's agent, the port is
# forwarded only once an srun asks for it (a line to the agent's FIFO
# SLURM_VM_SRUN_WAKE): wait for it (bounded).
i=0
until [ -n "$port" ] && { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null; do
    if [ $i -eq 0 ] && [ -n "${SLURM_VM_SRUN_WAKE:-}" ]; then
        { echo srun 1<>"$SLURM_VM_SRUN_WAKE"; } 2>/dev/null
    fi
    i=$((i + 1))
    if [ -z "$port" ] || [ $i -gt 600 ]; then
        echo "srun: slurm-vm: no relay to the host here: srun works from the batch script of a VM job" >&2
        exit 1
    fi
    sleep 0.1
done
{ printf 'SRUN %d\n' $(( $# + 1 )); printf '%s\0' "$PWD" "$@"; } >&3
read -r ok token <&3
if [ "$ok" != OK ]; then
    echo "srun: slurm-vm: ${token:-the host refused the command}" >&2
    exit 1
fi
exec 4<>"/dev/tcp/127.0.0.1/$port"
printf 'STDERR %s\n' "$token" >&4
cat <&4 >&2 &
errpid=$!
cat <&3 &
outpid=$!
exec 3<&- 4<&-
relay() { { exec 5<>"/dev/tcp/127.0.0.1/$port" && printf 'SIGNAL %s %s\n' "$token" "$1" >&5; exec 5<&-; } 2>/dev/null; }
# shellcheck disable=SC2064 # the signal's name is meant to expand now
for s in INT TERM HUP QUIT USR1 USR2; do trap "relay $s" "$s"; done
while kill -0 "$outpid" 2>/dev/null; do wait "$outpid"; done
wait "$errpid"
exec 6<>"/dev/tcp/127.0.0.1/$port"
printf 'WAIT %s\n' "$token" >&6
read -r rc <&6
exit "${rc:-1}"
