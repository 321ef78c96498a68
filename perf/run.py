#!/usr/bin/env python3
"""perf/run.py — the side-by-side harness behind `perf/run` (Python 3 standard library only).

Runs each workload with kring and each peer against the local broker and writes
perf/results/run.md, run.svg and run-raw.jsonl. `perf/run --help` lists the options.

Clients. Every client but Java follows the peer contract of perf/README.md (arguments,
payload file, one JSON line on stdout):
  kring       target/release/kring perf produce|consume ...   (cargo build --release --bin kring)
  librdkafka  perf/target/release/rdkafka-perf produce|consume ...   (the perf/ cargo workspace)
  sarama      perf/target/bin/sarama-perf ...      (built by perf/go-build)
  franz-go    perf/target/bin/franz-go-perf ...    (built by perf/go-build)
  java        scripts/kafka run-class org.apache.kafka.tools.ProducerPerformance / ConsumerPerformance,
              through the adapters below, which map the contract's settings to those tools' flags
              and their printed summaries back to the contract's result record; for the
              transactional workloads (N records per transaction, which ProducerPerformance
              cannot do) perf/java/ProducePeer.java, a contract peer compiled with javac
              against `scripts/kafka classpath` into perf/target/java.
The Rust binaries are looked for where cargo puts them: $CARGO_TARGET_DIR/release when that
is set (for kring's workspace and perf/'s alike), else target/release and perf/target/release.

Each run: a fresh topic for every produce run (created before, deleted after, with kring's
`topics` command, or Kafka's TopicCommand with --admin java); consume runs read one topic
filled once beforehand by kring's producer. The client process is started under
`taskset -c 1` and reaped with os.wait4: user+system CPU and peak RSS are the whole
process's (start-up included), while records/s and MB/s come from the client's own
elapsed_s (the Java tools: their own printed figures). The broker's JVM (all threads) is
pinned to CPU 0 for the duration and its previous affinity restored at the end, on
failure and on Ctrl-C as well (try/finally plus SIGTERM/SIGHUP handlers).
"""

import argparse
import json
import os
import platform
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KAFKA = os.path.join(ROOT, "scripts", "kafka")
BOOTSTRAP = "127.0.0.1:9092"
CLIENTS = ["kring", "kring-epoll", "librdkafka", "sarama", "franz-go", "java"]
# `kring-base`: another kring build (--kring-base PATH), e.g. the commit before a change,
# measured interleaved with this tree's kring as a client of its own.
# `kring-epoll`: this tree's kring binary on its epoll backend (`--property
# kring.io.backend=epoll`), beside `kring` on the backend it picks (io_uring where it works).
CONTRACT_CLIENTS = ["kring", "kring-epoll", "kring-base", "librdkafka", "sarama", "franz-go"]
KRING_LIKE = ("kring", "kring-epoll", "kring-base")
COLORS = {"kring": "#c0392b", "kring-epoll": "#7b241c", "kring-base": "#e8a598", "librdkafka": "#2c7fb8",
          "sarama": "#31a354", "franz-go": "#e6850e", "java": "#756bb1"}
PAYLOAD_LINES = 4096
# How long a deleted topic's logs may take to leave the brokers' disks (Topics.delete).
TOPIC_FILES_GONE_TIMEOUT_S = 120

# Records per topic in the multi-node warm-up (--warmup-many-s).
WARMUP_MANY_BATCH = 1_000_000
JAVA_PRODUCER = "org.apache.kafka.tools.ProducerPerformance"
JAVA_CONSUMER = "org.apache.kafka.tools.ConsumerPerformance"
JAVA_TOPICS = "org.apache.kafka.tools.TopicCommand"


def default_workloads():
    """The default workloads, in run order. Every key can be changed with --set."""
    common = {"linger_ms": 5, "batch_size": 1_000_000, "partitions": 3, "replication": 1,
              "brokers": 1}
    # The pipelines' shape: 256 partitions over a three-node cluster (scripts/kafka up
    # --brokers 3, which perf/run brings up itself), replication factor 3.
    # Batch size 64 KiB there: 256 partitions of 1 MB batches would not fit the 32 MiB
    # buffers (Java's buffer.memory), and the Java producer then stalls for want of memory.
    many = {"linger_ms": 5, "batch_size": 65_536, "partitions": 256, "replication": 3,
            "brokers": 3}
    return {
        "produce-100": {"op": "produce", "records": 1_000_000, "size": 100, "acks": "1",
                        "idempotence": "false", "compression": "none", **common},
        "produce-1k": {"op": "produce", "records": 300_000, "size": 1024, "acks": "all",
                       "idempotence": "true", "compression": "lz4", **common},
        # produce-1k in transactions of txn_records records (the contract's
        # --transactional-id, a fresh id per run, and --txn-records): begin, 1,000 sends,
        # commit; the linger ends early at each commit's flush. Not run by default
        # (OPT_IN_WORKLOADS).
        "produce-1k-txn": {"op": "produce", "records": 300_000, "size": 1024, "acks": "all",
                           "idempotence": "true", "compression": "lz4", "txn_records": 1000,
                           **common},
        # The fill producer's settings are acks/idempotence/compression below.
        # 5M records so that the fastest consumer's run lasts long enough to measure.
        "consume-100": {"op": "consume", "records": 5_000_000, "size": 100, "acks": "1",
                        "idempotence": "false", "compression": "none", **common},
        # Compressed batches: decompression dominates every consumer here.
        "consume-1k": {"op": "consume", "records": 500_000, "size": 1024, "acks": "1",
                       "idempotence": "false", "compression": "lz4", **common},
        # consume-100 and consume-1k read by one member of a fresh consumer group
        # (`--group G` of the peer contract: subscribe, oldest offsets, no commits) instead
        # of partition consumers: what group membership costs each client (the Java
        # consumer perf-test always uses a group; the Go peers take no --group yet).
        "consume-100-group": {"op": "consume", "records": 5_000_000, "size": 100, "acks": "1",
                              "idempotence": "false", "compression": "none", "group": 1, **common},
        "consume-1k-group": {"op": "consume", "records": 500_000, "size": 1024, "acks": "1",
                             "idempotence": "false", "compression": "lz4", "group": 1, **common},
        # produce-100 and consume-100 over the SASL_SSL listener (TLS, SCRAM-SHA-512):
        # what TLS costs each client (every client; the contract programs take the
        # settings as --property NAME=VALUE, Java as its own property names).
        "produce-100-sasl-ssl": {"op": "produce", "records": 1_000_000, "size": 100, "acks": "1",
                                 "idempotence": "false", "compression": "none",
                                 "security": "SASL_SSL", **common},
        "consume-100-sasl-ssl": {"op": "consume", "records": 5_000_000, "size": 100, "acks": "1",
                                 "idempotence": "false", "compression": "none",
                                 "security": "SASL_SSL", **common},
        # 1,000,000 keyed records (16-byte keys, the contract's --key-size) over 256
        # partitions of a three-broker cluster, RF 3, acks=all, idempotent, lz4.
        "produce-keyed-many": {"op": "produce", "records": 1_000_000, "size": 200, "key_size": 16,
                               "acks": "all", "idempotence": "true", "compression": "lz4", **many},
        # Reading those 256 partitions back (the topic filled once, the same way).
        "consume-many": {"op": "consume", "records": 1_000_000, "size": 200, "key_size": 16,
                         "acks": "all", "idempotence": "true", "compression": "lz4", **many},
        # A fixed rate (the contract's --rate: 20,000 records/s of 500 B for 30 s, acks=all)
        # into 12 partitions of the three-broker cluster, read back at once by the same
        # client's consumer (--e2e): send-to-ack and end-to-end latency percentiles. At
        # 50,000 records/s (25 MB/s, 75 MB/s written with RF 3) three brokers sharing one
        # core fall behind, and latency is theirs, not the clients'.
        "latency": {"op": "latency", "records": 600_000, "size": 500, "rate": 20_000,
                    "acks": "all", "idempotence": "true", "compression": "none",
                    **dict(many, partitions=12, batch_size=1_000_000)},
    }


# Workloads run only when --workloads names them, so that a plain `perf/run` runs what it
# ran before they were added.
OPT_IN_WORKLOADS = ("produce-1k-txn",)


def cargo_target(default):
    """Where cargo puts release binaries: $CARGO_TARGET_DIR/release when set (cargo
    honours it for every workspace), else `default`/release."""
    return os.path.join(os.environ.get("CARGO_TARGET_DIR") or default, "release")


# The SASL_SSL listener of scripts/kafka and its test credentials.
SASL_SSL_BOOTSTRAP = "127.0.0.1:9492"
SECURE_CLIENTS = ("kring", "kring-epoll", "kring-base", "librdkafka", "sarama", "franz-go", "java")


def kafka_state_dir():
    """Where scripts/kafka keeps its nodes (their pids, configs and logs) and certificates."""
    return os.environ.get("KRING_KAFKA_DIR") or os.path.join(ROOT, "target", "kafka")


def tls_ca():
    return os.path.join(kafka_state_dir(), "tls", "ca.pem")


def security_properties(w):
    """(bootstrap, properties) of a workload: the plaintext listener, or SASL_SSL with
    SCRAM-SHA-512 (librdkafka's property names, which kring and the Go peers take too)."""
    if w.get("security") != "SASL_SSL":
        return BOOTSTRAP, []
    return SASL_SSL_BOOTSTRAP, [("security.protocol", "SASL_SSL"), ("sasl.mechanism", "SCRAM-SHA-512"),
                                ("sasl.username", "kring"), ("sasl.password", "kring-secret"),
                                ("ssl.ca.location", tls_ca())]


def java_security_properties(w):
    if w.get("security") != "SASL_SSL":
        return BOOTSTRAP, []
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="kring" password="kring-secret";')
    return SASL_SSL_BOOTSTRAP, [("security.protocol", "SASL_SSL"), ("sasl.mechanism", "SCRAM-SHA-512"),
                                ("sasl.jaas.config", jaas), ("ssl.truststore.type", "PEM"),
                                ("ssl.truststore.location", tls_ca())]


# The clients whose consume peer takes the contract's `--group G`.
GROUP_CLIENTS = ("kring", "kring-epoll", "kring-base", "librdkafka", "java")


# Clients whose binary lacks the contract's --key-size/--rate/--e2e (a --kring-base
# build from before they existed): set in main, they sit out the workloads needing them.
WITHOUT_PACING = set()


def needs_pacing_options(w):
    """Whether the clients' programs need the contract's --key-size/--rate/--e2e (a
    consume workload's keys are its fill producer's business)."""
    return (w["op"] == "produce" and bool(w.get("key_size"))) or w["op"] == "latency"


def clients_for(w, clients):
    """The clients that can run workload `w`."""
    if needs_pacing_options(w):
        clients = [c for c in clients if c not in WITHOUT_PACING]
    if w.get("security"):
        return [c for c in clients if c in SECURE_CLIENTS]
    if w.get("group"):
        return [c for c in clients if c in GROUP_CLIENTS]
    return list(clients)


class Interrupted(Exception):
    """SIGTERM or SIGHUP: unwinds like Ctrl-C so every finally block runs."""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def sh(cmd, timeout=120):
    """Runs a short helper command; returns (exit code, stdout, stderr)."""
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout, p.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return -1, "", str(e)


def error_line(out, err):
    """The most telling line of a failed helper: the first that names an error, else the last."""
    lines = [l.strip() for l in (err + "\n" + out).splitlines() if l.strip()]
    named = [l for l in lines if "rror" in l or "xception" in l]
    return (named or lines or ["no output"])[0 if named else -1][:300]


def last_line(text):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[-1] if lines else ""


# ---------------------------------------------------------------- payloads

VOCABULARY = ("order customer shipped pending warehouse invoice amount currency EUR USD status "
              "created updated region north south east west priority high low normal sku item "
              "quantity price discount total session user click view page home cart checkout "
              "payment card refund true false null id ts event source web mobile").split(" ")


