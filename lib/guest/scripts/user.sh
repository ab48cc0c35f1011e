#!/bin/sh
# The job's user and group, same ids as on the host (seed_user_script,
# lib/guest/seed.hpp, says why this way). From the host: SVM_ETC (the
# image's /etc), SVM_USER, SVM_GROUP, SVM_HOME (no ':', no line break: the
# host checks), SVM_UID, SVM_GID. Needs fail().
# svm_find FILE FIELD VALUE: the first field (the name) of the line whose
# FIELD-th field (1 or 3) is VALUE, in $o.
svm_find() { o=; while IFS=: read -r n _ i _ || [ -n "$n" ]; do if [ "$2" = 1 ]; then i=$n; fi; [ "$i" = "$3" ] && o=$n && return 0; done <"$1"; return 1; }
# svm_add FILE LINE: LINE appended to FILE, on a line of its own even if the
# file's last line has no newline.
svm_add() { l=; while IFS= read -r l; do :; done <"$1"; [ -z "$l" ] || l='
'; printf '%s%s\n' "$l" "$2" >>"$1"; }
svm_free_id() { n=59999; while getent passwd $n >/dev/null || getent group $n >/dev/null; do n=$((n - 1)); done; echo $n; }
# A stock image's default user holding the job's ids (ordinary ones only)
# moves to free ids.
if [ "$SVM_UID" -ge 1000 ]; then
    svm_find "$SVM_ETC/passwd" 3 "$SVM_UID"; [ -z "$o" ] || [ "$o" = "$SVM_USER" ] || usermod -u "$(svm_free_id)" "$o" || fail "usermod $o (it holds uid $SVM_UID)"
fi
if [ "$SVM_GID" -ge 1000 ]; then
    svm_find "$SVM_ETC/group" 3 "$SVM_GID"; [ -z "$o" ] || [ "$o" = "$SVM_GROUP" ] || groupmod -g "$(svm_free_id)" "$o" || fail "groupmod $o (it holds gid $SVM_GID)"
fi
# What groupadd and useradd -M would write, without them: under emulation
# the two took 0.6 s of the guest's start. svm_nss DB KEY: whether NSS knows
# KEY beyond the files, asked (getent) only when nsswitch.conf names a source
# other than files or systemd for DB.
# shellcheck disable=SC2086 # $v: the sources, one a word
svm_nss() { while read -r k v || [ -n "$k" ]; do [ "$k" = "$1:" ] || continue; for w in $v; do case "$w" in files|systemd) ;; *) getent "$1" "$2" >/dev/null; return; esac; done; return 1; done <"$SVM_ETC/nsswitch.conf"; return 1; } 2>/dev/null
if ! svm_find "$SVM_ETC/group" 3 "$SVM_GID" && ! svm_nss group "$SVM_GID"; then
    ! svm_find "$SVM_ETC/group" 1 "$SVM_GROUP" || fail "the image has a group $SVM_GROUP with another gid than the job's $SVM_GID"
    svm_add "$SVM_ETC/group" "$SVM_GROUP:x:$SVM_GID:" && { [ ! -f "$SVM_ETC/gshadow" ] || svm_add "$SVM_ETC/gshadow" "$SVM_GROUP:!::"; } || fail "cannot add the group $SVM_GROUP (gid $SVM_GID) to $SVM_ETC/group"
fi
# svm_sub FILE: the user's subordinate ids where the image keeps them
# (rootless containers), as useradd gives them: 65536 from the end of the
# highest range there, 100000 at least, up to useradd's limit; none if the
# user has a line there already (one pass over the file). Lines other than
# NAME:START:COUNT in decimal (no leading zero, which the shell's arithmetic
# would read as octal) are passed over.
svm_sub() { [ -f "$1" ] || return 0; sm=100000; while IFS=: read -r sn sa sc || [ -n "$sn" ]; do [ "$sn" != "$SVM_USER" ] || return 0; case "$sa:$sc" in *[!0-9:]*|*:*:*|:*|*:|0?*|*:0?*|???????????*:*|*:???????????*) continue;; esac; [ $((sa + sc)) -le $sm ] || sm=$((sa + sc)); done <"$1"; [ $((sm + 65535)) -le 600100000 ] || return 0; svm_add "$1" "$SVM_USER:$sm:65536" || fail "cannot give the user $SVM_USER (uid $SVM_UID) subordinate ids in" "$1"; }
if ! svm_find "$SVM_ETC/passwd" 1 "$SVM_USER" && ! svm_nss passwd "$SVM_USER"; then
    svm_add "$SVM_ETC/passwd" "$SVM_USER:x:$SVM_UID:$SVM_GID::$SVM_HOME:/bin/bash" && { [ ! -f "$SVM_ETC/shadow" ] || svm_add "$SVM_ETC/shadow" "$SVM_USER:!:::::::"; } || fail "cannot add the user $SVM_USER (uid $SVM_UID) to $SVM_ETC/passwd"
    svm_sub "$SVM_ETC/subuid"; svm_sub "$SVM_ETC/subgid"
fi
