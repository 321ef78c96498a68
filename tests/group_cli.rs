//! `kring consume -G` (the balanced consumer) and `kring groups` against the real
//! broker, with the `kring` binary run as child processes:
//! - `-c N` prints exactly N records and commits exactly what it printed (the next
//!   member starts at the record after), `-e` stops at the end of what it was assigned,
//!   and `groups reset-offsets --to earliest|OFFSET|@MS` moves what the next member
//!   reads once the members have left;
//! - two members share a topic and together print every record once; `groups describe`
//!   shows both members and their partitions, and after SIGTERM the group is empty
//!   with nothing left to read (commit and LeaveGroup on the signal);
//! - three members on 12 partitions with a producer running, one killed with SIGKILL
//!   and a fourth started: no record is lost, survivors never print a record twice, and
//!   the duplicates are records the killed member printed after its last commit (from
//!   its `--commit-log`), at most that many.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kring::producer::{Producer, ProducerRecord};

/// The `kring` binary: `$KRING_CLI_BIN` when set (a private copy, since every worktree
/// sharing the target directory rebuilds `target/debug/kring`), else cargo's.
fn kring_bin() -> String {
    std::env::var("KRING_CLI_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_kring").to_string())
}

/// Runs kring to completion and expects success; answers stdout and stderr.
fn ok(args: &[&str]) -> (String, String) {
    let out = guarded(args, Duration::from_secs(120));
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 stdout");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "kring {args:?} failed: {stderr}\n{stdout}"
    );
    (stdout, stderr)
}

/// Runs kring with a hang guard: a child still running after `limit` is killed and the
/// test fails (a guard against a hang, not a timing assertion).
fn guarded(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(kring_bin())
        .args(args)
        .env("KRING_BOOTSTRAP", common::bootstrap())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning kring");
    // Drain both pipes meanwhile, so a chatty child never blocks on a full pipe.
    let stdout = drain(child.stdout.take().expect("stdout"));
    let stderr = drain(child.stderr.take().expect("stderr"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for kring") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "kring {args:?} still running after {limit:?} (hung); stderr:\n{}",
                String::from_utf8_lossy(&stderr.join().unwrap())
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = pipe.read_to_end(&mut all);
        all
    })
}

/// `(partition, offset)` of each `%p %o` line.
fn printed(stdout: &str) -> Vec<(i32, i64)> {
    stdout.lines().map(parse_printed).collect()
}

fn parse_printed(line: &str) -> (i32, i64) {
    let mut words = line.split_whitespace();
    let p = words.next().and_then(|w| w.parse().ok());
    let o = words.next().and_then(|w| w.parse().ok());
    match (p, o) {
        (Some(p), Some(o)) => (p, o),
        _ => panic!("not a \"%p %o\" line: {line:?}"),
    }
}

/// The `commit TOPIC PARTITION OFFSET` lines of a `--commit-log`.
fn commits(stderr: &str) -> Vec<(i32, i64)> {
    stderr
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split('\t').collect();
            (w.len() == 4 && w[0] == "commit")
                .then(|| (w[2].parse().unwrap(), w[3].parse().unwrap()))
        })
        .collect()
}

/// `groups describe` rows of `topic`: partition → (committed, end, lag) as printed.
fn described_rows(group: &str, topic: &str) -> BTreeMap<i32, (String, String, String)> {
    let (text, _) = ok(&["groups", "describe", group]);
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() >= 5 && w[0] == topic).then(|| {
                (
                    w[1].parse().unwrap(),
                    (w[2].to_string(), w[3].to_string(), w[4].to_string()),
                )
            })
        })
        .collect()
}