def payload_file(size):
    """perf/target/payloads-SIZE.txt: PAYLOAD_LINES lines of exactly `size` bytes of
    text-like content — words from a fixed vocabulary drawn by a fixed-seed xorshift64,
    with numbers now and then — the idea of `Payloads` in perf/common/produce.rs.
    Deterministic; rewritten only when its content would differ."""
    mask = (1 << 64) - 1
    x = 0x9E3779B97F4A7C15
    out = []
    for _ in range(PAYLOAD_LINES):
        line = bytearray()
        while len(line) < size:
            x ^= (x << 13) & mask
            x ^= x >> 7
            x ^= (x << 17) & mask
            line += VOCABULARY[x % len(VOCABULARY)].encode()[: size - len(line)]
            if len(line) < size:
                sep = b"=1234," if x >> 60 == 0 else b" "
                line += sep[: size - len(line)]
        out.append(bytes(line))
    data = b"\n".join(out) + b"\n"
    path = os.path.join(ROOT, "perf", "target", f"payloads-{size}.txt")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.exists(path) or open(path, "rb").read() != data:
        with open(path, "wb") as f:
            f.write(data)
    return path


# ---------------------------------------------------------------- measured processes

class Runner:
    """Starts client processes (pinned), reaps them with wait4, kills them on timeout or
    interrupt.

    A process's `ru_maxrss` starts at the peak RSS of the memory it had before its exec
    (Linux records the old mm's high-water mark at exec), and a child that Python forks or
    vforks has Python's memory there: a direct child would show at least this harness's
    own peak RSS. So the client is started by a tiny `/bin/sh` that forks it in the
    background, prints its pid and exits; this process is the client's child subreaper
    (prctl PR_SET_CHILD_SUBREAPER), so the orphaned client becomes its child and is reaped
    here with wait4, its RSS floor being that sh's (about 1.5 MiB). Without prctl the
    client is started directly (and `rss_floor` in the meta line says so)."""

    def __init__(self, pin):
        self.pin = ["taskset", "-c", "1"] if pin else []
        self.groups = set()     # process groups of the clients running now
        self.subreaper = False
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            self.subreaper = libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
        except (OSError, AttributeError):
            pass

    def run(self, cmd, timeout):
        return self.wait(self.start(cmd, timeout))

    def start(self, cmd, timeout):
        """Starts a client (killed after `timeout` s); `wait` reaps it."""
        full = self.pin + cmd
        out = tempfile.TemporaryFile()
        err = tempfile.TemporaryFile()
        t0 = time.monotonic()
        if self.subreaper:
            r, w = os.pipe()
            launcher = subprocess.Popen(
                ["/bin/sh", "-c", f'"$@" {w}>&- & echo $! >&{w}', "sh"] + full, cwd=ROOT,
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, pass_fds=(w,),
                start_new_session=True)
            os.close(w)
            group = launcher.pid
            self.groups.add(group)
            with os.fdopen(r) as f:
                line = f.read().strip()
            launcher.wait()
            if not line.isdigit():
                raise RuntimeError(f"could not start {full[0]}: {line or 'no pid'}")
            pid = int(line)
        else:
            p = subprocess.Popen(full, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 start_new_session=True)
            p.returncode = 0  # reaped below with wait4, not by Popen
            pid = group = p.pid
            self.groups.add(group)
        timed_out = threading.Event()

        def kill():
            timed_out.set()
            self.kill_group(group)

        timer = threading.Timer(timeout, kill)
        timer.start()
        return {"pid": pid, "group": group, "full": full, "out": out, "err": err, "t0": t0,
                "timer": timer, "timed_out": timed_out, "reaped": None}

    def exited(self, h):
        """Whether a started client has exited (reaping it if so)."""
        if h["reaped"] is None:
            pid, status, ru = os.wait4(h["pid"], os.WNOHANG)
            if pid == 0:
                return False
            h["reaped"] = (status, ru, time.monotonic())
        return True

    def stderr_so_far(self, h):
        h["err"].flush()
        with open(f"/proc/self/fd/{h['err'].fileno()}", "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait(self, h):
        try:
            while h["reaped"] is None:
                try:
                    _, status, ru = os.wait4(h["pid"], 0)
                    h["reaped"] = (status, ru, time.monotonic())
                except InterruptedError:
                    continue
        finally:
            h["timer"].cancel()
        status, ru, ended = h["reaped"]
        code = os.waitstatus_to_exitcode(status)
        self.groups.discard(h["group"])
        full, out, err, t0, timed_out = h["full"], h["out"], h["err"], h["t0"], h["timed_out"]
        wall = ended - t0
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
        out.close()
        err.close()
        return {
            "cmd": " ".join(shlex.quote(c) for c in full),
            "exit": code,
            "timed_out": timed_out.is_set(),
            "wall_s": round(wall, 3),
            "utime_s": ru.ru_utime,
            "stime_s": ru.ru_stime,
            "maxrss_kib": ru.ru_maxrss,
            "stdout": stdout,
            "stderr": stderr,
        }

    def kill(self):
        for group in list(self.groups):
            self.kill_group(group)

    def kill_group(self, group):
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass


def failure_reason(r, timeout):
    if r["timed_out"]:
        return f"timed out after {timeout} s"
    if r["exit"] != 0:
        why = f"exit {r['exit']}" if r["exit"] > 0 else f"killed by signal {-r['exit']}"
        lines = [l.strip() for l in r["stderr"].splitlines() if l.strip()]
        # The first line that names the trouble (a usage error's first line, a Java
        # exception rather than its "at ..." lines), else the last.
        named = [l for l in lines if re.search(r"rror|xception|panicked|unknown|failed|FATAL", l)
                 and not l.startswith("at ")]
        pick = named[0] if named else (lines[-1] if lines else "")
        return f"{why}: {pick[:200]}" if pick else why
    return None


# ---------------------------------------------------------------- clients

def peer_command(client, binary, op, w, topic, payload):
    """A contract peer's command line; kring's peer is the `perf` command of its CLI."""
    epoll = ["--property", "kring.io.backend=epoll"] if client == "kring-epoll" else []
    return ([binary] + (["perf"] if client in KRING_LIKE else []) + contract_args(op, w, topic, payload)
            + epoll)


def contract_args(op, w, topic, payload):
    bootstrap, properties = security_properties(w)
    args = [op, "--bootstrap", bootstrap, "--topic", topic, "--records", str(w["records"])]
    for k, v in properties:
        args += ["--property", f"{k}={v}"]
    if op == "consume" and w.get("group"):
        args += ["--group", f"perf-run-{os.getpid()}-{time.time_ns()}"]
    if op == "consume" and w["op"] == "latency":
        args += ["--e2e"]
    if op == "produce" and w.get("key_size"):
        args += ["--key-size", str(w["key_size"])]
    if op == "produce" and w["op"] == "latency":
        args += ["--rate", str(w["rate"])]
    if op == "produce":
        args += ["--payload-file", payload, "--acks", w["acks"], "--idempotence", w["idempotence"],
                 "--compression", w["compression"], "--linger-ms", str(w["linger_ms"]),
                 "--batch-size", str(w["batch_size"])]
        if w.get("txn_records"):
            # A fresh transactional id per run: nothing of an earlier run to fence or recover.
            args += ["--transactional-id", f"perf-run-{os.getpid()}-{time.time_ns()}",
                     "--txn-records", str(w["txn_records"])]
    return args


JAVA_PEER_CLASSES = os.path.join(ROOT, "perf", "target", "java")
# `scripts/kafka run-class`'s JVM options, so that the Java peer runs like the Java tools.
JAVA_PEER_JVM = ["-Xms64m", "-Xmx512m", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                 "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                 "-XX:+ExitOnOutOfMemoryError", "-XX:MaxDirectMemorySize=256m",
                 "-Djava.awt.headless=true", "-Djava.net.preferIPv4Stack=true"]


def build_java_peer():
    """Compiles perf/java/ProducePeer.java and ConsumePeer.java against Kafka's classpath;
    returns (the command prefix that runs a class of them, the class name still to add,
    None) or (None, error)."""
    code, cp, err = sh([KAFKA, "classpath"])
    if code != 0:
        return None, f"scripts/kafka classpath failed: {last_line(err)}"
    _, java, _ = sh([KAFKA, "java"])
    os.makedirs(JAVA_PEER_CLASSES, exist_ok=True)
    sources = [os.path.join(ROOT, "perf", "java", f"{c}.java") for c in JAVA_PEERS.values()]
    code, out, err = sh(["javac", "-cp", cp.strip(), "-d", JAVA_PEER_CLASSES] + sources)
    if code != 0:
        return None, f"javac perf/java/{{{','.join(JAVA_PEERS.values())}}}.java failed: {error_line(out, err)}"
    return [java.strip() or "java"] + JAVA_PEER_JVM + [
        "-cp", f"{JAVA_PEER_CLASSES}:{cp.strip()}"], None


# The Java contract peers, by the op they do.
JAVA_PEERS = {"produce": "ProducePeer", "consume": "ConsumePeer"}


def uses_java_peer(client, w, op=None):
    """Whether `client` does `op` (default: the workload's own) of workload `w` through a
    Java contract peer (perf/java) instead of Kafka's perf-test tools: produce in
    transactions of N records or with keys, and both sides of the latency workload, none
    of which the perf-test tools can do."""
    op = op or w["op"]
    if client != "java":
        return False
    if w["op"] == "latency":
        return True
    return op == "produce" and bool(w.get("txn_records") or w.get("key_size"))


def parse_contract(r, client, op, w):
    """The last stdout line, checked against what was asked."""
    try:
        res = json.loads(last_line(r["stdout"]))
    except ValueError:
        return None, "no JSON result line on stdout"
    if not isinstance(res, dict):
        return None, "result line is not a JSON object"
    if res.get("records") != w["records"]:
        return None, f"result says {res.get('records')} records, not {w['records']}"
    if res.get("op") != op:
        return None, f"result says op {res.get('op')!r}, not {op!r}"
    if not isinstance(res.get("elapsed_s"), (int, float)) or res["elapsed_s"] <= 0:
        return None, f"bad elapsed_s {res.get('elapsed_s')!r}"
    if client == "kring-epoll" and res.get("io_backend") != "epoll":
        return None, f"kring-epoll ran on {res.get('io_backend')!r}, not epoll"
    if res.get("client") != client:
        res["client_reported"] = res.get("client")
    return res, None


def java_command(op, w, topic, payload, group):
    bootstrap, properties = java_security_properties(w)
    if op == "produce":
        return [KAFKA, "run-class", JAVA_PRODUCER, "--bootstrap-server", bootstrap,
                "--topic", topic, "--num-records", str(w["records"]), "--throughput", "-1",
                "--payload-file", payload, "--payload-delimiter", "\\n",
                # --command-property: Kafka 4.4's name for the deprecated --producer-props.
                "--command-property", f"acks={w['acks']}", f"enable.idempotence={w['idempotence']}",
                f"compression.type={w['compression']}", f"linger.ms={w['linger_ms']}",
                f"batch.size={w['batch_size']}"] + java_config_file(properties)
    return [KAFKA, "run-class", JAVA_CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic,
            "--num-records", str(w["records"]), "--group", group] + java_config_file(properties)


def java_config_file(properties):
    """`--command-config FILE` with `properties` (a JAAS value cannot go through
    --command-property, which refuses values with '=' in them)."""
    if not properties:
        return []
    path = os.path.join(ROOT, "perf", "target", "java-sasl-ssl.properties")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in properties)
    return ["--command-config", path]


JAVA_PRODUCER_SUMMARY = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th")


def parse_java(r, op, w):
    """ProducerPerformance's final summary line, or ConsumerPerformance's CSV line."""
    if op == "produce":
        found = JAVA_PRODUCER_SUMMARY.findall(r["stdout"])
        if not found:
            return None, "no summary line from ProducerPerformance"
        n, rps, mbps, avg, mx, p50, p95, p99, p999 = found[-1]
        n, rps = int(n), float(rps)
        if n != w["records"] or rps <= 0:
            return None, f"ProducerPerformance sent {n} records at {rps}/s"
        return {"client": "java", "op": "produce", "records": n, "bytes": n * w["size"],
                "elapsed_s": n / rps, "p50_ms": float(p50), "p99_ms": float(p99),
                "java": {"records_per_s": rps, "mib_per_s": float(mbps), "avg_ms": float(avg),
                         "max_ms": float(mx), "p95_ms": float(p95), "p999_ms": float(p999)}}, None
    lines = [l.strip() for l in r["stdout"].splitlines() if l.strip()]
    for i, l in enumerate(lines[:-1]):
        if l.startswith("start.time"):
            head = [h.strip() for h in l.split(",")]
            vals = [v.strip() for v in lines[i + 1].split(",")]
            row = dict(zip(head, vals))
            try:
                n = int(row["data.consumed.in.nMsg"])
                fetch_ms = float(row["fetch.time.ms"])
                rebalance_ms = float(row["rebalance.time.ms"])
                mib = float(row["data.consumed.in.MB"])
            except (KeyError, ValueError):
                return None, f"unexpected ConsumerPerformance columns: {l}"
            if n < w["records"] or fetch_ms <= 0:
                return None, f"ConsumerPerformance read {n} records in {fetch_ms} ms"
            # Every value in the topic is exactly `size` bytes and keys are null, so
            # n * size is the value bytes (its printed MB are rounded to 4 decimals).
            return {"client": "java", "op": "consume", "records": n,
                    "bytes": n * w["size"], "elapsed_s": fetch_ms / 1000,
                    "p50_ms": None, "p99_ms": None,
                    "java": {"rebalance_ms": rebalance_ms, "fetch_ms": fetch_ms, "mib": mib,
                             "fetch_nmsg_per_s": float(row.get("fetch.nMsg.sec", "nan"))}}, None
    return None, "no CSV result line from ConsumerPerformance"


