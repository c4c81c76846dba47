"""``--help`` of squeue, sinfo, sacct and scancel: Slurm's option list, in our words.

Each text lists the options the command takes (an option it refuses as not
supported yet is not offered here), laid out as Slurm's are: the spellings
in a 34-column field, the description beside them. ``--usage`` stays the
short synopsis.
"""
from __future__ import annotations


def render(usage_line: str, sections: list[tuple[str, list[tuple[str, str]]]]) -> str:
    lines = [usage_line, ""]
    for title, rows in sections:
        if title:
            lines += [title] if lines[-1] == "" else ["", title]
        for spelled, text in rows:
            parts = text.split("\n")
            head = f"  {spelled}"
            if len(head) >= 34:
                lines.append(head)
                head = ""
            lines.append(f"{head:<34}{parts[0]}")
            lines += [f"{'':34}{p}" for p in parts[1:]]
    return "\n".join(lines) + "\n"


HELP_OPTIONS = [
    ("--help", "show this help message"),
    ("--usage", "display a brief summary of the options"),
]

SQUEUE = render("Usage: squeue [OPTIONS]", [("", [
    ("-A, --account=account(s)", "comma separated list of accounts\nto view, default is all accounts"),
    ("-a, --all", "display jobs in hidden partitions"),
    ("--federation", "show jobs of the federation (this cluster's)"),
    ("-h, --noheader", "no headers on output"),
    ("--hide", "do not display jobs in hidden partitions"),
    ("-j, --jobs=job(s)", "comma separated list of jobs IDs\nto view, default is all"),
    ("--json", "produce JSON output"),
    ("-l, --long", "long report"),
    ("--local", "show only the local cluster (the only one here)"),
    ("-M, --clusters=cluster_name", "cluster to issue commands to (this one)"),
    ("--me", "equivalent to --user=<my username>"),
    ("-n, --name=job_name(s)", "comma separated list of job names to view"),
    ("-o, --format=format", "format specification"),
    ("-O, --Format=format", "format specification, by field name"),
    ("-p, --partition=partition(s)", "comma separated list of partitions\nto view, default is all partitions"),
    ("-q, --qos=qos(s)", "comma separated list of qos's\nto view, default is all qos's"),
    ("-r, --array", "display one job array element per line"),
    ("-S, --sort=fields", "comma separated list of fields to sort on"),
    ("--start", "print expected start times of pending jobs\n(backfill's reservations), earliest first"),
    ("-t, --states=states", "comma separated list of states to view,\n"
                            "default is pending and running,\n'all' reports all states"),
    ("-u, --user=user_name(s)", "comma separated list of users to view"),
    ("-v, --verbose", "verbosity level"),
    ("-V, --version", "output version information and exit"),
    ("-w, --nodelist=hostlist", "list of nodes to view, default is\nall nodes"),
    ("--yaml", "produce YAML output"),
]), ("Help options:", HELP_OPTIONS)])

SINFO = render("Usage: sinfo [OPTIONS]", [("", [
    ("-a, --all", "show all partitions (including hidden\nand those not accessible)"),
    ("-d, --dead", "show only non-responding nodes"),
    ("-e, --exact", "group nodes only on exact match of\nconfiguration"),
    ("--federation", "show the federation's nodes (this cluster's)"),
    ("-F, --future", "report on nodes in the FUTURE state"),
    ("-h, --noheader", "no headers on output"),
    ("--hide", "do not show hidden or non-accessible\npartitions"),
    ("--json", "produce JSON output"),
    ("-l, --long", "long output - displays more information"),
    ("--local", "show only the local cluster (the only one here)"),
    ("-M, --clusters=names", "clusters to issue commands to (this one)"),
    ("-n, --nodes=NODES", "report on specific node(s)"),
    ("-N, --Node", "Node-centric format"),
    ("-o, --format=format", "format specification"),
    ("-O, --Format=format", "long format specification"),
    ("-p, --partition=PARTITION", "report on specific partition"),
    ("-r, --responding", "report only responding nodes"),
    ("-R, --list-reasons", "list reason nodes are down or drained"),
    ("-s, --summarize", "report state summary only"),
    ("-S, --sort=fields", "comma separated list of fields to sort on"),
    ("-t, --states=node_state", "specify the what states of nodes to view"),
    ("-v, --verbose", "verbosity level"),
    ("-V, --version", "output version information and exit"),
    ("--yaml", "produce YAML output"),
]), ("Help options:", HELP_OPTIONS)])

