"""The state store's schema and its migrations.

One SQLite file in WAL mode. ``PRAGMA user_version`` counts the migrations
applied; each entry of MIGRATIONS moves the schema one version forward and
runs in its own transaction, so a controller of a newer version opens an
older file in place.

Tables:
- ``jobs``: one row per job, kept forever (it is also the accounting
  record). The request as submitted is the ``spec`` protobuf blob; the
  columns are what the controller changes or filters on.
- ``steps``: accounting for ``ID.batch`` and ``ID.0``, ``ID.1``...
- ``nodes``: what each agent reported and what people said of it (drain).
- ``running_steps``: srun steps while they run (their accounting row comes
  at their end), so that a controller restart keeps them.

Arrays: ``array_job_id`` is 0 for a plain job, else the array's id (the
meta record's job id). ``array_task_id`` is the task index of a row that is
one task, -1 for a plain job or for the meta record, whose
``array_task_str`` holds the tasks not yet split off ("4-9,12"), and whose
``array_max_running`` is the ``%N`` throttle (0 = none).
"""

MIGRATIONS: list[str] = [
    # 1: the walking skeleton
    """
    CREATE TABLE jobs (
        job_id INTEGER PRIMARY KEY AUTOINCREMENT,
        client_token TEXT UNIQUE,
        name TEXT NOT NULL,
        user TEXT NOT NULL,
        uid INTEGER NOT NULL,
        partition TEXT NOT NULL,
        state TEXT NOT NULL,
        reason TEXT NOT NULL DEFAULT 'None',
        priority INTEGER NOT NULL,
        submit_time REAL NOT NULL,
        eligible_time REAL NOT NULL DEFAULT 0,
        start_time REAL NOT NULL DEFAULT 0,
        end_time REAL NOT NULL DEFAULT 0,
        time_limit_min INTEGER NOT NULL,
        nodes TEXT NOT NULL DEFAULT '[]',
        cpus_per_node TEXT NOT NULL DEFAULT '[]',
        mem_per_node TEXT NOT NULL DEFAULT '[]',
        gpus_per_node TEXT NOT NULL DEFAULT '[]',
        tasks_per_node TEXT NOT NULL DEFAULT '[]',
        exclusive INTEGER NOT NULL DEFAULT 0,
        batch_host TEXT NOT NULL DEFAULT '',
        launched INTEGER NOT NULL DEFAULT 0,
        kill_reason TEXT NOT NULL DEFAULT '',
        completing TEXT NOT NULL DEFAULT '[]',
        exit_code INTEGER NOT NULL DEFAULT 0,
        exit_signal INTEGER NOT NULL DEFAULT 0,
        cancelled_by TEXT NOT NULL DEFAULT '',
        restarts INTEGER NOT NULL DEFAULT 0,
        held INTEGER NOT NULL DEFAULT 0,
        next_step_id INTEGER NOT NULL DEFAULT 0,
        stdout_path TEXT NOT NULL DEFAULT '',
        stderr_path TEXT NOT NULL DEFAULT '',
        spec BLOB NOT NULL
    );
    CREATE INDEX jobs_state ON jobs(state);
    CREATE TABLE steps (
        job_id INTEGER NOT NULL,
        step_id TEXT NOT NULL,
        name TEXT NOT NULL,
        state TEXT NOT NULL,
        exit_code INTEGER NOT NULL DEFAULT 0,
        exit_signal INTEGER NOT NULL DEFAULT 0,
        nodes TEXT NOT NULL DEFAULT '[]',
        num_tasks INTEGER NOT NULL DEFAULT 1,
        num_cpus INTEGER NOT NULL DEFAULT 1,
        start_time REAL NOT NULL DEFAULT 0,
        end_time REAL NOT NULL DEFAULT 0,
        max_rss_kb INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (job_id, step_id)
    );
    CREATE TABLE nodes (
        name TEXT PRIMARY KEY,
        registered INTEGER NOT NULL DEFAULT 0,
        drain INTEGER NOT NULL DEFAULT 0,
        down INTEGER NOT NULL DEFAULT 0,
        reason TEXT NOT NULL DEFAULT '',
        reason_user TEXT NOT NULL DEFAULT '',
        reason_time REAL NOT NULL DEFAULT 0,
        inventory BLOB,
        agent_start_time REAL NOT NULL DEFAULT 0,
        last_seen REAL NOT NULL DEFAULT 0,
        last_busy_time REAL NOT NULL DEFAULT 0
    );
    """,
    # 2: job arrays (Slurm's model: one meta record holds the pending remainder;
    # each task is split off into its own row, with its own job id, when it starts)
    """
    ALTER TABLE jobs ADD COLUMN array_job_id INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE jobs ADD COLUMN array_task_id INTEGER NOT NULL DEFAULT -1;
    ALTER TABLE jobs ADD COLUMN array_task_str TEXT NOT NULL DEFAULT '';
    ALTER TABLE jobs ADD COLUMN array_max_running INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX jobs_array ON jobs(array_job_id)
    """,
    # 3
    """
    -- step usage for sacct (AveRSS, MaxRSSNode/Task, TotalCPU)
    ALTER TABLE steps ADD COLUMN ave_rss_kb INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE steps ADD COLUMN max_rss_node TEXT NOT NULL DEFAULT '';
    ALTER TABLE steps ADD COLUMN max_rss_task INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE steps ADD COLUMN user_cpu_ms INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE steps ADD COLUMN system_cpu_ms INTEGER NOT NULL DEFAULT 0
    """,
    # 4
    """
    -- the --signal warning was sent for this run (cleared on requeue)
    ALTER TABLE jobs ADD COLUMN warn_signal_sent INTEGER NOT NULL DEFAULT 0
    """,
    # 5: dependencies and holds
    """
    -- what is left of a job's dependency as scontrol shows it, with
    -- sticky "(failed)" marks, an admin hold (JobHeldAdmin) apart from a user
    -- hold, and --deadline (0 = none) where each pass can find it cheaply
    ALTER TABLE jobs ADD COLUMN dependency TEXT NOT NULL DEFAULT '';
    ALTER TABLE jobs ADD COLUMN hold_admin INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE jobs ADD COLUMN deadline REAL NOT NULL DEFAULT 0
    """,
    # 6
    """
    -- the agent's last network report (api.proto NetStatusReport blob;
    -- NULL = none yet), for lingjun net show and scontrol show node
    ALTER TABLE nodes ADD COLUMN net_status BLOB
    """,
    # 7
    """
    -- the last preemption of a job (0 = never): the job whose start
    -- preempted it, when, whether its grace time ran out and it was killed, and
    -- whether it goes back to the queue (PreemptMode=REQUEUE) or ends PREEMPTED
    ALTER TABLE jobs ADD COLUMN preempted_by INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE jobs ADD COLUMN preempt_time REAL NOT NULL DEFAULT 0;
    ALTER TABLE jobs ADD COLUMN preempt_killed INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE jobs ADD COLUMN preempt_requeue INTEGER NOT NULL DEFAULT 0
    """,
    # 8
    """
    -- what happened to a job and why (lingjun events), and each
    -- earlier run of a restarted or requeued job (sacct -D)
    CREATE TABLE job_events (
        job_id INTEGER NOT NULL,
        time REAL NOT NULL,
        kind TEXT NOT NULL,
        text TEXT NOT NULL
    );
    CREATE INDEX job_events_job ON job_events(job_id);
    CREATE TABLE job_attempts (
        job_id INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        nodes TEXT NOT NULL DEFAULT '[]',
        start_time REAL NOT NULL DEFAULT 0,
        end_time REAL NOT NULL DEFAULT 0,
        state TEXT NOT NULL,
        exit_code INTEGER NOT NULL DEFAULT 0,
        exit_signal INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (job_id, attempt)
    )
    """,
    # 9
    """
    -- health probes. drain_by_probe: the node's DRAIN was set by a
    -- probe (a passing probe may lift it, a drain by a person only a person lifts).
    -- probe_results: each probe's last result per node. node_events: every
    -- health transition (drain, resume, flapping, prolog_fail, and what a person
    -- did: by = the user, "" for a probe), kept forever.
    ALTER TABLE nodes ADD COLUMN drain_by_probe INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE probe_results (
        node TEXT NOT NULL,
        name TEXT NOT NULL,
        severity TEXT NOT NULL,
        ok INTEGER NOT NULL,
        reason TEXT NOT NULL DEFAULT '',
        duration_s REAL NOT NULL DEFAULT 0,
        time REAL NOT NULL DEFAULT 0,
        phase TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (node, name)
    );
    CREATE TABLE node_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        time REAL NOT NULL,
        node TEXT NOT NULL,
        event TEXT NOT NULL,
        reason TEXT NOT NULL DEFAULT '',
        job_id INTEGER NOT NULL DEFAULT 0,
        by TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX node_events_node ON node_events(node, time)
    """,
    # 10
    """
    -- srun steps while they run, so that a restarted controller knows them
    -- again: where each task runs (rank_node, JSON {rank: node}) and the CPUs
    -- each node's share holds (cpus, JSON {node: n}). The row goes when the
    -- step's accounting row (steps) is written.
    CREATE TABLE running_steps (
        job_id INTEGER NOT NULL,
        step_id INTEGER NOT NULL,
        name TEXT NOT NULL,
        nodes TEXT NOT NULL,
        rank_node TEXT NOT NULL,
        cpus TEXT NOT NULL DEFAULT '{}',
        num_tasks INTEGER NOT NULL,
        num_cpus INTEGER NOT NULL DEFAULT 0,
        start_time REAL NOT NULL,
        kill_on_bad_exit INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (job_id, step_id)
    )
    """,
    # 11
    """
    -- the job history answered in SQL (store/history.py): sacct's time
    -- window and state filters (-S/-E/-s), its -u and --name, and the purge
    -- rule's scan by end time
    CREATE INDEX jobs_end ON jobs(end_time);
    CREATE INDEX jobs_state_end ON jobs(state, end_time);
    CREATE INDEX jobs_user_end ON jobs(user, end_time);
    CREATE INDEX jobs_name ON jobs(name)
    """,
    # 12
    """
    -- which GPUs a job holds: per node of its nodes, the device indices
    -- (JSON [[0, 1], [2, 3]]), [] for a job without GPUs or one that started
    -- before indices were kept (no semicolons here: the script is split on them).
    ALTER TABLE jobs ADD COLUMN gpu_ids TEXT NOT NULL DEFAULT '[]'
    """,
    # 13
    """
    -- the GPUs a running srun step holds of its job's, per node (JSON
    -- {node: [indices]}), so that after a restart no new step of the job is
    -- given a GPU a recovered one still uses
    ALTER TABLE running_steps ADD COLUMN gpus TEXT NOT NULL DEFAULT '{}'
    """,
    # 14
    """
    -- a step's GPUs and memory (sacct AllocTRES gres/gpu, mem) and the GPU
    -- usage its node's agent sampled through NVML (TRESUsageInAve/Max
    -- gres/gpuutil in percent, gres/gpumem in KiB)
    ALTER TABLE steps ADD COLUMN gpus INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE steps ADD COLUMN mem_mb INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE steps ADD COLUMN gpu_util_ave INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE steps ADD COLUMN gpu_util_max INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE steps ADD COLUMN gpu_mem_ave_kb INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE steps ADD COLUMN gpu_mem_max_kb INTEGER NOT NULL DEFAULT 0
    """,
    # 15
    """
    -- a pending job's reservation from the last pass (backfill): its expected
    -- start (0 = none) and the nodes it would get (JSON list of names)
    ALTER TABLE jobs ADD COLUMN sched_start REAL NOT NULL DEFAULT 0;
    ALTER TABLE jobs ADD COLUMN sched_nodes TEXT NOT NULL DEFAULT '[]'
    """,
    # 16
    """
    -- scrontab: each user's crontab as written (scrontab -l) and the jobs that
    -- stand for its entries now (JSON list of ids: a run of one that ends is
    -- queued again for its next time only while its id is here)
    CREATE TABLE crontabs (
        user TEXT PRIMARY KEY,
        text TEXT NOT NULL,
        job_ids TEXT NOT NULL DEFAULT '[]'
    )
    """,
    # 17
    """
    -- what WatchJobs and WatchNodes stream: each committed change of a job's
    -- or a node's state (kind 'state') and each job event (kind as in
    -- job_events), numbered in commit order. seq is the watchers' cursor, so
    -- it must never be reused (AUTOINCREMENT). Node rows have job_id 0.
    CREATE TABLE watch_events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        time REAL NOT NULL,
        job_id INTEGER NOT NULL DEFAULT 0,
        node TEXT NOT NULL DEFAULT '',
        kind TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT '',
        previous_state TEXT NOT NULL DEFAULT '',
        text TEXT NOT NULL DEFAULT '',
        exit_code INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX watch_events_job ON watch_events(job_id)
    """,
    # 18
    """
    -- an operator set this job's priority (scontrol update Priority=N): it is
    -- kept as it is, not computed again (Slurm's direct_set_prio)
    ALTER TABLE jobs ADD COLUMN priority_set INTEGER NOT NULL DEFAULT 0
    """,
    # 19
    """
    -- accounts, users, associations and QOS (sacctmgr), kept in the
    -- controller's store as slurmdbd keeps them: lingjund/store/assoc.py.
    -- Limits are -1 when unset, TRES limits Slurm's strings ('' = none).
    -- raw_usage: decayed TRES-billing-seconds charged to the association,
    -- last decayed and charged at usage_time (fair share survives restarts).
    CREATE TABLE accounts (
        name TEXT PRIMARY KEY,
        description TEXT NOT NULL DEFAULT '',
        organization TEXT NOT NULL DEFAULT '',
        parent TEXT NOT NULL DEFAULT ''
    );
    CREATE TABLE acct_users (
        name TEXT PRIMARY KEY,
        default_account TEXT NOT NULL DEFAULT '',
        admin_level TEXT NOT NULL DEFAULT 'None'
    );
    CREATE TABLE associations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        cluster TEXT NOT NULL DEFAULT '',
        account TEXT NOT NULL,
        user TEXT NOT NULL DEFAULT '',
        partition TEXT NOT NULL DEFAULT '',
        shares INTEGER NOT NULL DEFAULT 1,
        grp_tres TEXT NOT NULL DEFAULT '',
        grp_jobs INTEGER NOT NULL DEFAULT -1,
        grp_submit_jobs INTEGER NOT NULL DEFAULT -1,
        max_tres_per_job TEXT NOT NULL DEFAULT '',
        max_jobs INTEGER NOT NULL DEFAULT -1,
        max_submit_jobs INTEGER NOT NULL DEFAULT -1,
        max_wall_min INTEGER NOT NULL DEFAULT -1,
        qos TEXT NOT NULL DEFAULT '',
        default_qos TEXT NOT NULL DEFAULT '',
        raw_usage REAL NOT NULL DEFAULT 0,
        usage_time REAL NOT NULL DEFAULT 0,
        UNIQUE (account, user, partition)
    );
    CREATE INDEX associations_user ON associations(user);
    CREATE TABLE qos (
        name TEXT PRIMARY KEY,
        description TEXT NOT NULL DEFAULT '',
        priority INTEGER NOT NULL DEFAULT 0,
        usage_factor REAL NOT NULL DEFAULT 1.0,
        grp_tres TEXT NOT NULL DEFAULT '',
        max_tres_per_user TEXT NOT NULL DEFAULT '',
        max_tres_per_job TEXT NOT NULL DEFAULT '',
        max_jobs_per_user INTEGER NOT NULL DEFAULT -1,
        max_submit_jobs_per_user INTEGER NOT NULL DEFAULT -1,
        max_wall_min INTEGER NOT NULL DEFAULT -1,
        preempt TEXT NOT NULL DEFAULT '',
        preempt_mode TEXT NOT NULL DEFAULT 'cluster',
        flags TEXT NOT NULL DEFAULT ''
    )
    """,
    # 20
    """
    -- a QOS's preemption times (sacctmgr GraceTime=, PreemptExemptTime=), in
    -- seconds, applied to its jobs under preempt/qos (PreemptExemptTime -1:
    -- unset, the cluster's holds)
    ALTER TABLE qos ADD COLUMN grace_time INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE qos ADD COLUMN preempt_exempt_time INTEGER NOT NULL DEFAULT -1
    """,
]
