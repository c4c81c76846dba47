#!/bin/bash
# Captures real sacctmgr's answers (Slurm 22.05 with slurmdbd, cluster
# "anchor", nothing but root's account, user and association added) into
# one file per step: "$ command", stdout, "--- stderr", stderr, "--- rc N".
# tests/cli/test_sacctmgr.py replays the same steps against lingjund.
# Run as root from this folder: PATH=/usr/sbin:/usr/bin:/sbin:/bin ./capture.sh
set -u
cd "$(dirname "$0")"
n=0
step() {   # step NAME [--stdin TEXT] sacctmgr ARGS...
    local name=$1; shift
    local input=""
    if [ "$1" = "--stdin" ]; then input=$2; shift 2; fi
    n=$((n + 1))
    local f; f=$(printf "%02d_%s.txt" "$n" "$name")
    {
        printf "\$"; printf " %q" "$@"; echo
        printf '%s' "$input" | timeout 20 "$@" 2>/tmp/sacctmgr_capture.err
        echo "--- rc $?" > /tmp/sacctmgr_capture.rc
        echo "--- stderr"
        cat /tmp/sacctmgr_capture.err
        cat /tmp/sacctmgr_capture.rc
    } > "$f"
}
step add_account sacctmgr -i add account ljphys "Description=physics dept" Organization=sci
step add_two_accounts sacctmgr -i add account ljbio,ljgeo Description=bio
step add_sub_account sacctmgr -i add account ljchem parent=ljphys
step add_account_again sacctmgr -i add account ljphys
step add_user sacctmgr -i add user ljalice account=ljphys
step add_user2 sacctmgr -i add user ljdan account=ljphys
step add_user_assoc sacctmgr -i add user ljdan account=ljchem
step add_user_settings sacctmgr -i add user ljcarol account=ljgeo defaultaccount=ljgeo adminlevel=operator fairshare=3 maxjobs=4
step add_user_no_account sacctmgr -i add user ljbob
step add_user_bad_account sacctmgr -i add user ljbob account=nosuch
step add_bad_option sacctmgr -i add account ljx bogus=1
step add_account_limits sacctmgr -i add account ljsub parent=ljgeo fairshare=4 maxjobs=2 maxwall=10 grptres=cpu=8 description=sub organization=org
step show_account sacctmgr show account
step show_account_P sacctmgr -P show account
step show_account_p sacctmgr -p show account
step show_account_n sacctmgr -n show account
step show_account_format sacctmgr show account format=account%20,descr%-30
step show_user sacctmgr show user
step show_assoc_where sacctmgr show assoc where account=ljphys
step show_assoc_format sacctmgr show assoc format=account,user,share,maxjobs,qos -P
step modify_account sacctmgr -i modify account ljphys set fairshare=10 maxjobs=5
step modify_user_limit sacctmgr -i modify user ljdan set maxsubmitjobs=2
step modify_user_default sacctmgr -i modify user where name=ljdan set defaultaccount=ljchem
step modify_account_descr sacctmgr -i modify account ljgeo set description=geo
step show_user_withassoc sacctmgr show user ljdan withassoc
step show_account_withassoc sacctmgr show account ljphys withassoc
step add_qos sacctmgr -i add qos ljhigh priority=100 maxtrespu=cpu=4 maxwall=1:00:00
step show_qos sacctmgr show qos ljhigh
step modify_qos sacctmgr -i modify qos ljhigh set maxsubmitjobsperuser=3
step show_qos_format sacctmgr show qos format=name,priority,maxsubmitpu -P
step delete_qos sacctmgr -i delete qos ljhigh
step modify_nothing sacctmgr -i modify account nosuch set fairshare=2
step delete_user_assoc sacctmgr -i delete user where name=ljdan account=ljchem
step delete_user sacctmgr -i delete user ljalice
step delete_accounts sacctmgr -i delete account ljbio,ljsub
step delete_nothing sacctmgr -i delete account ljzzz
step bad_keyword sacctmgr frob account
step show_bad_condition sacctmgr show account bogus=1
step answer_no --stdin "n
" sacctmgr add account ljzzz
step show_cluster sacctmgr show cluster format=cluster -P
step add_qos_low sacctmgr -i add qos ljlow
step add_qos_preempt sacctmgr -i add qos ljhigh Preempt=ljlow PreemptMode=requeue
step show_qos_preempt sacctmgr show qos format=Name,Preempt,PreemptMode
step add_qos_bad_preempt sacctmgr -i add qos ljx Preempt=nosuch
step modify_qos_bad_mode sacctmgr -i modify qos ljhigh set PreemptMode=bogus
step modify_qos_preempt_loop sacctmgr -i modify qos ljlow set Preempt=ljhigh
step modify_qos_mode sacctmgr -i modify qos ljlow set PreemptMode=Cancel
step show_qos_preempt_P sacctmgr -P show qos format=Name,Preempt,PreemptMode
step delete_qos_preempt sacctmgr -i delete qos ljhigh,ljlow
step add_qos_grace sacctmgr -i add qos ljgrace GraceTime=120 PreemptExemptTime=5:00
step show_qos_grace sacctmgr show qos ljgrace format=Name,GraceTime,PreemptExemptTime
step modify_qos_grace sacctmgr -i modify qos ljgrace set GraceTime=90000 PreemptExemptTime=-1
step show_qos_grace_P sacctmgr -P show qos ljgrace format=Name,GraceTime,PreemptExemptTime
step modify_qos_bad_exempt sacctmgr -i modify qos ljgrace set PreemptExemptTime=zz
step delete_qos_grace sacctmgr -i delete qos ljgrace
# leave real Slurm as it was
sacctmgr -i delete user ljdan,ljcarol >/dev/null 2>&1
sacctmgr -i delete account ljphys,ljgeo,ljchem,ljbio,ljsub,ljzzz >/dev/null 2>&1
rm -f /tmp/sacctmgr_capture.err /tmp/sacctmgr_capture.rc