SACCT = render("Usage: sacct [options]", [("Options:", [
    ("-a, --allusers", "Display jobs for all users. By default, only the\n"
                       "current user's jobs are displayed. If ran by user root\n"
                       "this is the default."),
    ("-A, --accounts", "Use this comma separated list of accounts to select jobs\n"
                       "to display. By default, all accounts are selected."),
    ("-b, --brief", "Equivalent to '--format=jobstep,state,error'."),
    ("--delimiter", "ASCII characters used to separate the fields when\n"
                    "specifying the -p or -P options. The default delimiter\n"
                    "is a '|'. This option is ignored if -p or -P options\n"
                    "are not specified."),
    ("-D, --duplicates", "If a job has been requeued, show every attempt as its\n"
                         "own record; by default only the last one is shown."),
    ("-e, --helpformat", "Print a list of fields that can be specified with the\n'--format' option"),
    ("-E, --endtime", "Select jobs eligible before this time. If states are\n"
                      "given with the -s option then only jobs in this state\n"
                      "at this time will be returned."),
    ("-h, --help", "Print this description of use."),
    ("-j, --jobs", "Format is <job(.step)>. Display information about this\n"
                   "job or comma-separated list of jobs. The default is all\n"
                   "jobs. Adding .step will display the specific job step of\n"
                   "that job. (A step id of 'batch' will display the\n"
                   "information about the batch step.)"),
    ("--json", "Produce JSON output"),
    ("-l, --long", "Equivalent to specifying\n'--format=jobid,jobidraw,jobname,partition,maxvmsize,...'"),
    ("-L, --allclusters", "Display jobs ran on all clusters (there is one)."),
    ("--local", "Only show jobs of the local cluster."),
    ("-M, --clusters", "Comma separated list of clusters to select jobs from\n(this one)."),
    ("-n, --noheader", "No header will be added to the beginning of output.\n"
                       "The default is to print a header."),
    ("--name", "Display jobs that have any of these name(s)."),
    ("-N, --nodelist", "Display jobs that ran on any of these nodes, can be one\n"
                       "node or a comma separated list of nodes."),
    ("-o, --format", "Comma separated list of fields. (use \"--helpformat\"\n"
                     "for a list of available fields)."),
    ("-p, --parsable", "output will be '|' delimited with a '|' at the end"),
    ("-P, --parsable2", "output will be '|' delimited without a '|' at the end"),
    ("-r, --partition", "Comma separated list of partitions to select jobs and\n"
                        "job steps from. The default is all partitions."),
    ("-s, --state", "Select jobs based on their current state or the state\n"
                    "they were in during the time period given: running (r),\n"
                    "completed (cd), failed (f), timeout (to), resizing (rs),\n"
                    "deadline (dl), node_fail (nf), out_of_memory (oom),\n"
                    "pending (pd), preempted (pr), cancelled (ca), requeued (rq)"),
    ("-S, --starttime", "Select jobs eligible after this time. Default is\n"
                        "00:00:00 of the current day, unless '-s' is set then\n"
                        "the default is 'now'."),
    ("-T, --truncate", "Truncate time. So if a job started before --starttime\n"
                       "the start time would be truncated to --starttime. The\n"
                       "same for end time and --endtime."),
    ("-u, --uid, --user", "Use this comma separated list of uids or user names\n"
                          "to select jobs to display. By default, the running\n"
                          "user's uid is used."),
    ("--units=[KMGTP]", "Display values in specified unit type. Takes precedence\n"
                        "over --noconvert option."),
    ("--usage", "Display brief usage message."),
    ("-v, --verbose", "Primarily for debugging purposes, report the state of\n"
                      "various variables during processing."),
    ("-V, --version", "Print version."),
    ("-X, --allocations", "Only show statistics relevant to the job allocation\n"
                          "itself, not taking steps into consideration."),
    ("--yaml", "Produce YAML output"),
])])

SCANCEL = render("Usage: scancel [OPTIONS] [job_id[_array_id][.step_id]]", [("", [
    ("-A, --account=account", "act only on jobs charging this account"),
    ("-b, --batch", "signal batch shell for specified job"),
    ("-f, --full", "signal batch shell and all steps for\nspecified job"),
    ("-H, --hurry", "avoid burst buffer stage out"),
    ("-M, --clusters=clusters", "cluster to issue commands to (this one)"),
    ("--me", "equivalent to --user=<my username>"),
    ("-n, --name, --jobname=job_name", "act only on jobs with this name"),
    ("-p, --partition=partition", "act only on jobs in this partition"),
    ("-Q, --quiet", "disable warnings"),
    ("-q, --qos=qos", "act only on jobs with this quality of service"),
    ("-s, --signal=name | integer", "signal to send to job, default is SIGKILL"),
    ("-t, --state=states", "act only on jobs in this state.  Valid job\n"
                           "states are PENDING, RUNNING and SUSPENDED"),
    ("-u, --user=user_name", "act only on jobs of this user"),
    ("-V, --version", "output version information and exit"),
    ("-v, --verbose", "verbosity level"),
]), ("Help options:", HELP_OPTIONS)])
