#!/usr/bin/env python3
"""perf/rebalance.py — how long a consumer group takes to rebalance when a member joins,
per client and assignor (Python 3 standard library only; `perf/rebalance --help`).

One run: a fresh topic of P partitions (48) gets records at a steady rate from a paced
producer (perf/kring-member's `produce`: record i to partition i mod P, the same producer
for every client) all through the run; M members (3) of a fresh group, all of the client
under test with the assignor under test, join and settle (every partition assigned,
disjointly, every partition delivering, no assignment change for --settle seconds); then
one more member joins. Every member program logs (perf/README.md, "The member contract")
its join, each assignment change and every record it gets, with wall-clock timestamps.

Figures of a run, from those logs (J = the time the new member logged just before it
subscribed):
  rebalance ms   J to the moment every partition is consuming again: the latest, over the
                 partitions, of the first record that the partition's final owner got
                 after its last assignment of it (and after J) and that was produced at or
                 after J (record timestamp).
  moved          partitions whose owner changed across the join.
  kept gap ms    the longest pause, from J to one second past the rebalance's end, between
                 two consecutive deliveries of a partition that kept its owner (max over
                 those partitions): an eager protocol stops every partition, a cooperative
                 one should not stop the kept ones at all.
  normal gap ms  the same measure over the --settle seconds before J, for scale (records
                 arrive in batches: a gap of a few tens of ms is ordinary).

Clients and their member programs:
  kring       perf/target/release/kring-member member   (perf/ cargo workspace)
  librdkafka  perf/target/release/rdkafka-perf member   (perf/ cargo workspace)
  java        java perf/java/Member.java, compiled with javac into perf/target/java,
              on the classpath of `scripts/kafka classpath`
Every member gets the same settings (each client's defaults, spelt out):
session.timeout.ms=45000, heartbeat.interval.ms=3000, max.poll.interval.ms=300000,
auto.offset.reset=earliest, enable.auto.commit=true, auto.commit.interval.ms=1000 (the Java
client also group.protocol=classic). Nothing is pinned: members, producer and broker share
the machine's cores with whatever else runs.

Writes perf/results/rebalance.md (medians over the runs) and rebalance-raw.jsonl.
"""

import argparse
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KAFKA = os.path.join(ROOT, "scripts", "kafka")
BOOTSTRAP = "127.0.0.1:9092"
CLIENTS = ["kring", "librdkafka", "java"]
# "kip848-uniform" is the KIP-848 protocol (group.protocol=consumer) with the broker's
# uniform assignor: the group's heartbeat interval and session timeout are the broker's
# (scripts/kafka: group.consumer.heartbeat.interval.ms=1000, session 10 s), so the
# members set neither, nor a client-side assignor.
ASSIGNORS = ["range", "cooperative-sticky", "kip848-uniform"]
KIP848 = {"kip848-uniform": "uniform"}
JAVA_ASSIGNORS = {"range": "org.apache.kafka.clients.consumer.RangeAssignor",
                  "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"}
MEMBER_SETTINGS = [("session.timeout.ms", "45000"), ("heartbeat.interval.ms", "3000"),
                   ("max.poll.interval.ms", "300000"), ("auto.offset.reset", "earliest"),
                   ("enable.auto.commit", "true"), ("auto.commit.interval.ms", "1000")]
KRING_MEMBER = os.path.join(ROOT, "perf", "target", "release", "kring-member")
RDKAFKA_PERF = os.path.join(ROOT, "perf", "target", "release", "rdkafka-perf")
JAVA_CLASSES = os.path.join(ROOT, "perf", "target", "java")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def sh(cmd, timeout=120):
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout, p.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return -1, "", str(e)


class Interrupted(Exception):
    """SIGTERM or SIGHUP: unwinds like Ctrl-C so every finally block runs."""


# ---------------------------------------------------------------- builds

