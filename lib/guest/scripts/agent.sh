#!/bin/sh
# The guest's agent (agent_script, lib/guest/seed.hpp, says its protocol):
# $1 its command port, $2 stdout's, $3 stderr's, $4 the job's user, $5 its
# directory (root's, with the FIFO "srun"), $6 runuser, $7 setsid. Its
# environment is already clean (agent-start.sh). The header: magic, nonce,
# lengths of the command and of its stdin, pid file. Few processes: each
# costs tens of milliseconds of an emulated guest's one busy vCPU. runuser
# in su's form ("-s SHELL -c CMD -- USER") starts the command in a session
# of its own and sets SHELL, HOME, USER and LOGNAME: no env or setsid to
# start. Not for root (util-linux keeps root's session): then setsid does,
# as before. The command (POSIX sh, made on the host) runs in /bin/sh,
# lighter to start than a login shell such as bash (tens of ms under
# emulation); SHELL is set back to the user's.
# A guest restored from a checkpoint (a requeued resumable job) finds a new
# host side: it sends "reattach", answered "idle" before a command, and
# "nonce <n>" while or after one runs (the host side then relays as before).
# While no host side is connected, reads of the ports end at once and
# writes wait: the reader below retries every second.
exec 3<>"$1" 4<>"$2" 5<>"$3" || exit 1
while :; do IFS=' ' read -r m n cl il pf <&3 || exit 0; [ "$m" = reattach ] || break; echo idle >&3; done
[ "$m" = SVM-AGENT-1 ] || exit 0
case "$n" in ''|*[!0-9a-f]*) exit 0;; esac
case "$cl:$il" in *[!0-9:]*|:*|*:) exit 0;; esac
case "$pf" in /*) case "$pf" in *[!A-Za-z0-9._/-]*) exit 0;; esac;; *) exit 0;; esac
: >"$5/taken"
c=$(head -c "$cl" <&3; echo .); c=${c%.}
i=/dev/null
if [ "$il" -gt 0 ]; then i="$5/stdin"; (umask 077; head -c "$il" <&3 >"$i") && chown "$4" "$i" || exit 1; fi
s='' id=''; while IFS=: read -r u _ x _ _ _ sh; do [ "$u" = "$4" ] && s=$sh id=$x && break; done </etc/passwd
if [ -z "$id" ]; then e=$(getent passwd "$4") && s=${e##*:} && id=${e#*:*:} && id=${id%%:*}; fi
[ -x "$s" ] || s=/bin/sh
exec 6<>"$5/srun" || exec 6</dev/null
cd / && umask 022
if [ "$id" != 0 ]; then SVM_SHELL=$s "$6" -s /bin/sh -c 'SHELL=$SVM_SHELL; unset SVM_SHELL; '"$c" -- "$4" <"$i" >&4 2>&5 3>&- 6>&- &
else SHELL="$s" "$6" -u "$4" -- "$7" /bin/sh -c "$c" <"$i" >&4 2>&5 3>&- 6>&- &
fi
t=$!
(while :; do while IFS=' ' read -r w a <&3; do
  [ "$w" = reattach ] && echo "nonce $n" >&3
  [ "$w" = signal ] || continue
  case "$a" in ''|*[!A-Z0-9]*) continue;; esac
  p=$(cat "$pf" 2>/dev/null)
  case "$p" in ''|*[!0-9]*|1) kill -s "$a" "$t";; *) kill -s "$a" -- "-$p" || kill -s "$a" "$p";; esac
done; sleep 1; done) 2>/dev/null 4>&- 5>&- 6>&- &
r=$!
(while read -r _ <&6; do echo srun >&3; done) 2>/dev/null 4>&- 5>&- &
w=$!
wait "$t"; rc=$?
[ -p "$5/started" ] && { echo ended 1<>"$5/started"; } 2>/dev/null
kill "$r" "$w" 2>/dev/null; wait "$r" "$w"
[ "$i" = /dev/null ] || rm -f "$i"
printf %s "$n" >&4; printf %s "$n" >&5
echo "exit $rc" >&3
while IFS=' ' read -r w a <&3; do
  case "$w" in sync) sync; echo "synced $?" >&3;; reattach) echo "nonce $n" >&3;; esac
done