fn produce_lines(topic: &str, partition: i32, lines: usize) {
    let input: String = (0..lines).map(|i| format!("v{i}\n")).collect();
    let mut child = Command::new(kring_bin())
        .args(["produce", "-t", topic, "-p", &partition.to_string()])
        .env("KRING_BOOTSTRAP", common::bootstrap())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning kring produce");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `-c` stops at exactly N and commits exactly what was printed, also inside a
/// batch; `-e` stops at the end; reset-offsets (earliest, an offset, a time) moves a
/// group kring members committed to, after they left.
#[test]
fn count_commits_what_was_printed_and_reset_offsets_moves_the_group() {
    let topic = common::unique("gcli-count");
    let group = common::unique("gcli-count-g");
    ok(&["topics", "create", &topic, "-p", "1"]);
    // One produce run: the 20 records travel in one batch, so -c 7 stops inside it.
    produce_lines(&topic, 0, 20);
    let member = |extra: &[&str]| {
        let mut args = vec![
            "consume",
            "-G",
            &group,
            "-t",
            &topic,
            "-o",
            "beginning",
            "-f",
            "%p %o\\n",
            "--commit-log",
            "-X",
            "session.timeout.ms=6000",
        ];
        args.extend_from_slice(extra);
        let (out, err) = ok(&args);
        (printed(&out), err)
    };
    let (first, log) = member(&["-c", "7"]);
    assert_eq!(first, (0..7).map(|o| (0, o)).collect::<Vec<_>>(), "{log}");
    assert_eq!(commits(&log).last(), Some(&(0, 7)), "{log}");
    assert!(log.contains("consumed 7 record(s)"), "{log}");
    assert_eq!(
        described_rows(&group, &topic),
        BTreeMap::from([(0, ("7".into(), "20".into(), "13".into()))])
    );

    // The next member starts right after the last record printed, and -e ends it at
    // the end.
    let (rest, log) = member(&["-e"]);
    assert_eq!(rest, (7..20).map(|o| (0, o)).collect::<Vec<_>>(), "{log}");
    assert_eq!(
        described_rows(&group, &topic)[&0],
        ("20".into(), "20".into(), "0".into())
    );
    let (none, log) = member(&["-e"]);
    assert!(none.is_empty(), "{none:?} {log}");

    // Reset offsets of the group the members left.
    let reset = |to: &str| {
        ok(&[
            "groups",
            "reset-offsets",
            &group,
            "--topic",
            &topic,
            "--to",
            to,
        ]);
    };
    reset("earliest");
    let (again, _) = member(&["-e"]);
    assert_eq!(again, (0..20).map(|o| (0, o)).collect::<Vec<_>>());
    reset("15");
    let (tail, _) = member(&["-e"]);
    assert_eq!(tail, (15..20).map(|o| (0, o)).collect::<Vec<_>>());

    // @MS: the first record at or after a record's timestamp (read with %T).
    produce_lines(&topic, 0, 5);
    let (stamped, _) = ok(&["consume", "-t", &topic, "-e", "-q", "-f", "%o %T\\n"]);
    let stamps: Vec<(i64, i64)> = stamped
        .lines()
        .map(|l| {
            let (o, t) = l.split_once(' ').unwrap();
            (o.parse().unwrap(), t.parse().unwrap())
        })
        .collect();
    assert_eq!(stamps.len(), 25);
    let at = stamps[22].1;
    let from = stamps.iter().find(|(_, t)| *t >= at).unwrap().0;
    reset(&format!("@{at}"));
    let (since, _) = member(&["-e"]);
    assert_eq!(since, (from..25).map(|o| (0, o)).collect::<Vec<_>>());
    ok(&["groups", "delete", &group]);
    ok(&["topics", "delete", &topic]);
}

/// A `kring consume -G` member running in the background: its printed records and its
/// `--commit-log`, read as they come.
struct Member {
    name: String,
    child: Child,
    log: Arc<Mutex<MemberLog>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
struct MemberLog {
    /// Every complete `%p %o` line, in order (a line cut by a kill is left out: it was
    /// not printed whole, so nothing past it was committed).
    printed: Vec<(i32, i64)>,
    /// Every stderr line.
    stderr: Vec<String>,
    /// Partitions assigned now (from the assigned/revoked/lost lines).
    assigned: BTreeSet<i32>,
    /// The last committed offset the member knew of per partition (found when
    /// assigned, or from a commit line).
    last_commit: BTreeMap<i32, i64>,
    commits: usize,
    /// Stderr ended: the process exited.
    exited: bool,
}

impl Member {
    fn start(name: &str, group: &str, topic: &str, extra: &[&str]) -> Member {
        let mut child = Command::new(kring_bin())
            .args(["consume", "-G", group, "-t", topic, "-o", "beginning"])
            .args(["-f", "%p %o\\n", "--commit-log"])
            .args(extra)
            .env("KRING_BOOTSTRAP", common::bootstrap())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning kring consume -G");
        let log = Arc::new(Mutex::new(MemberLog::default()));
        let out = BufReader::new(child.stdout.take().unwrap());
        let err = BufReader::new(child.stderr.take().unwrap());
        let readers = vec![
            {
                let log = log.clone();
                std::thread::spawn(move || read_lines(out, |l| log.lock().unwrap().print(l)))
            },
            {
                let log = log.clone();
                std::thread::spawn(move || {
                    read_lines(err, |l| log.lock().unwrap().event(l));
                    log.lock().unwrap().exited = true;
                })
            },
        ];
        Member {
            name: name.to_string(),
            child,
            log,
            readers,
        }
    }

    fn log(&self) -> std::sync::MutexGuard<'_, MemberLog> {
        self.log.lock().unwrap()
    }

    /// SIGTERM, then waits for a clean exit.
    fn terminate(mut self) -> MemberLog {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
        let status = wait_exit(&mut self.child, &self.name);
        let log = self.finish();
        assert!(
            status.success(),
            "{} exited with {status} after SIGTERM: {}",
            log_name(&log),
            log.stderr.join("\n")
        );
        log
    }

    /// SIGKILL: no commit, no LeaveGroup.
    fn kill(mut self) -> MemberLog {
        self.child.kill().unwrap();
        let _ = self.child.wait();
        self.finish()
    }

    fn finish(self) -> MemberLog {
        for r in self.readers {
            r.join().unwrap();
        }
        Arc::try_unwrap(self.log)
            .ok()
            .expect("readers done")
            .into_inner()
            .unwrap()
    }
}

fn log_name(log: &MemberLog) -> String {
    format!("member assigned {:?}", log.assigned)
}

fn wait_exit(child: &mut Child, name: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{name} did not exit after SIGTERM (hung)");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Calls `each` with every complete line (ending in a newline).
fn read_lines(mut input: impl BufRead, mut each: impl FnMut(&str)) {
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line.last() == Some(&b'\n') => {
                each(String::from_utf8_lossy(&line[..line.len() - 1]).as_ref())
            }
            Ok(_) => return,
        }
    }
}

