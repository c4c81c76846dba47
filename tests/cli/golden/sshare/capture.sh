#!/bin/bash
# Captures real sshare's output (Slurm 22.05, priority/multifactor, Fair Tree)
# for a small tree of accounts: "$ command", stdout, "--- stderr", stderr,
# "--- rc N" per file. The usage numbers are whatever the anchor cluster has
# run; tests/cli/test_sshare.py compares layout (headers, widths, tree
# indentation, order, -P/-p/-n/-o/-l) and the values it can know.
# Run as root from this folder: PATH=/usr/sbin:/usr/bin:/sbin:/bin ./capture.sh
set -u
cd "$(dirname "$0")"
sacctmgr -i add account ljphys fairshare=10 >/dev/null
sacctmgr -i add account ljchem parent=ljphys >/dev/null
sacctmgr -i add user ljalice account=ljphys >/dev/null
sacctmgr -i add user ljdan account=ljphys >/dev/null
sacctmgr -i add user ljdan account=ljchem >/dev/null
sleep 2
n=0
step() {
    local name=$1; shift
    n=$((n + 1))
    local f; f=$(printf "%02d_%s.txt" "$n" "$name")
    {
        printf "\$"; printf " %q" "$@"; echo
        "$@" 2>/tmp/sshare_capture.err
        echo "--- rc $?" > /tmp/sshare_capture.rc
        echo "--- stderr"
        cat /tmp/sshare_capture.err
        cat /tmp/sshare_capture.rc
    } > "$f"
}
step all sshare -a
step long sshare -a -l
step parsable2 sshare -a -P
step parsable sshare -a -p
step noheader sshare -a -n
step accounts sshare -A ljphys
step accounts_all sshare -A ljphys -a
step users sshare -u ljdan
step format sshare -a -o account,user,rawshares,fairshare
step default sshare
sacctmgr -i delete user ljalice,ljdan >/dev/null
sacctmgr -i delete account ljchem,ljphys >/dev/null
rm -f /tmp/sshare_capture.err /tmp/sshare_capture.rc