def build(clients, no_build):
    """Builds the member programs; returns {client: command prefix} and {client: error}."""
    cmds, errors = {}, {}
    if not no_build:
        packages = ["-p", "kring-member"] + (["-p", "rdkafka-perf"] if "librdkafka" in clients else [])
        log("== build: cargo build --release --manifest-path perf/Cargo.toml " + " ".join(packages))
        env = dict(os.environ)
        env.pop("CARGO_TARGET_DIR", None)  # the perf workspace builds into perf/target
        p = subprocess.run(["nice", "-n", "5", "cargo", "build", "--release", "--manifest-path",
                            "perf/Cargo.toml"] + packages, cwd=ROOT, env=env,
                           stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            raise SystemExit("building the member programs failed")
    if not os.access(KRING_MEMBER, os.X_OK):
        raise SystemExit(f"{KRING_MEMBER} missing (the paced producer is needed for every client)")
    cmds["kring"] = [KRING_MEMBER, "member"]
    if "librdkafka" in clients:
        if os.access(RDKAFKA_PERF, os.X_OK):
            cmds["librdkafka"] = [RDKAFKA_PERF, "member"]
        else:
            errors["librdkafka"] = f"{RDKAFKA_PERF} missing"
    if "java" in clients:
        code, cp, err = sh([KAFKA, "classpath"])
        _, java, _ = sh([KAFKA, "java"])
        java = java.strip() or "java"
        if code != 0:
            errors["java"] = f"scripts/kafka classpath failed: {err.strip()[:200]}"
        else:
            cp = cp.strip()
            os.makedirs(JAVA_CLASSES, exist_ok=True)
            code, _, err = sh(["javac", "-cp", cp, "-d", JAVA_CLASSES,
                               os.path.join(ROOT, "perf", "java", "Member.java")])
            if code != 0:
                errors["java"] = f"javac failed: {err.strip()[:200]}"
            else:
                cmds["java"] = [java, "-Xms64m", "-Xmx256m", "-cp", f"{JAVA_CLASSES}:{cp}", "Member"]
    return cmds, errors


def member_properties(client, group, assignor):
    props = [("bootstrap.servers", BOOTSTRAP), ("group.id", group)]
    if assignor in KIP848:
        # The Java client refuses session.timeout.ms, heartbeat.interval.ms and
        # partition.assignment.strategy with this protocol: they are the broker's.
        broker_side = ("session.timeout.ms", "heartbeat.interval.ms")
        props += [(k, v) for k, v in MEMBER_SETTINGS if k not in broker_side]
        return props + [("group.protocol", "consumer"), ("group.remote.assignor", KIP848[assignor])]
    props += MEMBER_SETTINGS
    if client == "java":
        props += [("partition.assignment.strategy", JAVA_ASSIGNORS[assignor]),
                  ("group.protocol", "classic")]
    else:
        props += [("partition.assignment.strategy", assignor)]
    return props


# ---------------------------------------------------------------- topics

def topic_tool():
    kring = os.path.join(ROOT, "target", "release", "kring")
    if os.access(kring, os.X_OK):
        return "kring"
    return "java"


def create_topic(tool, topic, partitions):
    if tool == "kring":
        cmd = [os.path.join(ROOT, "target", "release", "kring"), "topics", "create", topic,
               "--partitions", str(partitions), "--replication-factor", "1", "--bootstrap", BOOTSTRAP]
    else:
        cmd = [KAFKA, "run-class", "org.apache.kafka.tools.TopicCommand", "--bootstrap-server",
               BOOTSTRAP, "--create", "--topic", topic, "--partitions", str(partitions),
               "--replication-factor", "1"]
    code, out, err = sh(cmd)
    if code != 0:
        raise RuntimeError(f"create topic {topic}: {(err or out).strip()[:200]}")


def delete_topic(tool, topic):
    if tool == "kring":
        cmd = [os.path.join(ROOT, "target", "release", "kring"), "topics", "delete", topic,
               "--bootstrap", BOOTSTRAP]
    else:
        cmd = [KAFKA, "run-class", "org.apache.kafka.tools.TopicCommand", "--bootstrap-server",
               BOOTSTRAP, "--delete", "--topic", topic]
    code, out, err = sh(cmd)
    if code != 0:
        log(f"   warning: delete topic {topic}: {(err or out).strip()[:200]}")


# ---------------------------------------------------------------- member logs

class MemberLog:
    """A member program's log, read incrementally while it runs."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.rest = b""
        self.join = None
        self.events = []          # (t, kind, [partitions]) for A, R, L
        self.assigned = set()
        self.last_change = None
        self.deliveries = {}      # partition -> [(t_ns, offset, record_ts_ms)]

    def read(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return
        self.offset += len(data)
        data = self.rest + data
        lines = data.split(b"\n")
        self.rest = lines.pop()
        for line in lines:
            self.parse(line.decode("ascii", "replace").split())

    def parse(self, f):
        if len(f) < 2 or not f[1].isdigit():
            return  # a client library's own output, not ours
        t = int(f[1])
        if f[0] == "M" and len(f) == 5:
            self.deliveries.setdefault(int(f[2]), []).append((t, int(f[3]), int(f[4])))
        elif f[0] == "J":
            self.join = t
        elif f[0] in ("A", "R", "L") and len(f) == 3:
            parts = [] if f[2] == "-" else [int(p) for p in f[2].split(",")]
            self.events.append((t, f[0], parts))
            if f[0] == "A":
                self.assigned |= set(parts)
            else:
                self.assigned -= set(parts)
            self.last_change = t

    def assigned_at(self, t):
        """The partitions this member held at time t."""
        held = set()
        for et, kind, parts in self.events:
            if et >= t:
                break
            if kind == "A":
                held |= set(parts)
            else:
                held -= set(parts)
        return held

    def last_assigned(self, p):
        """When this member was last given partition p."""
        return max((t for t, kind, parts in self.events if kind == "A" and p in parts), default=None)

    def delivered_since(self, p, t):
        return any(d[0] >= t for d in self.deliveries.get(p, ()))


def now_ns():
    return time.time_ns()


def stable(members, partitions):
    """Every partition assigned to exactly one member, every member holding some."""
    seen = []
    for m in members:
        if not m.assigned:
            return False
        seen += list(m.assigned)
    return sorted(seen) == list(range(partitions))


def owner_map(members, at=None):
    own = {}
    for i, m in enumerate(members):
        for p in (m.assigned if at is None else m.assigned_at(at)):
            own[p] = i
    return own


def resume_time(m, p, join):
    """The first delivery of p by member m after its last assignment of p and after the
    join, of a record produced at or after the join."""
    since = max(join, m.last_assigned(p) or 0)
    join_ms = join // 1_000_000
    for t, _, rts in m.deliveries.get(p, ()):
        if t >= since and rts >= join_ms:
            return t
    return None


def max_gap(times, start, end):
    """The longest interval between consecutive delivery times within [start, end], the
    last delivery before start counting as the first."""
    before = [t for t in times if t < start]
    inside = sorted({t for t in times if start <= t <= end})
    points = ([before[-1]] if before else []) + inside
    if len(points) < 2:
        return None
    return max(b - a for a, b in zip(points, points[1:]))


# ---------------------------------------------------------------- one run

class Procs:
    def __init__(self):
        self.live = []

    def start(self, cmd, out_path):
        out = open(out_path, "wb")
        err = open(out_path + ".err", "wb")
        p = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                             start_new_session=True)
        out.close()
        err.close()
        p.err_path = out_path + ".err"
        self.live.append(p)
        return p

    def kill_all(self):
        for p in self.live:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
        for p in self.live:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.live = []


def wait_for(what, cond, timeout, procs, logs):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in logs:
            m.read()
        dead = [p for p in procs.live if p.poll() is not None]
        if dead:
            p = dead[0]
            try:
                tail = open(p.err_path, errors="replace").read().strip().splitlines()[-1:]
            except OSError:
                tail = []
            raise RuntimeError(f"{os.path.basename(p.args[0])} exited ({p.returncode}) while waiting "
                               f"for {what}" + (f": {tail[0][:200]}" if tail else ""))
        if cond():
            return
        time.sleep(0.1)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


def one_run(a, client, cmd, assignor, rep, tool, workdir):
    stamp = f"{os.getpid()}-{int(time.time())}"
    topic = f"perf-rebalance-{client}-{assignor}-{rep}-{stamp}"
    group = f"{topic}-g"
    rundir = os.path.join(workdir, f"{client}-{assignor}-{rep}")
    os.makedirs(rundir, exist_ok=True)
    props = member_properties(client, group, assignor)
    member_cmd = cmd + ["--topic", topic] + [x for k, v in props for x in ("--property", f"{k}={v}")]
    procs = Procs()
    created = False
    try:
        create_topic(tool, topic, a.partitions)
        created = True
        procs.start([KRING_MEMBER, "produce", "--topic", topic, "--partitions", str(a.partitions),
                     "--rate", str(a.rate), "--property", f"bootstrap.servers={BOOTSTRAP}"],
                    os.path.join(rundir, "producer.log"))
        logs = []
        for i in range(a.members):
            path = os.path.join(rundir, f"member{i + 1}.log")
            procs.start(member_cmd, path)
            logs.append(MemberLog(path))

        def settled():
            if not stable(logs, a.partitions):
                return False
            now = now_ns()
            quiet = all(m.last_change is not None and now - m.last_change >= a.settle * 1e9 for m in logs)
            own = owner_map(logs)
            flowing = all(logs[own[p]].delivered_since(p, now - 1_000_000_000) for p in range(a.partitions))
            return quiet and flowing

        wait_for(f"{a.members} members to settle", settled, a.timeout, procs, logs)
        path = os.path.join(rundir, f"member{a.members + 1}.log")
        procs.start(member_cmd, path)
        new = MemberLog(path)
        logs.append(new)

        def done():
            if new.join is None or not stable(logs, a.partitions):
                return False
            own = owner_map(logs)
            return all(resume_time(logs[own[p]], p, new.join) is not None for p in range(a.partitions))

        wait_for("every partition consuming again", done, a.timeout, procs, logs)
        time.sleep(a.after)
        for m in logs:
            m.read()
        if not stable(logs, a.partitions):
            raise RuntimeError("the assignment changed again after the rebalance")
        return measure(logs, new.join, a)
    finally:
        procs.kill_all()
        if created:
            delete_topic(tool, topic)


def measure(logs, join, a):
    before = owner_map(logs, at=join)
    after = owner_map(logs)
    resumes = {p: resume_time(logs[after[p]], p, join) for p in range(a.partitions)}
    done_at = max(resumes.values())
    kept = [p for p in range(a.partitions) if before.get(p) == after[p]]
    moved = a.partitions - len(kept)
    window_end = done_at + 1_000_000_000

    def gaps(parts, start, end):
        g = []
        for p in parts:
            m = logs[after[p]] if start >= join else logs[before[p]]
            x = max_gap([d[0] for d in m.deliveries.get(p, ())], start, end)
            if x is not None:
                g.append(x)
        return max(g) / 1e6 if g else None

    new_events = [e for e in logs[-1].events if e[1] == "A"]
    return {"rebalance_ms": (done_at - join) / 1e6, "moved": moved, "kept": len(kept),
            "kept_gap_ms": gaps(kept, join, window_end),
            "normal_gap_ms": gaps(list(before), join - int(a.settle * 1e9), join),
            "new_member_first_assignment_ms": ((new_events[0][0] - join) / 1e6) if new_events else None,
            "new_member_assignments": len(new_events),
            "final_sizes": sorted(len(m.assigned) for m in logs)}


# ---------------------------------------------------------------- report

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, d=0):
    return "—" if x is None else f"{x:,.{d}f}"


def report(raw_path, out):
    rows = [json.loads(l) for l in open(raw_path) if l.strip()]
    meta = next(r for r in rows if r["type"] == "meta")
    runs = [r for r in rows if r["type"] == "run"]
    L = ["# Rebalance time: a fourth member joins a group of three\n"]
    L.append("Written by `perf/rebalance` (rerun it to refresh; `--report-only` rewrites this page "
             "from `rebalance-raw.jsonl`). A topic of "
             f"{meta['partitions']} partitions gets {meta['rate']:,} records/s (kring-member's paced "
             f"producer, round robin) throughout; {meta['members']} members of one client and assignor "
             "settle, then one more joins. Medians over the runs (min–max in brackets).\n")
    L.append("- **rebalance ms**: from the new member's join (logged just before it subscribes) until "
             "every partition is consuming again: each partition's final owner has got a record "
             "produced after the join, after its last assignment of the partition.")
    L.append("- **moved**: partitions whose owner changed; **kept**: those that kept it.")
    L.append("- **kept gap ms**: the longest pause between two deliveries of a kept partition, from the "
             "join to 1 s past the rebalance's end (max over kept partitions): did the partitions that "
             "stayed put ever stop? **normal gap ms**: the same measure over the "
             f"{meta['settle_s']:g} s before the join, for scale.")
    L.append("- **new member's first assignment ms**: join to its first assignment callback; "
             "**assignments**: how many assignment callbacks the new member saw (a cooperative "
             "rebalance hands it the revoked partitions in a second round).\n")
    L.append("| client | assignor | runs ok | rebalance ms | moved | kept | kept gap ms | normal gap ms | new member's first assignment ms | assignments |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in meta["clients"]:
        for asg in meta["assignors"]:
            rs = [r for r in runs if r["client"] == c and r["assignor"] == asg]
            ok = [r["result"] for r in rs if r.get("result")]
            if not ok:
                why = next((r.get("error") for r in rs if r.get("error")), "no runs")
                L.append(f"| {c} | {asg} | 0/{len(rs)} | failed: {str(why).replace('|', '/')[:150]} | | | | | | |")
                continue
            reb = [x["rebalance_ms"] for x in ok]
            rng = f" ({min(reb):,.0f}–{max(reb):,.0f})" if len(reb) > 1 else ""
            L.append(f"| {c} | {asg} | {len(ok)}/{len(rs)} | {fmt(med(reb))}{rng} | "
                     f"{fmt(med([x['moved'] for x in ok]))} | {fmt(med([x['kept'] for x in ok]))} | "
                     f"{fmt(med([x['kept_gap_ms'] for x in ok]))} | {fmt(med([x['normal_gap_ms'] for x in ok]))} | "
                     f"{fmt(med([x['new_member_first_assignment_ms'] for x in ok]))} | "
                     f"{fmt(med([x['new_member_assignments'] for x in ok]))} |")
    L.append("")
    L.append("## Settings\n")
    L.append("- every member: " + ", ".join(f"`{k}={v}`" for k, v in meta["member_settings"])
             + "; the Java client also `group.protocol=classic`; assignors by name (the Java "
             "client: `RangeAssignor`, `CooperativeStickyAssignor`). With `heartbeat.interval.ms` at "
             "its default of 3 s, the members already in the group learn of the rebalance from their "
             "next heartbeat, so up to 3 s of every figure is that wait.")
    if any(x in KIP848 for x in meta["assignors"]):
        L.append("- `kip848-uniform`: the KIP-848 protocol (`group.protocol=consumer`, "
                 "`group.remote.assignor=uniform`, the broker assigns); the members send neither "
                 "`session.timeout.ms` nor `heartbeat.interval.ms` nor a client-side assignor (the Java "
                 "client refuses them with this protocol): the broker's "
                 "`group.consumer.heartbeat.interval.ms` (1 s as `scripts/kafka` sets it; Kafka's "
                 "default is 5 s) and `group.consumer.session.timeout.ms` (10 s) apply, so a member "
                 "learns of a new target assignment within about 1 s.")
    L.append(f"- members: kring `perf/kring-member member` (a `GroupConsumer`, `next_batch`), "
             "librdkafka `rdkafka-perf member` (`BaseConsumer::poll`, the rdkafka crate's default "
             "rebalance handling: `incremental_assign` for cooperative), Java `perf/java/Member.java` "
             "(`KafkaConsumer.poll(100 ms)`); each logs every record with a wall-clock timestamp.")
    L.append("- nothing is pinned; producer, members and broker share the machine with whatever else "
             "runs (others' builds and tests), so expect noise.")
    L.append("")
    L.append("## Machine and run\n")
    L.append(f"- command: `{meta['command']}`; {meta['date']}; commit {meta['commit']}; "
             f"{meta['nproc']} CPUs; Kafka {meta['kafka']}; load average before "
             f"{' '.join(meta['load_before'])}.")
    L.append("")
    L.append("## Every run\n")
    L.append("| client | assignor | run | rebalance ms | moved | kept gap ms | normal gap ms | first assignment ms | assignments | final sizes |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in runs:
        x = r.get("result")
        if not x:
            L.append(f"| {r['client']} | {r['assignor']} | {r['run']} | failed: {str(r.get('error')).replace('|', '/')[:150]} | | | | | | |")
            continue
        L.append(f"| {r['client']} | {r['assignor']} | {r['run']} | {fmt(x['rebalance_ms'])} | {x['moved']} | "
                 f"{fmt(x['kept_gap_ms'])} | {fmt(x['normal_gap_ms'])} | {fmt(x['new_member_first_assignment_ms'])} | "
                 f"{x['new_member_assignments']} | {'/'.join(map(str, x['final_sizes']))} |")
    with open(out, "w") as f:
        f.write("\n".join(L) + "\n")
    log("\n".join(l for l in L if l.startswith("| ") and "---" not in l))
    log(f"== wrote {os.path.relpath(out, ROOT)}")


# ---------------------------------------------------------------- main

def main(argv):
    ap = argparse.ArgumentParser(prog="perf/rebalance", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of each (client, assignor) (default 3)")
    ap.add_argument("--clients", default=",".join(CLIENTS), help="subset of " + ",".join(CLIENTS))
    ap.add_argument("--assignors", default=",".join(ASSIGNORS), help="subset of " + ",".join(ASSIGNORS))
    ap.add_argument("--partitions", type=int, default=48)
    ap.add_argument("--members", type=int, default=3, help="members before the new one joins (default 3)")
    ap.add_argument("--rate", type=int, default=4800, help="records per second produced (default 4800)")
    ap.add_argument("--settle", type=float, default=3.0,
                    help="seconds without an assignment change before the new member joins (default 3)")
    ap.add_argument("--after", type=float, default=2.0,
                    help="seconds to watch after every partition consumes again (default 2)")
    ap.add_argument("--timeout", type=int, default=90, help="seconds per wait (default 90)")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--out-dir", default=os.path.join("perf", "results"))
    ap.add_argument("--report-only", action="store_true")
    a = ap.parse_args(argv)
    out_dir = a.out_dir if os.path.isabs(a.out_dir) else os.path.join(ROOT, a.out_dir)
    raw_path = os.path.join(out_dir, "rebalance-raw.jsonl")
    md = os.path.join(out_dir, "rebalance.md")
    if a.report_only:
        report(raw_path, md)
        return 0
    a.clients = [c for c in a.clients.split(",") if c]
    a.assignors = [x for x in a.assignors.split(",") if x]
    if any(c not in CLIENTS for c in a.clients) or any(x not in ASSIGNORS for x in a.assignors):
        ap.error(f"clients are {CLIENTS}, assignors {ASSIGNORS}")
    if a.runs < 1 or a.partitions < 1 or a.members < 1 or a.rate < 100:
        ap.error("--runs, --partitions, --members must be positive, --rate at least 100")

    def on_signal(signum, _frame):
        raise Interrupted(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    cmds, errors = build(a.clients, a.no_build)
    tool = topic_tool()
    os.makedirs(out_dir, exist_ok=True)
    workdir = os.path.join(ROOT, "perf", "target", "rebalance")
    os.makedirs(workdir, exist_ok=True)
    _, commit, _ = sh(["git", "rev-parse", "--short", "HEAD"])
    _, kv, _ = sh([KAFKA, "version"])
    raw = open(raw_path, "w")

    def emit(rec):
        raw.write(json.dumps(rec) + "\n")
        raw.flush()

    emit({"type": "meta", "command": "perf/rebalance" + "".join(" " + shlex.quote(x) for x in argv),
          "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit.strip(),
          "nproc": os.cpu_count(), "kafka": kv.strip(), "clients": a.clients, "assignors": a.assignors,
          "partitions": a.partitions, "members": a.members, "rate": a.rate, "settle_s": a.settle,
          "after_s": a.after, "member_settings": MEMBER_SETTINGS, "build_errors": errors,
          "load_before": open("/proc/loadavg").read().split()[:3]})
    failures = 0
    try:
        for rep in range(1, a.runs + 1):
            for c in a.clients:
                for asg in a.assignors:
                    log(f"== {c} {asg} run {rep}/{a.runs}")
                    rec = {"type": "run", "client": c, "assignor": asg, "run": rep}
                    if c not in cmds:
                        rec["error"] = errors.get(c, "not built")
                    else:
                        try:
                            rec["result"] = one_run(a, c, cmds[c], asg, rep, tool, workdir)
                            x = rec["result"]
                            log(f"   rebalance {x['rebalance_ms']:,.0f} ms, moved {x['moved']}, "
                                f"kept gap {fmt(x['kept_gap_ms'])} ms (normal {fmt(x['normal_gap_ms'])} ms)")
                        except RuntimeError as e:
                            rec["error"] = str(e)
                    if rec.get("error"):
                        failures += 1
                        log(f"   FAILED: {rec['error']}")
                    emit(rec)
    except (KeyboardInterrupt, Interrupted) as e:
        log(f"== interrupted ({e})")
        failures += 1
    finally:
        raw.close()
    report(raw_path, md)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