impl MemberLog {
    fn print(&mut self, line: &str) {
        self.printed.push(parse_printed(line));
    }

    fn event(&mut self, line: &str) {
        self.stderr.push(line.to_string());
        let w: Vec<&str> = line.split('\t').collect();
        match (w.first().copied(), w.len()) {
            (Some("assigned"), 4) => {
                let p: i32 = w[2].parse().unwrap();
                self.assigned.insert(p);
                if let Ok(c) = w[3].parse::<i64>() {
                    self.last_commit.insert(p, c);
                }
            }
            (Some("revoked" | "lost"), 3) => {
                self.assigned.remove(&w[2].parse().unwrap());
            }
            (Some("commit"), 4) => {
                self.last_commit
                    .insert(w[2].parse().unwrap(), w[3].parse().unwrap());
                self.commits += 1;
            }
            _ => {}
        }
    }
}

/// Waits until `done`, failing at once when one of `members` exits.
fn wait_for(what: &str, members: &[&Member], mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        for m in members {
            let log = m.log();
            assert!(
                !log.exited,
                "{} exited while waiting for {what}: {}",
                m.name,
                log.stderr.join("\n")
            );
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {}",
            show(members)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether the members' current assignments are disjoint, non-empty and cover
/// `partitions`.
fn balanced(members: &[&Member], partitions: i32) -> bool {
    let lists: Vec<BTreeSet<i32>> = members.iter().map(|m| m.log().assigned.clone()).collect();
    let all: BTreeSet<i32> = lists.iter().flatten().copied().collect();
    lists.iter().all(|l| !l.is_empty())
        && lists.iter().map(BTreeSet::len).sum::<usize>() == partitions as usize
        && all == (0..partitions).collect()
}

fn show(members: &[&Member]) -> String {
    members
        .iter()
        .map(|m| {
            let log = m.log();
            format!(
                "{}: assigned {:?}, printed {}, last stderr {:?}",
                m.name,
                log.assigned,
                log.printed.len(),
                log.stderr.iter().rev().take(3).collect::<Vec<_>>()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

const MEMBER_SETTINGS: &[&str] = &[
    "-q",
    "-X",
    "session.timeout.ms=6000",
    "-X",
    "heartbeat.interval.ms=500",
    "-X",
    "max.poll.interval.ms=15000",
    "-X",
    "auto.commit.interval.ms=200",
];

/// Two members share a topic: disjoint assignments covering it, every record printed
/// once; `describe` shows both; SIGTERM commits and leaves.
#[test]
fn two_members_share_a_topic_and_leave_on_sigterm() {
    let admin = common::client(common::config());
    let topic = common::unique("gcli-share");
    let group = common::unique("gcli-share-g");
    common::create_topic(&admin, &topic, 6, 1, &[]);
    let mut extra = MEMBER_SETTINGS.to_vec();
    extra.extend(["-X", "partition.assignment.strategy=roundrobin"]);
    let a = Member::start("a", &group, &topic, &extra);
    let b = Member::start("b", &group, &topic, &extra);
    wait_for("a balanced assignment", &[&a, &b], || {
        balanced(&[&a, &b], 6)
    });
    let (described, _) = ok(&["groups", "describe", &group]);
    // Member rows end with their assignment (`TOPIC:P,P,...`), partition rows with the
    // owner's member id.
    let member_lines: Vec<&str> = described
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .last()
                .is_some_and(|w| w.starts_with(&format!("{topic}:")))
        })
        .collect();
    assert!(
        member_lines.iter().all(|l| l.contains("kring-cli")),
        "{described}"
    );
    assert_eq!(member_lines.len(), 2, "{described}");
    assert!(described.contains("assignor roundrobin"), "{described}");
    let mut shown: Vec<i32> = Vec::new();
    for l in &member_lines {
        let cell = l.split_whitespace().last().unwrap();
        let (t, ps) = cell
            .split_once(':')
            .unwrap_or_else(|| panic!("{described}"));
        assert_eq!(t, topic, "{described}");
        shown.extend(ps.split(',').map(|p| p.parse::<i32>().unwrap()));
    }
    shown.sort_unstable();
    assert_eq!(shown, (0..6).collect::<Vec<_>>(), "{described}");

    let producer = Producer::new_blocking(admin.clone()).unwrap();
    let mut deliveries = Vec::new();
    for i in 0..300 {
        let record = ProducerRecord::new(&topic)
            .with_partition(i % 6)
            .with_value(format!("r{i}"));
        deliveries.push(producer.send_blocking(record).unwrap());
    }
    producer.flush_blocking().unwrap();
    let mut produced = BTreeSet::new();
    for d in deliveries {
        let m = d.wait().unwrap();
        produced.insert((m.partition, m.offset));
    }
    producer.close_blocking().unwrap();
    let union = || -> BTreeSet<(i32, i64)> {
        let mut all: BTreeSet<(i32, i64)> = a.log().printed.iter().copied().collect();
        all.extend(b.log().printed.iter().copied());
        all
    };
    wait_for("every record printed", &[&a, &b], || {
        union().len() >= produced.len()
    });
    let (a, b) = (a.terminate(), b.terminate());
    let mut all = a.printed.clone();
    all.extend(&b.printed);
    let distinct: BTreeSet<(i32, i64)> = all.iter().copied().collect();
    assert_eq!(distinct, produced);
    assert_eq!(all.len(), produced.len(), "a record was printed twice");
    assert!(!a.printed.is_empty() && !b.printed.is_empty());

    // SIGTERM committed what each printed and left: the group is empty, nothing to
    // read.
    let (described, _) = ok(&["groups", "describe", &group]);
    assert!(described.contains("state Empty"), "{described}");
    let rows = described_rows(&group, &topic);
    assert_eq!(rows.len(), 6, "{described}");
    for (committed, end, lag) in rows.values() {
        assert_eq!((committed, lag), (end, &"0".to_string()), "{described}");
    }
    admin.close();
}

/// Produces to every partition of `topic` in turn until `stop`; answers what was
/// delivered.
fn spawn_producer(
    client: kring::Client,
    topic: String,
    partitions: i32,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<BTreeSet<(i32, i64)>> {
    std::thread::spawn(move || {
        let producer = Producer::new_blocking(client).unwrap();
        let mut deliveries = Vec::new();
        let mut i = 0usize;
        // Bounded: at most 50,000 records, whatever happens.
        while !stop.load(Ordering::Acquire) && i < 50_000 {
            for p in 0..partitions {
                let record = ProducerRecord::new(&topic)
                    .with_partition(p)
                    .with_value(format!("{p}/{i}"));
                deliveries.push(producer.send_blocking(record).unwrap());
            }
            i += 1;
            // A steady trickle rather than a burst: records keep flowing through the
            // kill and the rebalances.
            std::thread::sleep(Duration::from_millis(5));
        }
        producer.flush_blocking().unwrap();
        let produced = deliveries
            .into_iter()
            .map(|d| {
                let m = d.wait().unwrap();
                (m.partition, m.offset)
            })
            .collect();
        producer.close_blocking().unwrap();
        produced
    })
}

/// The SIGKILL case, with each assignor and with KIP-848: three members on 12
/// partitions with records flowing, one killed with SIGKILL and a fourth started. Nothing is lost; members that stayed
/// alive never print a record twice; every duplicate is a record the killed member
/// printed after its last commit on that partition, printed again by the partition's
/// next owner, and there are at most as many as it printed since those commits.
#[test]
fn sigkill_mid_stream_with_range() {
    sigkill_mid_stream(&with_assignor("range"));
}

#[test]
fn sigkill_mid_stream_with_roundrobin() {
    sigkill_mid_stream(&with_assignor("roundrobin"));
}

#[test]
fn sigkill_mid_stream_with_sticky() {
    sigkill_mid_stream(&with_assignor("sticky"));
}

#[test]
fn sigkill_mid_stream_with_cooperative_sticky() {
    sigkill_mid_stream(&with_assignor("cooperative-sticky"));
}

/// KIP-848: the session (10 s in scripts/kafka) and the heartbeat interval are the
/// broker's, so the members set neither.
#[test]
fn sigkill_mid_stream_with_kip848() {
    sigkill_mid_stream(&[
        "-q",
        "-X",
        "group.protocol=consumer",
        "-X",
        "max.poll.interval.ms=15000",
        "-X",
        "auto.commit.interval.ms=200",
    ]);
}

/// The classic protocol's member settings with `assignor` alone.
fn with_assignor(assignor: &str) -> Vec<String> {
    let mut settings: Vec<String> = MEMBER_SETTINGS.iter().map(|s| s.to_string()).collect();
    settings.extend([
        "-X".to_string(),
        format!("partition.assignment.strategy={assignor}"),
    ]);
    settings
}

/// Three members (`settings`) on 12 partitions, the victim killed, a fourth started,
/// as the doc above says; loses nothing and duplicates only since the last commit.
fn sigkill_mid_stream<S: AsRef<str>>(settings: &[S]) {
    let settings: Vec<&str> = settings.iter().map(AsRef::as_ref).collect();
    let settings = settings.as_slice();
    let admin = common::client(common::config());
    let topic = common::unique("gcli-kill");
    let group = common::unique("gcli-kill-g");
    common::create_topic(&admin, &topic, 12, 1, &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let producer = spawn_producer(admin.clone(), topic.clone(), 12, stop.clone());

    let victim = Member::start("victim", &group, &topic, settings);
    let b = Member::start("b", &group, &topic, settings);
    let c = Member::start("c", &group, &topic, settings);
    wait_for(
        "three members sharing 12 partitions",
        &[&victim, &b, &c],
        || balanced(&[&victim, &b, &c], 12),
    );
    // Mid-stream: the victim has committed what it printed at least once since the
    // assignment settled, and printed more since.
    let settled = victim.log().commits;
    wait_for("the victim to commit and print more", &[&victim], || {
        let log = victim.log();
        log.commits >= settled + 2 && log.printed.len() > 50
    });
    let victim = victim.kill();
    let d = Member::start("d", &group, &topic, settings);
    wait_for(
        "three survivors sharing 12 partitions",
        &[&b, &c, &d],
        || balanced(&[&b, &c, &d], 12),
    );
    // Records keep flowing to the new assignment for a moment before the producer stops.
    let before = d.log().printed.len();
    wait_for("the new member to print", &[&d], || {
        d.log().printed.len() > before + 12
    });
    stop.store(true, Ordering::Release);
    let produced = producer.join().unwrap();
    let survivors = [&b, &c, &d];
    wait_for("every record printed", &survivors, || {
        let mut all: BTreeSet<(i32, i64)> = victim.printed.iter().copied().collect();
        for m in survivors {
            all.extend(m.log().printed.iter().copied());
        }
        produced.is_subset(&all)
    });
    let survivors: Vec<MemberLog> = [b, c, d].into_iter().map(Member::terminate).collect();

    // Who printed what.
    let mut printers: BTreeMap<(i32, i64), Vec<&str>> = BTreeMap::new();
    for (name, log) in [("victim", &victim)]
        .into_iter()
        .chain(["b", "c", "d"].into_iter().zip(&survivors))
    {
        let mut own = BTreeSet::new();
        for r in &log.printed {
            assert!(own.insert(*r), "{name} printed {r:?} twice");
            printers.entry(*r).or_default().push(name);
        }
    }
    let missing: Vec<_> = produced
        .iter()
        .filter(|r| !printers.contains_key(r))
        .collect();
    assert!(missing.is_empty(), "never printed: {missing:?}");

    // The bound: what the victim printed at or after its last commit per partition.
    let last_commit = |p: i32| victim.last_commit.get(&p).copied().unwrap_or(0);
    let since_commit: BTreeSet<(i32, i64)> = victim
        .printed
        .iter()
        .copied()
        .filter(|&(p, o)| o >= last_commit(p))
        .collect();
    let mut duplicates = 0;
    for (record, who) in &printers {
        if who.len() == 1 {
            continue;
        }
        duplicates += who.len() - 1;
        assert!(
            who.len() == 2 && who.contains(&"victim"),
            "{record:?} printed by {who:?}: only the victim's records may be printed twice"
        );
        assert!(
            since_commit.contains(record),
            "{record:?} printed twice, but the victim committed past it (last commit {})",
            last_commit(record.0)
        );
    }
    println!(
        "SIGKILL: {} records produced; the victim printed {} ({} after its last commits); \
         {duplicates} printed again by the next owners",
        produced.len(),
        victim.printed.len(),
        since_commit.len()
    );
    assert!(duplicates <= since_commit.len());
    admin.close();
}