# ---------------------------------------------------------------- broker

def running_nodes():
    """How many nodes of scripts/kafka's cluster answer now (0: none)."""
    code, out, _ = sh([KAFKA, "status"])
    if code not in (0, 1):
        return 0
    return sum(1 for l in out.splitlines() if re.match(r"node \d+: up\b", l))


class Broker:
    """Finds or starts the cluster of the shape a workload needs (one node, or three for
    the `-many` and latency workloads), pins its JVMs to CPU 0, and undoes all of it at the
    end: a cluster perf/run started is stopped, one that ran before it (of another shape,
    which perf/run had to replace) is started again in its old shape (fresh, its topics
    gone; the report says so)."""

    def __init__(self):
        self.started = False
        self.description = ""
        self.descriptions = {}   # brokers -> description, for the report
        self.brokers = None      # the shape in use
        self.before = None       # nodes of scripts/kafka's cluster before perf/run, once known
        self.replaced = False
        self.had_to_replace = False
        self.pids = []
        self.saved = {}          # (pid, tid) -> previous affinity
        self.pin_note = "not pinned"
        self.pin_notes = []

    def ensure(self, brokers=1):
        if self.brokers == brokers:
            return
        nodes = running_nodes()
        if self.before is None:
            self.before = nodes
        if nodes == brokers or (nodes == 0 and brokers == 1 and listening()):
            self.brokers = brokers
            _, out, _ = sh([KAFKA, "status"])
            self.description = (out.splitlines()[0] if nodes and out else
                                "a broker on 127.0.0.1:9092 started elsewhere")
            if nodes == brokers and brokers > 1:
                self.description = f"{brokers} nodes of scripts/kafka, running before"
            self.descriptions[brokers] = self.description
            return
        self.restore()
        if nodes:
            log(f"== a {nodes}-node cluster is running and {brokers} are needed: scripts/kafka down")
            subprocess.run([KAFKA, "down"], cwd=ROOT, stdin=subprocess.DEVNULL)
            if not self.started:
                self.replaced = self.had_to_replace = True
        log(f"== starting {brokers} node(s): scripts/kafka up --brokers {brokers}")
        p = subprocess.run([KAFKA, "up", "--brokers", str(brokers)], cwd=ROOT, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            raise SystemExit(f"scripts/kafka up --brokers {brokers} failed")
        self.started = True
        self.brokers = brokers
        _, out, _ = sh([KAFKA, "status"])
        self.description = (f"{brokers} node(s) started by perf/run: "
                            + "; ".join(out.splitlines()[:brokers]) if out else "started by perf/run")
        self.descriptions[brokers] = self.description

    def find_pids(self):
        state = kafka_state_dir()
        pids = []
        for n in range(1, (self.brokers or 1) + 1):
            try:
                pid = int(open(os.path.join(state, f"node{n}", "kafka.pid")).read().strip())
                if b"kafka.Kafka" in open(f"/proc/{pid}/cmdline", "rb").read():
                    pids.append(pid)
            except (OSError, ValueError):
                pass
        if pids:
            return pids
        code, out, _ = sh(["pgrep", "-f", r"kafka\.Kafka"])
        found = [int(p) for p in out.split()] if code == 0 else []
        return found if len(found) == (self.brokers or 1) else []

    def pin(self):
        """Every thread of every broker JVM to CPU 0 (threads started later inherit it)."""
        pids = self.find_pids()
        if not pids:
            self.pin_note = "not pinned: broker pid not found (no target/kafka/nodeN/kafka.pid, no kafka.Kafka process)"
            self.pin_notes.append(self.pin_note)
            return
        self.pids = pids
        errors = 0
        for pid in pids:
            for tid in self.tids(pid):
                try:
                    self.saved[(pid, tid)] = os.sched_getaffinity(tid)
                    os.sched_setaffinity(tid, {0})
                except OSError:
                    errors += 1
        if not self.saved:
            self.pin_note = f"not pinned: could not set the affinity of pid(s) {pids}"
            self.pin_notes.append(self.pin_note)
            return
        masks = sorted({cpus_str(m) for m in self.saved.values()})
        self.pin_note = (f"broker JVM pid(s) {', '.join(map(str, pids))}: {len(self.saved)} threads "
                         f"pinned to CPU 0 (previous affinity {', '.join(masks)})"
                         + (f"; {errors} threads could not be pinned (exited?)" if errors else ""))

    def tids(self, pid):
        try:
            return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            return []

    def restore(self):
        if not self.saved:
            return
        done = failed = 0
        for pid in self.pids:
            main = self.saved.get((pid, pid)) or next(iter(self.saved.values()))
            for tid in self.tids(pid):
                try:
                    os.sched_setaffinity(tid, self.saved.get((pid, tid), main))
                    done += 1
                except OSError:
                    failed += 1
        self.saved = {}
        if done:
            self.pin_note += (f"; afterwards restored on {done} threads"
                              + (f", {failed} could not be restored" if failed else ""))
        else:
            self.pin_note += "; affinity NOT restored (broker gone or permission denied)"
        self.pin_notes.append(self.pin_note)
        log(f"== broker affinity restored ({done} threads{', %d failed' % failed if failed else ''})")

    def stop_if_started(self):
        if self.started:
            log("== stopping the cluster perf/run started (scripts/kafka down)")
            subprocess.run([KAFKA, "down"], cwd=ROOT, stdin=subprocess.DEVNULL)
            self.started = False
        if self.replaced and self.before:
            log(f"== starting the {self.before}-node cluster that ran before again "
                f"(fresh: scripts/kafka up --brokers {self.before})")
            subprocess.run([KAFKA, "up", "--brokers", str(self.before)], cwd=ROOT,
                           stdin=subprocess.DEVNULL)
            self.replaced = False


def listening():
    import socket
    try:
        with socket.create_connection(("127.0.0.1", 9092), timeout=2):
            return True
    except OSError:
        return False


def cpus_str(cpus):
    cpus = sorted(cpus)
    parts, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return "CPUs " + ",".join(parts) if len(cpus) > 1 else f"CPU {parts[0]}"


# ---------------------------------------------------------------- builds

def build(clients, no_build, need_kring):
    """Builds what the selected clients need; returns ({client: binary}, {client: error},
    notes)."""
    bins, errors, notes = {}, {}, []
    kring_bin = os.path.join(cargo_target(os.path.join(ROOT, "target")), "kring")
    rdkafka_bin = os.path.join(cargo_target(os.path.join(ROOT, "perf", "target")), "rdkafka-perf")
    logdir = os.path.join(ROOT, "perf", "target")
    os.makedirs(logdir, exist_ok=True)

    def step(name, cmd):
        if no_build:
            return None
        log(f"== build {name}: {' '.join(cmd)}")
        t0 = time.monotonic()
        path = os.path.join(logdir, f"run-build-{name}.log")
        with open(path, "w") as f:
            p = subprocess.run(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
        took = time.monotonic() - t0
        notes.append(f"{name}: `{' '.join(cmd)}` {took:.0f} s")
        if p.returncode != 0:
            tail = open(path).read().strip().splitlines()[-5:]
            log(f"   build {name} FAILED (log {os.path.relpath(path, ROOT)}):\n   " + "\n   ".join(tail))
            return f"build failed: {tail[-1] if tail else 'see ' + path}"
        return None

    if "kring" in clients or "kring-epoll" in clients or need_kring:
        err = step("kring", ["cargo", "build", "--release", "--bin", "kring"])
        if err:
            errors["kring"] = err
        elif os.access(kring_bin, os.X_OK):
            bins["kring"] = kring_bin
        else:
            errors["kring"] = f"{kring_bin} missing"
    if "librdkafka" in clients:
        err = step("librdkafka", ["cargo", "build", "--release", "--manifest-path",
                                  "perf/Cargo.toml", "-p", "rdkafka-perf"])
        if err:
            errors["librdkafka"] = err
        elif os.access(rdkafka_bin, os.X_OK):
            bins["librdkafka"] = rdkafka_bin
        else:
            errors["librdkafka"] = f"{rdkafka_bin} missing"
    go = [c for c in ("sarama", "franz-go") if c in clients]
    if go:
        go_build = os.path.join(ROOT, "perf", "go-build")
        printed = ""
        if not no_build:
            if not os.access(go_build, os.X_OK):
                for c in go:
                    errors[c] = "perf/go-build missing"
                go = []
            else:
                log("== build sarama, franz-go: perf/go-build")
                t0 = time.monotonic()
                code, printed, stderr = sh([go_build], timeout=900)
                notes.append(f"Go peers: `perf/go-build` {time.monotonic() - t0:.0f} s")
                if code != 0:
                    for c in go:
                        errors[c] = f"perf/go-build failed: {last_line(stderr)[:200]}"
                    go = []
        for c in go:
            default = os.path.join(ROOT, "perf", "target", "bin", f"{c}-perf")
            named = [l.strip() for l in printed.splitlines() if l.strip().endswith(f"/{c}-perf")]
            path = os.path.join(ROOT, named[-1]) if named else default
            if os.access(path, os.X_OK):
                bins[c] = path
            else:
                errors[c] = f"{os.path.relpath(path, ROOT)} not built"
    if "java" in clients:
        code, _, stderr = sh([KAFKA, "classpath"])
        if code != 0:
            errors["java"] = f"scripts/kafka classpath failed: {last_line(stderr)}"
        else:
            bins["java"] = KAFKA
    return bins, errors, notes


def kring_has(kring_bin, command, word):
    """Whether this kring binary has `kring COMMAND` (its --help mentions `word`)."""
    if not kring_bin:
        return False
    _, out, err = sh([kring_bin, command, "--help"], timeout=30)
    text = out + err
    # "unknown command": the hand-written parser of older binaries; "unrecognized
    # subcommand": clap's.
    return word in text and "unknown command" not in text and "unrecognized subcommand" not in text


# ---------------------------------------------------------------- topics

# Why perf/run waits --topic-settle seconds after creating a replicated topic (its help and
# the report both say it).
TOPIC_SETTLE_WHY = ("acks=all writes made at once wait up to about half a second, and a "
                    "client that sets up faster pays more of it (measured in "
                    "perf/results/session-36-latency-start; most likely because a follower "
                    "starts fetching a new partition only once its replica fetcher's long poll "
                    "in progress ends, replica.fetch.wait.max.ms = 500 ms, and new leaders "
                    "refuse writes for a while)")

def listdir_or_none(path):
    """The names in directory `path`; none if it is gone."""
    try:
        return os.listdir(path)
    except OSError:
        return []


class Topics:
    def __init__(self, kring_bin, use_kring, settle_s=0.0):
        self.kring = kring_bin
        self.use_kring = use_kring
        self.settle_s = settle_s  # pause once a topic is ready everywhere (--topic-settle)
        self.live = []
        self.brokers = 1         # nodes of the cluster in use (set by the run loop)
        self.ready_s = []        # seconds each topic took to be ready on every node
        self.warned_slow_delete = False

    def tool(self):
        return "kring topics" if self.use_kring else "Kafka TopicCommand (scripts/kafka run-class)"

    def create(self, topic, partitions, replication=1):
        if self.use_kring:
            cmd = [self.kring, "topics", "create", topic, "--partitions", str(partitions),
                   "--replication-factor", str(replication), "--bootstrap", BOOTSTRAP]
        else:
            cmd = [KAFKA, "run-class", JAVA_TOPICS, "--bootstrap-server", BOOTSTRAP, "--create",
                   "--topic", topic, "--partitions", str(partitions), "--replication-factor",
                   str(replication)]
        code, out, err = sh(cmd, timeout=120)
        if code != 0:
            raise RuntimeError(f"create topic {topic}: {error_line(out, err)}")
        self.live.append(topic)
        if self.brokers > 1:
            self.wait_ready(topic, partitions, replication)
            if replication > 1 and self.settle_s > 0:
                time.sleep(self.settle_s)

    def wait_ready(self, topic, partitions, replication):
        """Waits until every broker's metadata has the topic with a leader and a full ISR
        for every partition (a broker answers metadata from what it has applied, so its
        own logs for the topic exist by then): on a cluster of several nodes, creating
        hundreds of replicas takes the brokers seconds, which would otherwise be charged
        to whichever client runs first."""
        t0 = time.monotonic()
        pending = [f"127.0.0.1:{9091 + n}" for n in range(1, self.brokers + 1)]
        while pending and time.monotonic() - t0 < TOPIC_READY_TIMEOUT_S:
            if self.ready_at(pending[0], topic, partitions, replication):
                pending.pop(0)
            else:
                time.sleep(0.2)
        took = time.monotonic() - t0
        if pending:
            raise RuntimeError(f"topic {topic} not ready on {', '.join(pending)} after {took:.0f} s")
        self.ready_s.append(took)

    def ready_at(self, bootstrap, topic, partitions, replication):
        if self.use_kring:
            code, out, _ = sh([self.kring, "topics", "describe", topic, "--json", "--bootstrap",
                               bootstrap], timeout=60)
            try:
                parts = json.loads(out)["partitions"] if code == 0 else []
            except (ValueError, KeyError, TypeError):
                return False
            return (len(parts) == partitions
                    and all(p.get("leader", -1) >= 0 and len(p.get("isr", [])) == replication
                            for p in parts))
        code, out, _ = sh([KAFKA, "run-class", JAVA_TOPICS, "--bootstrap-server", bootstrap,
                           "--describe", "--topic", topic], timeout=120)
        lines = [l for l in out.splitlines() if "\tPartition:" in l or " Partition: " in l]
        return (code == 0 and len(lines) == partitions
                and all("Leader: -1" not in l and "Leader: none" not in l for l in lines))

    def delete(self, topic, wait=True):
        if self.use_kring:
            cmd = [self.kring, "topics", "delete", topic, "--bootstrap", BOOTSTRAP]
        else:
            cmd = [KAFKA, "run-class", JAVA_TOPICS, "--bootstrap-server", BOOTSTRAP, "--delete",
                   "--topic", topic]
        code, out, err = sh(cmd, timeout=120)
        if topic in self.live:
            self.live.remove(topic)
        if code != 0:
            log(f"   warning: delete topic {topic}: {error_line(out, err)}")
        elif wait:
            self.wait_files_gone(topic)

    def wait_files_gone(self, topic):
        """Waits until no node of scripts/kafka's cluster keeps a log directory of `topic`
        (a deleted partition's directory is renamed `...-delete` and removed
        log.segment.delete.delay.ms later, 1 s there): the brokers removing a run's or a
        warm-up's gigabytes of logs during the next run were its worst moments (session
        43: the latency workload's first two runs, p99 327 and 180 ms against 9-11 ms,
        overlapped the removal of the last warm-up topics' logs). Skipped for a cluster
        started before scripts/kafka set that delay (it would be a minute per topic)."""
        dirs = self.data_dirs()
        own = re.compile(re.escape(topic) + r"-\d+(\.[0-9a-f]+-(delete|future|stray))?")
        t0 = time.monotonic()
        while time.monotonic() - t0 < TOPIC_FILES_GONE_TIMEOUT_S:
            if not any(own.fullmatch(e) for d in dirs for e in listdir_or_none(d)):
                return
            time.sleep(0.2)
        log(f"   warning: logs of deleted topic {topic} still on disk after "
            f"{TOPIC_FILES_GONE_TIMEOUT_S} s (runs go on)")

    def data_dirs(self):
        """The log directories of scripts/kafka's nodes, if their brokers remove deleted
        logs promptly (none otherwise: then nothing is waited for)."""
        nodes = [os.path.join(kafka_state_dir(), f"node{n}") for n in range(1, self.brokers + 1)]
        prompt = []
        for node in nodes:
            try:
                with open(os.path.join(node, "server.properties")) as f:
                    if "log.segment.delete.delay.ms=1000" in f.read():
                        prompt.append(os.path.join(node, "data"))
            except OSError:
                pass
        if len(prompt) < len(nodes) and not self.warned_slow_delete:
            self.warned_slow_delete = True
            log("   note: the cluster was started without scripts/kafka's prompt log deletion "
                "(restart it to get it); runs do not wait for deleted topics' logs")
        return prompt if len(prompt) == len(nodes) else []

    def delete_all(self):
        # At the end: nothing runs after, so nothing waits for the logs to go.
        for t in list(self.live):
            self.delete(t, wait=False)


# ---------------------------------------------------------------- the run

def machine_facts():
    model = "?"
    try:
        for l in open("/proc/cpuinfo"):
            if l.startswith("model name"):
                model = l.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for l in open("/proc/meminfo"):
            if l.startswith("MemTotal"):
                mem = f"{int(l.split()[1]) / (1 << 20):.1f} GiB"
    except OSError:
        pass
    _, kv, _ = sh([KAFKA, "version"])
    _, java_bin, _ = sh([KAFKA, "java"])
    java_version = "?"
    if java_bin.strip():
        _, _, jv = sh([java_bin.strip(), "-version"])
        java_version = jv.splitlines()[0] if jv else "?"
    return {"nproc": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "memory": mem, "kafka_version": kv.strip() or "?", "java_version": java_version,
            "python": platform.python_version()}


def client_versions():
    v = {}
    try:
        text = open(os.path.join(ROOT, "Cargo.toml")).read()
        m = re.search(r'\[package\][^\[]*?\nversion\s*=\s*"([^"]+)"', text)
        v["kring"] = m.group(1) if m else "?"
    except OSError:
        v["kring"] = "?"
    for client, module in (("sarama", "github.com/IBM/sarama"), ("franz-go", "github.com/twmb/franz-go")):
        try:
            text = open(os.path.join(ROOT, "perf", "go", "go.mod")).read()
            m = re.search(re.escape(module) + r"\s+(v\S+)", text)
            v[client] = f"{module} {m.group(1)}" if m else "?"
        except OSError:
            v[client] = "? (no go.mod)"
    return v


def commit_facts():
    commit = os.environ.get("KRING_COMMIT")
    if not commit:
        code, out, _ = sh(["git", "rev-parse", "--short", "HEAD"])
        commit = out.strip() if code == 0 else "?"
    code, out, _ = sh(["git", "status", "--porcelain", "--", "src", "Cargo.toml", "Cargo.lock", "perf"])
    dirty = sorted({l[3:].split(" -> ")[-1] for l in out.splitlines()
                    if not l[3:].startswith("perf/results/")}) if code == 0 else []
    return commit, dirty


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="perf/run", description="kring side by side with other Kafka clients (perf/README.md).")
    ap.add_argument("--runs", type=int, help="repetitions of each (workload, client) (default 3; 1 with --quick)")
    ap.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated subset of " + ",".join(CLIENTS))
    ap.add_argument("--workloads",
                    default=",".join(w for w in default_workloads() if w not in OPT_IN_WORKLOADS),
                    help="comma-separated subset of " + ",".join(default_workloads())
                         + " (default: all but " + ", ".join(OPT_IN_WORKLOADS) + ")")
    ap.add_argument("--quick", action="store_true", help="smoke test: 1 run, a tenth of the records")
    ap.add_argument("--set", action="append", default=[], metavar="WORKLOAD.KEY=VALUE",
                    help="change one workload setting, e.g. produce-1k.compression=zstd or "
                         "consume-100.records=2000000 (keys: records size acks idempotence "
                         "compression linger_ms batch_size partitions replication brokers, "
                         "txn_records of produce-1k-txn, key_size of the -many workloads, rate "
                         "of latency; consume-100's acks, "
                         "idempotence and compression are its fill producer's); repeatable")
    ap.add_argument("--linger-ms", type=int, help="every workload's linger (default 5)")
    ap.add_argument("--batch-size", type=int, help="every workload's batch size in bytes (default 1000000)")
    ap.add_argument("--partitions", type=int, help="every workload's partition count (default 3)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per client run (default 300)")
    ap.add_argument("--warmup", type=int, default=500_000,
                    help="records the fill client produces and reads back, unmeasured, before the "
                         "first run, so the broker's JIT and page cache are warm (0: none; "
                         "default 500000)")
    ap.add_argument("--warmup-many-s", type=float, default=None,
                    help="on a multi-node cluster, after the warm-up, keep writing its first "
                         "workload's records (1,000,000 at a time, each batch into a fresh "
                         "topic, as the runs do) until this many seconds have passed since the "
                         "warm-up began: three JVMs on two cores reached their pace only after "
                         "one to two minutes of such load, whatever the record count, and every "
                         "client's first run before that was slow (0: none; default 120, 0 with --quick)")
    ap.add_argument("--warmup-latency-s", type=float, default=None,
                    help="before a fixed-rate (latency) workload's first measured run, one "
                         "unmeasured round of it by the fill client, this many seconds at the "
                         "workload's rate into a topic of its own: the first measured round "
                         "was otherwise the worst for whichever client ran it (p99 12.6 and "
                         "19.0 ms against 9-11 in sessions 44 and 45) (0: none; default 10, 0 "
                         "with --quick)")
    ap.add_argument("--settle", type=float, default=1.0,
                    help="seconds to pause before each measured run, so the broker's background "
                         "work from the previous run (log flushes, deleting its topic) does not "
                         "land on the next client (default 1)")
    ap.add_argument("--topic-settle", type=float, default=2.0,
                    help="seconds to wait, on a cluster of several nodes, once a fresh replicated "
                         "topic is ready on every node and before the run starts: "
                         + TOPIC_SETTLE_WHY + " (default 2)")
    ap.add_argument("--no-build", action="store_true", help="use the binaries as they are")
    ap.add_argument("--no-pin", action="store_true", help="pin neither the clients nor the broker")
    ap.add_argument("--admin", choices=["kring", "java"], default="kring",
                    help="topic admin tool (default kring's `topics`; falls back to java when "
                         "the kring binary has no `topics` command)")
    ap.add_argument("--fill-client", default="kring",
                    help="contract client that fills the consume topic (default kring; falls "
                         "back to librdkafka when kring has no `perf` command)")
    ap.add_argument("--kring-base", metavar="PATH",
                    help="a kring binary built elsewhere (say, the commit before a change): "
                         "measured as client `kring-base`, interleaved with the others")
    ap.add_argument("--out-dir", default=os.path.join("perf", "results"),
                    help="where run.md, run.svg and run-raw.jsonl go (default perf/results)")
    ap.add_argument("--report-only", action="store_true", help="rewrite run.md/run.svg from run-raw.jsonl")
    a = ap.parse_args(argv)
    # Each client once, in the order given (a repeated one would run twice as often).
    a.clients = list(dict.fromkeys(c.strip() for c in a.clients.split(",") if c.strip()))
    if a.kring_base:
        if not os.access(a.kring_base, os.X_OK):
            ap.error(f"--kring-base {a.kring_base}: not an executable")
        if "kring-base" not in a.clients:
            a.clients.append("kring-base")
    bad = [c for c in a.clients if c not in CLIENTS + ["kring-base"]]
    if bad:
        ap.error(f"unknown clients {bad}; known: {CLIENTS}")
    a.workloads = [w.strip() for w in a.workloads.split(",") if w.strip()]
    defaults = default_workloads()
    bad = [w for w in a.workloads if w not in defaults]
    if bad:
        ap.error(f"unknown workloads {bad}; known: {list(defaults)}")
    if a.runs is None:
        a.runs = 1 if a.quick else 3
    if a.warmup_many_s is None:
        a.warmup_many_s = 0.0 if a.quick else 120.0
    if a.warmup_latency_s is None:
        a.warmup_latency_s = 0.0 if a.quick else 10.0
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    wl = {}
    for name in a.workloads:
        w = dict(defaults[name])
        if a.quick:
            w["records"] //= 10
        for key, val in (("linger_ms", a.linger_ms), ("batch_size", a.batch_size),
                         ("partitions", a.partitions)):
            if val is not None:
                w[key] = val
        wl[name] = w
    for s in a.set:
        m = re.fullmatch(r"([\w-]+)\.(\w+)=(.+)", s)
        if not m or m.group(1) not in defaults or m.group(2) not in defaults[m.group(1)] or m.group(2) == "op":
            ap.error(f"--set {s!r}: expected WORKLOAD.KEY=VALUE with a known workload and key")
        name, key, val = m.groups()
        if name in wl:
            wl[name][key] = int(val) if isinstance(defaults[name][key], int) else val
    for name, w in wl.items():
        if w["acks"] not in ("0", "1", "all") or w["idempotence"] not in ("true", "false") \
                or w["compression"] not in ("none", "gzip", "snappy", "lz4", "zstd"):
            ap.error(f"{name}: bad acks/idempotence/compression {w}")
        if w["idempotence"] == "true" and w["acks"] != "all":
            ap.error(f"{name}: idempotence needs acks=all")
    # One cluster shape after the other: the one-node workloads first, then the three-node
    # ones (each change of shape restarts the cluster).
    a.wl = dict(sorted(wl.items(), key=lambda kv: kv[1]["brokers"]))
    return a


def main(argv):
    a = parse_args(argv)
    out_dir = os.path.join(ROOT, a.out_dir) if not os.path.isabs(a.out_dir) else a.out_dir
    raw_path = os.path.join(out_dir, "run-raw.jsonl")
    if a.report_only:
        return report(raw_path, out_dir)

    def on_signal(signum, _frame):
        raise Interrupted(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    t_start = time.monotonic()
    os.makedirs(out_dir, exist_ok=True)
    command = "perf/run" + "".join(" " + shlex.quote(x) for x in argv)
    can_pin = (not a.no_pin and (os.cpu_count() or 1) >= 2 and sh(["taskset", "-c", "1", "true"])[0] == 0
               and {0, 1} <= os.sched_getaffinity(0))
    commit, dirty = commit_facts()
    consume_wanted = any(w["op"] == "consume" for w in a.wl.values())
    need_kring = "kring" in a.clients or a.admin == "kring" or (consume_wanted and a.fill_client == "kring")
    bins, build_errors, build_notes = build(a.clients, a.no_build, need_kring)
    if a.kring_base:
        bins["kring-base"] = os.path.abspath(a.kring_base)
        _, base_help, _ = sh([bins["kring-base"], "perf", "produce", "--help"], timeout=30)
        if "--key-size" not in base_help:
            WITHOUT_PACING.add("kring-base")
            log("== kring-base has no --key-size/--rate: it sits out the keyed and latency workloads")
    java_peer, java_peer_error = None, "not built"
    if "java" in bins and any(uses_java_peer("java", w) for w in a.wl.values()):
        log("== build the Java contract peers: javac perf/java/ProducePeer.java ConsumePeer.java")
        java_peer, java_peer_error = build_java_peer()
        if java_peer_error:
            log(f"   {java_peer_error}")

    built_kring = os.path.join(cargo_target(os.path.join(ROOT, "target")), "kring")
    kring_bin = bins.get("kring") or (built_kring if os.access(built_kring, os.X_OK) else None)
    kring_perf = kring_has(kring_bin, "perf", "produce")
    kring_topics = kring_has(kring_bin, "topics", "create")
    if "kring" in bins and not kring_perf:
        build_errors["kring"] = "this kring binary has no `perf` command"
        del bins["kring"]
    if "kring-epoll" in a.clients:
        if "kring" in bins:
            bins["kring-epoll"] = bins["kring"]
        elif "kring" in build_errors:
            build_errors["kring-epoll"] = build_errors["kring"]
    use_kring_admin = a.admin == "kring" and kring_topics
    admin_note = ""
    if a.admin == "kring" and not kring_topics:
        admin_note = "kring's binary has no `topics` command: fell back to Kafka's TopicCommand"
        log(f"== {admin_note}")
    fill_client = a.fill_client
    fill_note = ""
    if consume_wanted:
        fill_bins = dict(bins)
        if kring_perf and kring_bin:
            fill_bins["kring"] = kring_bin
        if fill_client not in fill_bins or fill_client not in CONTRACT_CLIENTS:
            alt = next((c for c in CONTRACT_CLIENTS if c in fill_bins), None)
            if alt is None:
                raise SystemExit(f"no contract client available to fill the consume topic ({fill_client} is not)")
            fill_note = f"{fill_client} could not fill the consume topic (not available): {alt} did"
            log(f"== {fill_note}")
            fill_client = alt

    broker = Broker()
    runner = Runner(can_pin)
    topics = Topics(kring_bin, use_kring_admin, a.topic_settle)
    failures = 0
    raw = open(raw_path, "w")

    def emit(rec):
        raw.write(json.dumps(rec) + "\n")
        raw.flush()

    prepared = {"brokers": None}
    first_shape = next(iter(a.wl.values()))["brokers"]

    def use_cluster(brokers):
        """The cluster a workload needs, pinned, its broker warmed up once."""
        if prepared["brokers"] == brokers:
            return
        prepared["brokers"] = brokers
        broker.ensure(brokers)
        topics.brokers = brokers
        if can_pin and brokers > 1:
            # Three JVMs on one core replicate 256 partitions several times slower than
            # on two, so slowly that every client waits on them alike: they get both
            # cores (the client still only CPU 1).
            broker.restore()
            broker.pin_note = (f"the {brokers} nodes not pinned: they share both CPUs, the "
                               "client still runs on CPU 1 alone")
            broker.pin_notes.append(broker.pin_note)
            log(f"== {broker.pin_note}")
        elif can_pin:
            broker.pin()
            log(f"== {broker.pin_note}")
        else:
            broker.pin_note = "not pinned (--no-pin, taskset missing or fewer than 2 CPUs)"
        began = time.monotonic()
        if a.warmup > 0:
            warm_up(brokers)
        if brokers > 1 and a.warmup_many_s > 0:
            warm_up_many(brokers, began)

    def first_workload(brokers):
        """The name and settings of the first workload run on a cluster of `brokers`."""
        return next((n, w) for n, w in a.wl.items() if w["brokers"] == brokers)

    def warm_through(topic, warm, ops):
        """Runs the fill client's `ops` with `warm`'s settings through a fresh `topic`,
        deleted afterwards (not measured); False, logged, when one fails."""
        try:
            topics.create(topic, warm["partitions"], warm["replication"])
            warm_bin = bins.get(fill_client) or kring_bin
            for op in ops:
                r = runner.run(peer_command(fill_client, warm_bin, op, warm, topic,
                                            payload_file(warm["size"])), a.timeout)
                err = failure_reason(r, a.timeout)
                if err:
                    log(f"   warm-up {op} failed (runs go on): {err}")
                    return False
            return True
        except RuntimeError as e:
            log(f"   warm-up failed (runs go on): {e}")
            return False
        finally:
            if topic in topics.live:
                topics.delete(topic)

    def warm_up_many(brokers, began):
        """Writes the cluster's first workload's records until --warmup-many-s have passed
        since `began`, each million into a fresh topic, then deleted (not measured)."""
        name, first = first_workload(brokers)
        warm = dict(first, records=WARMUP_MANY_BATCH, op="produce")
        for k in ("txn_records", "rate"):
            warm.pop(k, None)
        log(f"== warm-up: records shaped like {name}'s by {fill_client} until "
            f"{a.warmup_many_s:g} s have passed (not measured)")
        rounds = 0
        while time.monotonic() - began < a.warmup_many_s:
            if not warm_through(f"perf-run-warmup-many-{os.getpid()}-{rounds}", warm, ("produce",)):
                break
            rounds += 1
        log(f"   {rounds} warm-up batch(es) of {WARMUP_MANY_BATCH:,} records, "
            f"{time.monotonic() - began:.0f} s in all")

    def warm_up_latency(name, w, payload, stamp):
        """One unmeasured round of fixed-rate workload `name` by the fill client,
        --warmup-latency-s long, into a topic of its own (deleted afterwards)."""
        warm = dict(w, records=max(1, int(w["rate"] * a.warmup_latency_s)))
        topic = f"perf-run-{name}-warmup-{stamp}"
        warm_bin = bins.get(fill_client) or kring_bin
        if not warm_bin:
            log(f"== warm-up of {name} skipped: no binary of {fill_client}")
            return
        log(f"== warm-up: {warm['records']:,} records of {name} at {w['rate']:,}/s by "
            f"{fill_client} (not measured)")
        try:
            topics.create(topic, w["partitions"], w["replication"])
            cmds = {op: peer_command(fill_client, warm_bin, op, warm, topic, payload)
                    for op in ("consume", "produce")}
            rec = latency_run(runner, fill_client, cmds, warm, a.timeout)
            if rec.get("error"):
                log(f"   warm-up failed (runs go on): {rec['error']}")
            else:
                log(f"   warm-up p99 send→ack {fmt(metrics(rec)['p99'], 1)} ms")
            emit({"type": "warmup", "workload": name, "client": fill_client,
                  "error": rec.get("error")})
        except Exception as e:  # a warm-up that fails must not end the run
            log(f"   warm-up failed (runs go on): {e}")
            emit({"type": "warmup", "workload": name, "client": fill_client, "error": str(e)})
        finally:
            if topic in topics.live:
                topics.delete(topic)

    def warm_up(brokers):
        warm_topic = f"perf-run-warmup-{os.getpid()}-{int(time.time())}"
        warm = dict(first_workload(brokers)[1], records=a.warmup,
                    size=100, acks="all", idempotence="true", compression="none", op="produce")
        for k in ("txn_records", "key_size", "rate"):
            warm.pop(k, None)  # plain records, but through the idempotent acks=all path the
            # workloads take (with acks=1 the first measured run still met a cold broker:
            # on three nodes, p99 131 ms against 9-11 ms once warm)
        log(f"== warm-up: {a.warmup:,} records through {warm_topic} by {fill_client} (not measured)")
        warm_through(warm_topic, warm, ("produce", "consume"))

    try:
        broker.ensure(first_shape)
        facts = machine_facts()
        emit({"type": "meta", "command": command, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "commit": commit, "dirty": dirty, "machine": facts, "versions": client_versions(),
              "clients": a.clients, "workloads": a.wl, "runs": a.runs, "quick": a.quick,
              "timeout_s": a.timeout, "warmup": a.warmup, "warmup_many_s": a.warmup_many_s, "warmup_latency_s": a.warmup_latency_s, "settle_s": a.settle, "topic_settle_s": a.topic_settle, "pinned_clients": can_pin, "subreaper": runner.subreaper, "broker": broker.description,
              "admin": topics.tool(), "admin_note": admin_note, "fill_client": fill_client,
              "fill_note": fill_note, "build_errors": build_errors, "builds": build_notes,
              "load_before": open("/proc/loadavg").read().split()[:3]})
        total = sum(a.runs * len(clients_for(w, a.clients)) for w in a.wl.values())
        done = 0
        for wi, (name, w) in enumerate(a.wl.items()):
            use_cluster(w["brokers"])
            payload = payload_file(w["size"])
            stamp = f"{os.getpid()}-{int(time.time())}"
            consume_topic = None
            if w["op"] == "consume":
                consume_topic = f"perf-run-{name}-{stamp}"
                log(f"== {name}: filling {consume_topic} with {w['records']:,} records by {fill_client}")
                try:
                    topics.create(consume_topic, w["partitions"], w["replication"])
                    r = runner.run(peer_command(fill_client, bins.get(fill_client) or kring_bin, "produce",
                                                w, consume_topic, payload), a.timeout)
                    res, err = (None, failure_reason(r, a.timeout))
                    if err is None:
                        res, err = parse_contract(r, fill_client, "produce", w)
                except RuntimeError as e:
                    r, res, err = {"cmd": "", "wall_s": 0}, None, str(e)
                emit({"type": "fill", "workload": name, "client": fill_client, "topic": consume_topic,
                      "result": res, "error": err, "cmd": r["cmd"], "wall_s": r["wall_s"]})
                if err:
                    log(f"   fill FAILED: {err}")
                    for c in clients_for(w, a.clients):
                        for rep in range(a.runs):
                            failures += 1
                            emit({"type": "run", "workload": name, "client": c, "run": rep + 1,
                                  "error": f"fill by {fill_client} failed: {err}"})
                    if consume_topic in topics.live:
                        topics.delete(consume_topic)
                    done += a.runs * len(clients_for(w, a.clients))
                    continue
            if w["op"] == "latency" and a.warmup_latency_s > 0:
                warm_up_latency(name, w, payload, stamp)
            clients = clients_for(w, a.clients)
            skipped = [c for c in a.clients if c not in clients]
            if skipped:
                why = ("no security settings" if w.get("security") else
                       "no --key-size/--rate/--e2e" if needs_pacing_options(w) else "no --group")
                log(f"== {name}: not run by {', '.join(skipped)} ({why} in their peers)")
            for rep in range(a.runs):
                # The first client rotates with the repetition and the workload, so the
                # first run of a workload (on a broker still busy with the previous
                # workload's topics) does not always fall to the same client.
                k = (rep + wi) % len(clients)
                for client in clients[k:] + clients[:k]:
                    done += 1
                    if a.settle > 0:
                        time.sleep(a.settle)
                    log(f"== [{done}/{total}] {name} {client} run {rep + 1}/{a.runs}")
                    rec = {"type": "run", "workload": name, "client": client, "run": rep + 1}
                    if client in build_errors or client not in bins:
                        rec["error"] = build_errors.get(client, "not built")
                    else:
                        topic = consume_topic or f"perf-run-{name}-{client}-{rep + 1}-{stamp}"
                        rec["topic"] = topic
                        try:
                            if w["op"] in ("produce", "latency"):
                                topics.create(topic, w["partitions"], w["replication"])
                            cmds = {op: client_command(client, bins, java_peer, java_peer_error,
                                                       op, w, topic, payload)
                                    for op in (("consume", "produce") if w["op"] == "latency"
                                               else (w["op"],))}
                            if w["op"] == "latency":
                                rec.update(latency_run(runner, client, cmds, w, a.timeout))
                            else:
                                rec.update(single_run(runner, client, cmds[w["op"]], w, a.timeout))
                        except RuntimeError as e:
                            rec["error"] = str(e)
                        finally:
                            if w["op"] in ("produce", "latency") and topic in topics.live:
                                topics.delete(topic)
                    emit(rec)
                    if rec.get("error"):
                        failures += 1
                        log(f"   FAILED: {rec['error']}")
                    else:
                        m = metrics(rec)
                        log(f"   {m['rps']:,.0f} records/s  {m['mbps']:.1f} MB/s  "
                            f"{m['cpu']:.2f} CPU-s/M  p50 {fmt(m['p50'], 1)} ms  p99 {fmt(m['p99'], 1)} ms  "
                            f"RSS {m['rss']:.0f} MiB  (wall {rec['wall_s']:.1f} s)")
            if consume_topic:
                topics.delete(consume_topic)
    except KeyboardInterrupt:
        log("== interrupted")
        failures += 1
        raise
    except Interrupted as e:
        log(f"== interrupted ({e})")
        failures += 1
        return 130
    finally:
        runner.kill()
        broker.restore()
        topics.delete_all()
        broker.stop_if_started()
        total_s = time.monotonic() - t_start
        emit({"type": "end", "total_s": round(total_s), "failures": failures,
              "broker_pin": "; ".join(dict.fromkeys(broker.pin_notes or [broker.pin_note])),
              "clusters": {str(k): v for k, v in broker.descriptions.items()},
              "topic_ready_s": [round(x, 2) for x in topics.ready_s],
              "replaced_cluster": broker.before if broker.had_to_replace else None,
              "load_after": open("/proc/loadavg").read().split()[:3]})
        raw.close()
        log(f"== total wall time {total_s // 60:.0f} min {total_s % 60:.0f} s (builds included)")
    report(raw_path, out_dir)
    if failures:
        log(f"== {failures} run(s) failed")
        return 1
    return 0


def client_command(client, bins, java_peer, java_peer_error, op, w, topic, payload):
    """The command line that makes `client` do `op` of workload `w`."""
    if uses_java_peer(client, w, op):
        if java_peer is None:
            raise RuntimeError(java_peer_error)
        return java_peer + [JAVA_PEERS[op]] + contract_args(op, w, topic, payload)
    if client == "java":
        group = f"perf-run-{os.getpid()}-{time.time_ns()}"
        return java_command(op, w, topic, payload, group)
    return peer_command(client, bins[client], op, w, topic, payload)


def run_fields(r, res):
    """A run record's fields from the runner's result and the parsed JSON."""
    return {"cmd": r["cmd"], "exit": r["exit"], "wall_s": r["wall_s"], "utime_s": r["utime_s"],
            "stime_s": r["stime_s"], "maxrss_kib": r["maxrss_kib"], "result": res}


def single_run(runner, client, cmd, w, timeout):
    """One produce or consume run: its record fields (with "error" if it failed)."""
    r = runner.run(cmd, timeout)
    err = failure_reason(r, timeout)
    res = None
    if err is None:
        res, err = (parse_java(r, w["op"], w)
                    if client == "java" and not uses_java_peer(client, w)
                    else parse_contract(r, client, w["op"], w))
    rec = run_fields(r, res)
    if err:
        rec["error"] = err
        rec["stderr_tail"] = r["stderr"][-2000:]
    return rec


# How long a new topic may take to be ready on every node of a multi-node cluster.
TOPIC_READY_TIMEOUT_S = 120

# How long the latency workload's consumer may take to print `ready`.
READY_TIMEOUT_S = 60


def latency_run(runner, client, cmds, w, timeout):
    """The latency workload: the client's consumer (`consume --e2e`) started on the empty
    topic, its producer (`produce --rate`) started once the consumer says `ready`, both
    reaped. The record holds the producer's run as a plain one does and the consumer's
    under "consumer"; an error of either fails the run."""
    consumer = runner.start(cmds["consume"], timeout)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while "ready" not in runner.stderr_so_far(consumer).splitlines():
        if runner.exited(consumer) or time.monotonic() > deadline:
            runner.kill_group(consumer["group"])
            c = runner.wait(consumer)
            why = failure_reason(c, timeout) or f"no `ready` within {READY_TIMEOUT_S} s"
            rec = run_fields(c, None)
            rec.update({"error": f"consumer: {why}", "stderr_tail": c["stderr"][-2000:]})
            return rec
        time.sleep(0.05)
    p = runner.run(cmds["produce"], timeout)
    c = runner.wait(consumer)
    rec, errors = {}, []
    for side, r, op in (("producer", p, "produce"), ("consumer", c, "consume")):
        err = failure_reason(r, timeout)
        res = None
        if err is None:
            res, err = parse_contract(r, client, op, w)
        if err is None and op == "consume" and not isinstance(res.get("e2e_p99_ms"), (int, float)):
            err = "no e2e_p99_ms in the consumer's result"
        fields = run_fields(r, res)
        if err:
            errors.append(f"{side}: {err}")
            fields["stderr_tail"] = r["stderr"][-2000:]
        if side == "producer":
            rec.update(fields)
        else:
            rec["consumer"] = fields
    if errors:
        rec["error"] = "; ".join(errors)
    return rec


# ---------------------------------------------------------------- report

# The figures of a run (medians of these go into the tables).
METRICS = ("rps", "mbps", "cpu", "p50", "p99", "p999", "max", "rss",
           "e2e_p50", "e2e_p99", "e2e_p999", "e2e_max", "cpu_consumer", "rss_consumer")


def metrics(rec):
    res = rec["result"]
    cpu = rec["utime_s"] + rec["stime_s"]
    m = {"rps": res["records"] / res["elapsed_s"], "mbps": res["bytes"] / 1e6 / res["elapsed_s"],
         "cpu": cpu / res["records"] * 1e6, "p50": res.get("p50_ms"), "p99": res.get("p99_ms"),
         "p999": res.get("p999_ms"), "max": res.get("max_ms"), "rss": rec["maxrss_kib"] / 1024}
    c = rec.get("consumer")
    if c and c.get("result"):
        cr = c["result"]
        m.update({"e2e_p50": cr.get("e2e_p50_ms"), "e2e_p99": cr.get("e2e_p99_ms"),
                  "e2e_p999": cr.get("e2e_p999_ms"), "e2e_max": cr.get("e2e_max_ms"),
                  "cpu_consumer": (c["utime_s"] + c["stime_s"]) / cr["records"] * 1e6,
                  "rss_consumer": c["maxrss_kib"] / 1024})
    return m


def fmt(x, d=0):
    return "—" if x is None else f"{x:,.{d}f}"


def median(values):
    v = [x for x in values if x is not None]
    return statistics.median(v) if v else None


def summarize(runs, meta):
    """{workload: {client: {"metrics": medians, "ok": n, "runs": n, "errors": [...]}}}"""
    out = {}
    for name in meta["workloads"]:
        out[name] = {}
        for c in meta["clients"]:
            rs = [r for r in runs if r["workload"] == name and r["client"] == c]
            ok = [metrics(r) for r in rs if not r.get("error")]
            med = {k: median([m.get(k) for m in ok]) for k in METRICS} if ok else None
            out[name][c] = {"metrics": med, "ok": len(ok), "runs": len(rs),
                            "errors": [f"run {r['run']}: {r['error']}" for r in rs if r.get("error")]}
    return out


def client_label(c, workload, runs):
    """A client's name in the tables; kring's with the I/O backend its runs reported."""
    backends = sorted({r["result"]["io_backend"] for r in runs
                       if r["workload"] == workload and r["client"] == c and not r.get("error")
                       and isinstance(r.get("result"), dict) and r["result"].get("io_backend")})
    return f"{c} ({', '.join(backends)})" if backends else c


def describe(name, w):
    over = " over SASL_SSL (TLS, SCRAM-SHA-512)" if w.get("security") else ""
    if w.get("group"):
        over += (", as the one member of a fresh consumer group (`--group`: subscribe, no "
                 "commits; clocked from the first assignment, the join left out, as the Java "
                 "perf-test does; the Go peers do not run it)")
    return describe_plain(name, w) + over


def replication(w):
    return (f"replication factor {w.get('replication', 1)}"
            + (f", on {w['brokers']} brokers" if w.get("brokers", 1) > 1 else ""))


def keys(w):
    return (f"{w['key_size']}-byte keys (the contract's --key-size: all distinct, spread by each "
            "client's default partitioner for keyed records)" if w.get("key_size") else "null keys")


def describe_plain(name, w):
    if w["op"] == "latency":
        secs = w["records"] / w["rate"]
        return (f"{w['records']:,} records of {w['size']} B at a fixed {w['rate']:,} records/s "
                f"({secs:g} s), acks={w['acks']}, idempotence={w['idempotence']}, compression "
                f"{w['compression']}, linger {w['linger_ms']} ms, {keys(w)}, {w['partitions']} "
                f"partitions, {replication(w)}; the same client's consumer reads them as they "
                "come (the contract's `produce --rate` and `consume --e2e`): send→ack is the send "
                "call to the delivery report of every record, end to end the send call to the "
                "consumer's hand-over (wall-clock stamps in the values)")
    if w["op"] == "produce":
        txn = (f", in transactions of {w['txn_records']:,} records (begin, {w['txn_records']:,} "
               "sends, commit; a fresh transactional id per run; elapsed_s to the end of the "
               "last commit; Java through perf/java/ProducePeer.java, not ProducerPerformance)"
               if w.get("txn_records") else "")
        return (f"produce {w['records']:,} records of {w['size']} B, acks={w['acks']}, "
                f"idempotence={w['idempotence']}, compression {w['compression']}, "
                f"linger {w['linger_ms']} ms, batch size {w['batch_size']:,} B, {keys(w)}, "
                f"{w['partitions']} partitions, {replication(w)}{txn}")
    return (f"consume {w['records']:,} records of {w['size']} B from {w['partitions']} partitions "
            f"({replication(w)}), oldest offset on; the topic filled once beforehand "
            f"(acks={w['acks']}, compression {w['compression']}, linger {w['linger_ms']} ms, "
            f"batch size {w['batch_size']:,} B, {keys(w)})")


def latency_table(name, meta, summary, runs):
    """The latency workload's table: percentiles of both latencies, both processes' CPU."""
    L = ["| client | records/s | send→ack p50 ms | p99 | p99.9 | max | end-to-end p50 ms | p99 | "
         "p99.9 | max | producer CPU-s per M | consumer CPU-s per M | peak RSS MiB (producer, consumer) "
         "| runs ok | kring ÷ client p99 send→ack | kring ÷ client p99 end to end |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    km = summary[name].get("kring", {}).get("metrics")
    for c in meta["clients"]:
        s = summary[name][c]
        mm = s["metrics"]
        if mm is None:
            if s["runs"] == 0:
                L.append(f"| {c} | not run (its program lacks this workload's options) |" + " |" * 15)
                continue
            why = s["errors"][0].split(": ", 1)[-1] if s["errors"] else "no runs"
            L.append(f"| {c} | failed: {why.replace('|', '/')} |" + " |" * 13 + f" 0/{s['runs']} | | |")
            continue

        def ratio(k):
            return f"{km[k] / mm[k]:.2f}" if km and km.get(k) and mm.get(k) else "—"
        L.append(f"| {client_label(c, name, runs)} | {fmt(mm['rps'])} | {fmt(mm['p50'], 2)} | "
                 f"{fmt(mm['p99'], 2)} | {fmt(mm['p999'], 2)} | {fmt(mm['max'], 1)} | "
                 f"{fmt(mm['e2e_p50'], 2)} | {fmt(mm['e2e_p99'], 2)} | {fmt(mm['e2e_p999'], 2)} | "
                 f"{fmt(mm['e2e_max'], 1)} | {fmt(mm['cpu'], 2)} | {fmt(mm['cpu_consumer'], 2)} | "
                 f"{fmt(mm['rss'], 0)}, {fmt(mm['rss_consumer'], 0)} | {s['ok']}/{s['runs']} | "
                 f"{ratio('p99')} | {ratio('e2e_p99')} |")
    L += per_run_p99(name, meta, runs)
    L += failed_runs(name, meta, summary)
    return L


def per_run_p99(name, meta, runs):
    """Each client's p99 send→ack of every run, in run order: on a shared broker host one
    run's p99 is mostly the brokers' worst moment (a 300 ms stall holds over 1% of a 30 s
    run's records), so the spread says more than any one figure."""
    parts = []
    for c in meta["clients"]:
        values = [r["result"]["p99_ms"] for r in runs
                  if r["workload"] == name and r["client"] == c and not r.get("error")
                  and isinstance(r.get("result"), dict)
                  and isinstance(r["result"].get("p99_ms"), (int, float))]
        if values:
            parts.append(f"{c} {', '.join(fmt(v, 1) for v in values)}")
    if not parts:
        return []
    return ["", "p99 send→ack of each run, ms, in run order (one run's p99 is mostly the "
            "brokers' worst moment; the spread says more than one figure): "
            + "; ".join(parts) + "."]


def failed_runs(name, meta, summary):
    """The lines naming a workload's failed runs, and the blank line after its table."""
    errs = [(c, e) for c in meta["clients"] for e in summary[name][c]["errors"]]
    lines = ["", "Failed runs: " + "; ".join(f"{c} {e}" for c, e in errs) + "."] if errs else []
    return lines + [""]


def report(raw_path, out_dir):
    try:
        rows = [json.loads(l) for l in open(raw_path) if l.strip()]
    except OSError:
        log(f"no {raw_path}: run perf/run without --report-only first")
        return 1
    meta = next((r for r in rows if r.get("type") == "meta"), None)
    if meta is None:
        log(f"{raw_path} has no meta line")
        return 1
    end = next((r for r in rows if r.get("type") == "end"), {})
    runs = [r for r in rows if r.get("type") == "run"]
    fills = [r for r in rows if r.get("type") == "fill"]
    warmups = [r for r in rows if r.get("type") == "warmup"]
    summary = summarize(runs, meta)
    versions = dict(meta["versions"])
    lib = next((r["result"].get("version") for r in runs
                if r["client"] == "librdkafka" and r.get("result") and r["result"].get("version")), None)
    versions["librdkafka"] = (f"librdkafka {lib}" if lib else "librdkafka 2.10.0 (pinned)") + \
        " through the rdkafka crate 0.38.0 (rdkafka-sys 4.9.0)"
    versions["kring"] = f"kring {versions.get('kring', '?')} at {meta['commit']}"
    versions["java"] = f"Kafka {meta['machine']['kafka_version']} Java client and tools ({meta['machine']['java_version']})"
    for c in ("sarama", "franz-go"):
        versions[c] = versions.get(c, "?")
    m = meta["machine"]
    L = ["# kring side by side with other Kafka clients\n"]
    L.append("Written by `perf/run` (rerun it to refresh; `perf/run --report-only` rewrites this "
             "page and `run.svg` from `run-raw.jsonl`). Medians over the runs; the last two "
             "columns divide kring's median by the client's: records/s (above 1: kring faster) "
             "and CPU-seconds per record (below 1: kring uses less CPU), so the kring row reads 1.00.\n")
    L.append("![records/s and CPU per million records](run.svg)\n")
    for name, w in meta["workloads"].items():
        L.append(f"## {name}\n")
        L.append(describe(name, w) + ".\n")
        if w["op"] == "latency":
            L += latency_table(name, meta, summary, runs)
            continue
        L.append("| client | records/s | MB/s | CPU-s per M records | p50 ms | p99 ms | peak RSS MiB | runs ok | kring ÷ client records/s | kring ÷ client CPU |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        km = summary[name].get("kring", {}).get("metrics")
        for c in meta["clients"]:
            s = summary[name][c]
            mm = s["metrics"]
            if mm is None and s["runs"] == 0:
                L.append(f"| {c} | not run (its program lacks this workload's options) | | | | | | | | |")
                continue
            if mm is None:
                why = s["errors"][0].split(": ", 1)[-1] if s["errors"] else "no runs"
                L.append(f"| {c} | failed: {why.replace('|', '/')} | | | | | | 0/{s['runs']} | | |")
                continue
            rr = f"{km['rps'] / mm['rps']:.2f}" if km else "—"
            cr = f"{km['cpu'] / mm['cpu']:.2f}" if km else "—"
            lat = (w["op"] == "produce")
            L.append(f"| {client_label(c, name, runs)} | {fmt(mm['rps'])} | {fmt(mm['mbps'], 1)} | {fmt(mm['cpu'], 2)} | "
                     f"{fmt(mm['p50'], 1) if lat else '—'} | {fmt(mm['p99'], 1) if lat else '—'} | "
                     f"{fmt(mm['rss'], 0)} | {s['ok']}/{s['runs']} | {rr} | {cr} |")
        L += failed_runs(name, meta, summary)
    pairs = [(n, n[:-len("-group")]) for n in meta["workloads"]
             if n.endswith("-group") and n[:-len("-group")] in meta["workloads"]]
    if pairs:
        L.append("## Group member ÷ partition consumers\n")
        L.append("Each client's median in a `-group` workload divided by its median in the same "
                 "workload read without a group (records/s: below 1 the group is slower; CPU per "
                 "record: above 1 it costs more). The Java perf-test uses a group in both.\n")
        L.append("| client | " + " | ".join(f"{g} ÷ {b} records/s | CPU" for g, b in pairs) + " |")
        L.append("|---|" + "---:|---:|" * len(pairs))
        for c in meta["clients"]:
            cells = []
            for g, b in pairs:
                gm, bm = summary[g][c]["metrics"], summary[b][c]["metrics"]
                if gm and bm:
                    cells += [f"{gm['rps'] / bm['rps']:.2f}", f"{gm['cpu'] / bm['cpu']:.2f}"]
                else:
                    cells += ["—", "—"]
            L.append(f"| {c} | " + " | ".join(cells) + " |")
        L.append("")
    L.append("## How it was measured\n")
    L.append("- records/s and MB/s (MB = 10⁶ bytes of record values) come from each client's own "
             "`elapsed_s`: from its first send (first fetch request) to the last delivery report "
             "(the N-th record), excluding process start, connection set-up and topic metadata "
             "(perf/README.md, the peer contract). The Java tools' figures are their own: "
             "ProducerPerformance's records/sec summary (elapsed = records ÷ that rate; its clock "
             "runs from just before the first send, so it includes the first metadata fetch, "
             "to after `producer.close()`), ConsumerPerformance's `fetch.time.ms` (from "
             "`subscribe` to the last record, minus the group join, `rebalance.time.ms`).")
    L.append("- CPU-s per M records: the client process's user+system CPU from `wait4`'s rusage, over "
             "its whole life (start-up, connection, metadata and, for Java, JVM start-up and JIT "
             "compilation included; for Java also the few ms of `scripts/kafka`'s bash before it "
             "`exec`s java), divided by the records. Peak RSS: rusage `ru_maxrss`"
             + (" (the client is forked by a tiny `/bin/sh` and reaped by the harness as its "
                "child subreaper, so the figure is not inflated by the harness's own memory, "
                "which a process forked from it inherits as its `ru_maxrss` floor)."
                if meta.get("subreaper") else
                " (prctl unavailable: the client was forked by the harness itself, so the "
                "harness's own peak RSS is a floor under this figure)."))
    L.append("- latency (produce only): per record, send call to delivery report, as each client "
             "samples it (the contract asks for at least every 100th record; Java's "
             "ProducerPerformance reports whole milliseconds). With every client sending flat "
             "out, it is mostly time queued in the client's buffer, so it follows the clients' "
             "buffer sizes more than their speed.")
    L.append("- delivery reports when sending flat out: every client is told of each record, in "
             "its own idiom: librdkafka's delivery report callback with the record's index as "
             "opaque, served by `poll` on the sending thread; Java's send callback; franz-go's "
             "promise; Sarama's Successes channel; kring's delivery handler with the record's "
             "index as tag (`Producer::send_tagged_blocking`, a batch's reports at a time; `kring perf "
             "produce --deliveries futures` sends with a delivery future per record instead). "
             "The fixed-rate latency workload times each record with kring's delivery futures.")
    if any(w.get("txn_records") for w in meta["workloads"].values()):
        L.append("- transactions (`-txn` workloads): each client sets a fresh `transactional.id` "
                 "per run and initialises transactions before its clock starts, then begins, sends "
                 "N records and commits, again and again (the contract's `--transactional-id ID "
                 "--txn-records N`); elapsed_s runs to the end of the last commit, latency to each "
                 "record's delivery report. Java runs perf/java/ProducePeer.java here (its "
                 "KafkaProducer with initTransactions/beginTransaction/commitTransaction), not "
                 "ProducerPerformance, whose transactions end by time.")
    if any(w.get("brokers", 1) > 1 for w in meta["workloads"].values()):
        clusters = end.get("clusters") or {}
        L.append("- clusters: the one-node workloads ran first, on "
                 + clusters.get("1", meta["broker"]) + "; the three-node ones then on "
                 + clusters.get("3", "a three-node cluster") + " (scripts/kafka up --brokers 3, "
                 "every node a broker and controller; topics created with their replication "
                 "factor, so acks=all waits for all three replicas, and each run started only "
                 "once every node's metadata showed the new topic with a leader and a full ISR "
                 "for every partition"
                 + (f": {min(end['topic_ready_s']):.1f}–{max(end['topic_ready_s']):.1f} s after "
                    "its creation" if end.get("topic_ready_s") else "")
                 + (f", and then {meta['topic_settle_s']:g} s more (--topic-settle: "
                    + TOPIC_SETTLE_WHY + ")" if meta.get("topic_settle_s") else "") + ")"
                 + (f"; a {end['replaced_cluster']}-node cluster that ran before perf/run was "
                    "stopped for it and started again, fresh, at the end"
                    if end.get("replaced_cluster") else "") + ".")
    if any(w["op"] == "latency" for w in meta["workloads"].values()):
        L.append("- latency workload: the consumer and the producer of a run are the same "
                 "client's contract programs, both pinned to CPU 1 with the brokers on CPU 0; "
                 "the producer starts when the consumer prints `ready`. Each value's first 19 "
                 "bytes carry the send call's wall-clock time (ns since the epoch); the consumer "
                 "subtracts it from the wall clock when the record is handed over. Every record "
                 "is timed, and records/s is what the producer achieved (the schedule's rate if "
                 "it kept up). Java runs perf/java/ProducePeer.java and ConsumePeer.java here "
                 "(Kafka's perf-test tools cannot stamp values).")
    if meta["pinned_clients"]:
        L.append("- pinning: each client process ran on CPU 1 (`taskset -c 1`), the broker on CPU 0: "
                 f"{end.get('broker_pin', 'unknown (the run did not finish)')}. So a client never has "
                 "more than one core and the broker has the other, but nothing keeps other "
                 "processes off either core.")
    else:
        L.append("- pinning: none (--no-pin, no taskset, or fewer than 2 CPUs); clients and broker "
                 "shared every core.")
    L.append(f"- every (workload, client) run {meta['runs']} time(s), clients interleaved "
             "round-robin within each repetition (the first client rotates with the repetition and the workload); each produce run "
             f"writes a fresh topic, created before and deleted after it with {meta['admin']}"
             + (f" ({meta['admin_note']})" if meta.get("admin_note") else "")
             + f"; consume runs all read one topic filled by {meta['fill_client']}'s producer"
             + (f" ({meta['fill_note']})" if meta.get("fill_note") else "") + ".")
    if meta.get("warmup"):
        L.append(f"- before the first run on each cluster, {meta['warmup']:,} records of 100 B went "
                 f"through it unmeasured ({meta['fill_client']} produced them, idempotent with "
                 "acks=all, and read them), to warm its JIT "
                 "and page cache"
                 + (f"; on a multi-node cluster, its first workload's records then went "
                    f"through it a million at a time until {meta['warmup_many_s']:g} s had "
                    "passed (three JVMs on two cores reach their pace only after a minute or "
                    "two of load)" if meta.get("warmup_many_s") else "")
                 + "; each measured run starts after a pause of "
                 f"{meta.get('settle_s', 0):g} s.")
    for wu in warmups:
        outcome = f"failed ({wu['error']}); its runs went on" if wu.get("error") else "ran"
        L.append(f"- before the first measured run of {wu['workload']}, one unmeasured round of it "
                 f"by {wu['client']} ({meta.get('warmup_latency_s', 0):g} s at its rate, into a "
                 f"topic of its own) {outcome}: the first measured round of that workload was "
                 "otherwise the worst for whichever client ran it.")
    L.append("- batch size 1,000,000 bytes in every client (`batch.size` / the contract's "
             "`--batch-size`), much larger than the Java producer's default 16 KiB, so that no "
             "client is limited by its batch size (65,536 in the 256-partition workloads, "
             "whose batches must fit 32 MiB of buffers); linger 5 ms. Other settings are each client's "
             "defaults except: librdkafka `queue.buffering.max.kbytes`=32768 and "
             "`queue.buffering.max.messages`=10,000,000 (a 32 MiB byte budget like the Java "
             "producer's `buffer.memory`; librdkafka's 100,000-message default would otherwise "
             "cap 100 B records at 10 MB) and, consuming, `fetch.queue.backoff.ms`=10 (its 1 s "
             "default idles a partition whenever its prefetch queue fills). CRC checks of fetched "
             "batches follow the defaults too: on in kring (`check_crcs`) and the Java consumer "
             "(`check.crcs`), off in librdkafka (`check.crcs`). The Sarama and franz-go peers' "
             "settings are in perf/go/cmd/sarama-perf and perf/go/cmd/franz-go-perf.")
    L.append("- payloads: `perf/target/payloads-SIZE.txt`, 4,096 lines of exactly SIZE bytes of "
             "text-like content (words from a fixed vocabulary drawn by a fixed-seed xorshift, "
             "numbers now and then); record i's value is line i mod 4,096 (Java's "
             "ProducerPerformance picks a line at random per record); keys null.")
    L.append("- Java: `scripts/kafka run-class org.apache.kafka.tools.ProducerPerformance "
             "--num-records N --throughput -1 --payload-file F --payload-delimiter '\\n' "
             "--command-property acks=… enable.idempotence=… compression.type=… linger.ms=… "
             "batch.size=…` (Kafka 4.4's name for `--producer-props`), and `… ConsumerPerformance "
             "--num-records N --group <fresh>` (a consumer group, unlike the other clients' "
             "partition assignment). JVM: `-Xms64m -Xmx512m`, G1, as `scripts/kafka run-class` sets.")
    L.append("")
    L.append("## Commands\n")
    L.append("The first run's command line for each workload and client (`taskset -c 1` is the pinning; "
             "topic names differ per run):\n")
    L.append("```")
    for name in meta["workloads"]:
        for c in meta["clients"]:
            r = next((r for r in runs if r["workload"] == name and r["client"] == c and r.get("cmd")), None)
            if r:
                if (r.get("consumer") or {}).get("cmd"):
                    L.append(r["consumer"]["cmd"].replace(ROOT + "/", "") + "   # then, once it says ready:")
                L.append(r["cmd"].replace(ROOT + "/", ""))
    L.append("```")
    L.append("")
    L.append("## Versions\n")
    for c in meta["clients"]:
        L.append(f"- {c}: {versions.get(c, '?')}")
    L.append("")
    L.append("## Machine and run\n")
    L.append(f"- command: `{meta['command']}`; {meta['date']}; commit {meta['commit']}"
             + (f" (uncommitted changes in {', '.join(meta['dirty'])})" if meta.get("dirty") else "") + ".")
    tot = end.get("total_s")
    L.append(f"- total wall time: {tot // 60} min {tot % 60} s, builds included." if tot is not None
             else "- total wall time: unknown (the run did not finish).")
    if meta.get("builds"):
        L.append("- builds: " + "; ".join(meta["builds"]) + ".")
    L.append(f"- {m['nproc']} CPUs ({m['cpu_model']}), {m['memory']} RAM, Linux {m['kernel']}; "
             f"Kafka {m['kafka_version']}, broker: {meta['broker']}, on the same machine; "
             f"per-run timeout {meta['timeout_s']} s.")
    L.append(f"- load average (1, 5, 15 min) {' '.join(meta.get('load_before', []))} before, "
             f"{' '.join(end.get('load_after', []))} after: others' builds and tests share these two "
             "cores and the broker, so absolute figures are noisy; compare clients within this run.")
    for f in fills:
        if f.get("result"):
            res = f["result"]
            L.append(f"- fill of `{f['workload']}` by {f['client']}: {res['records']:,} records in "
                     f"{res['elapsed_s']:.2f} s (not measured otherwise).")
        else:
            L.append(f"- fill of `{f['workload']}` by {f['client']} FAILED: {f.get('error')}.")
    L.append("- every run (client JSON, rusage, command line) is in `run-raw.jsonl`.")
    L.append("")
    L.append("## Every run\n")
    L.append("| workload | client | run | records/s | CPU-s per M | p50 ms | p99 ms | RSS MiB | wall s |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        if r.get("error"):
            L.append(f"| {r['workload']} | {r['client']} | {r['run']} | failed: {r['error'].replace('|', '/')[:160]} | | | | | |")
        else:
            mm = metrics(r)
            L.append(f"| {r['workload']} | {r['client']} | {r['run']} | {fmt(mm['rps'])} | {fmt(mm['cpu'], 2)} | "
                     f"{fmt(mm['p50'], 1)} | {fmt(mm['p99'], 1)} | {fmt(mm['rss'], 0)} | {r['wall_s']:.1f} |")
    md = os.path.join(out_dir, "run.md")
    with open(md, "w") as f:
        f.write("\n".join(L) + "\n")
    svg = os.path.join(out_dir, "run.svg")
    with open(svg, "w") as f:
        f.write(chart(summary, meta))
    tables = L[:L.index("## How it was measured\n")]
    log("\n".join(l for l in tables if l.startswith(("|", "## ")) and not l.startswith("|---")))
    log(f"== wrote {os.path.relpath(md, ROOT)}, {os.path.relpath(svg, ROOT)} ({len(runs)} runs)")
    return 0


# ---------------------------------------------------------------- chart

def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def short(x):
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e4:
        return f"{x / 1e3:.0f}k"
    if x >= 1e3:
        return f"{x / 1e3:.1f}k"
    if x >= 10:
        return f"{x:.0f}"
    return f"{x:.2f}"


def tick_label(t):
    if t >= 1e6:
        return f"{t / 1e6:g}M"
    if t >= 1e3:
        return f"{t / 1e3:g}k"
    return f"{t:g}"


def ticks(top):
    """Round tick values from 0 up to at least `top`, at most about 5 of them."""
    if top <= 0:
        return [0, 1]
    raw = top / 4
    mag = 10 ** int(f"{raw:e}".split("e")[1])
    step = next(s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw)
    n = int(top / step + 0.999)
    return [i * step for i in range(n + 1)]


def chart(summary, meta):
    """Small multiples: one column per workload, a records/s row and a CPU row, one
    horizontal bar per client with its value printed; own scale in each cell."""
    clients = meta["clients"]
    workloads = list(meta["workloads"])
    cell_w, label_w, bar_h, gap = 330, 78, 20, 6
    plot_w = cell_w - label_w - 40
    cell_h = 48 + len(clients) * (bar_h + gap) + 34
    left, top = 16, 86
    width = left * 2 + len(workloads) * cell_w
    rows = [("rps", "records/s", "records per second — higher is better"),
            ("cpu", "CPU-s per million records", "CPU-seconds per 10⁶ records — lower is better")]
    height = top + len(rows) * (cell_h + 14) + 10
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12">',
         f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
         f'<text x="{left}" y="24" font-size="17" font-weight="bold">kring side by side with other Kafka clients</text>',
         f'<text x="{left}" y="44" fill="#555">{esc(meta["date"])} · commit {esc(meta["commit"])} · '
         f'{meta["machine"]["nproc"]} CPUs, Kafka {esc(meta["machine"]["kafka_version"])}'
         + (" · client on CPU 1, broker on CPU 0" if meta["pinned_clients"] else " · not pinned")
         + f' · medians of {meta["runs"]} run(s)</text>']
    x = left
    for c in clients:
        o.append(f'<rect x="{x}" y="58" width="12" height="12" fill="{COLORS[c]}"/>')
        o.append(f'<text x="{x + 17}" y="69">{esc(c)}</text>')
        x += 30 + 7 * len(c) + 20
    for ri, (key, title, axis) in enumerate(rows):
        y0 = top + ri * (cell_h + 14)
        for wi, name in enumerate(workloads):
            x0 = left + wi * cell_w
            w = meta["workloads"][name]
            sub = (f"{w['size']} B, acks={w['acks']}, {w['compression']}" if w["op"] == "produce"
                   else f"{w['size']} B, {w['partitions']} partitions")
            if w.get("txn_records"):
                sub += f", {w['txn_records']:,} per transaction"
            o.append(f'<rect x="{x0 + 4}" y="{y0}" width="{cell_w - 8}" height="{cell_h}" fill="#fafafa" stroke="#ddd"/>')
            o.append(f'<text x="{x0 + 12}" y="{y0 + 18}" font-weight="bold">{esc(name)}: {esc(title)}</text>')
            o.append(f'<text x="{x0 + 12}" y="{y0 + 33}" fill="#666" font-size="11">{esc(w["op"])} {esc(sub)}</text>')
            vals = {c: (summary[name][c]["metrics"] or {}).get(key) for c in clients}
            tks = ticks(max([v for v in vals.values() if v] or [1]) * 1.0)
            scale = plot_w / tks[-1]
            px0 = x0 + label_w
            by = y0 + 44
            axis_y = by + len(clients) * (bar_h + gap)
            for t in tks:
                tx = px0 + t * scale
                o.append(f'<line x1="{tx:.1f}" y1="{by - 2}" x2="{tx:.1f}" y2="{axis_y}" stroke="#e3e3e3"/>')
                o.append(f'<text x="{tx:.1f}" y="{axis_y + 13}" text-anchor="middle" fill="#555" font-size="10">{tick_label(t)}</text>')
            o.append(f'<line x1="{px0}" y1="{by - 2}" x2="{px0}" y2="{axis_y}" stroke="#888"/>')
            o.append(f'<line x1="{px0}" y1="{axis_y}" x2="{px0 + plot_w}" y2="{axis_y}" stroke="#888"/>')
            o.append(f'<text x="{px0 + plot_w / 2:.1f}" y="{axis_y + 28}" text-anchor="middle" fill="#333" font-size="10.5">{esc(axis)}</text>')
            for ci, c in enumerate(clients):
                yy = by + ci * (bar_h + gap)
                o.append(f'<text x="{px0 - 6}" y="{yy + bar_h - 6}" text-anchor="end">{esc(c)}</text>')
                v = vals[c]
                if v is None:
                    o.append(f'<text x="{px0 + 6}" y="{yy + bar_h - 6}" fill="#b00" font-style="italic">failed</text>')
                    continue
                bw = max(1.0, v * scale)
                o.append(f'<rect x="{px0}" y="{yy}" width="{bw:.1f}" height="{bar_h}" fill="{COLORS[c]}">'
                         f'<title>{esc(c)} {esc(name)}: {v:,.3f} {esc(title)}</title></rect>')
                label = short(v) if key == "rps" else f"{v:.2f}"
                if bw > 52:
                    o.append(f'<text x="{px0 + bw - 5:.1f}" y="{yy + bar_h - 6}" text-anchor="end" fill="#fff" font-weight="bold">{label}</text>')
                else:
                    o.append(f'<text x="{px0 + bw + 4:.1f}" y="{yy + bar_h - 6}" fill="#222">{label}</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
