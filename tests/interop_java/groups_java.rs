//! Consumer groups (classic protocol) seen by the Apache Kafka Java client: several real
//! `KafkaConsumer`s (tests/java/.../GroupConsume.java, one JVM each, `subscribe`) share a
//! 6-partition topic while a Java producer (GroupProduce.java) writes keyed records into it, and
//! members join, leave, die and restart. Every member prints each record it processes and
//! commits the processed offsets synchronously after every poll batch and for the partitions
//! being revoked (onPartitionsRevoked), so the test knows exactly which records were consumed,
//! by whom, and what was committed. It then checks:
//!
//! - join/leave (eager `range`): every acknowledged record is consumed exactly once across the
//!   group (no duplicates at all: a clean rebalance commits before handing partitions over);
//! - a SIGKILLed member: its partitions go to the survivors after its session times out, every
//!   record is consumed, and the only duplicates are records the dead member processed after
//!   its last commit (at-least-once, exactly as much as the commits allow);
//! - `CooperativeStickyAssignor`: a second member joins and the first never has all its
//!   partitions revoked (incremental rebalancing), and every record is consumed exactly once;
//! - static membership (`group.instance.id`): a member restarted within its session timeout gets
//!   its partitions back with no rebalance: the other member's listener sees nothing, whether
//!   the restarted member is a follower or the group leader (as in Kafka 2.4+ with JoinGroup v9's
//!   skipAssignment);
//! - a member whose generation moved on cannot commit (CommitFailedException), the group's
//!   committed offsets are unchanged, and the member rejoins when it polls again
//!   (StaleCommit.java).
//!
//! Waits are bounded; nothing asserts on durations.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::time::{Duration, Instant};

use support::cluster::Cluster;
use support::java;
use support::Broker;

use crate::machine;

const PARTITIONS: i32 = 6;
/// Upper bound for any one wait (members settling, everything consumed, a process exiting).
const WAIT: Duration = Duration::from_secs(60);

// One scenario at a time, and nothing beside it (`machine::alone`): each runs a broker and up
// to five JVMs; two machines' worth of CPU would be needed to run another test beside one
// without turning session timeouts into flakes.

fn broker() -> Broker {
    // No initial rebalance delay (Kafka's default is 3 s): a lone first member starts at once.
    Broker::start_args(&["--flush", "os", "--group-initial-rebalance-delay-ms", "0"])
}

// -------------------------------------------------------------------------------------------
// Processes: the producer and the group members
// -------------------------------------------------------------------------------------------

/// Kills the child (if still running) when dropped, so a failing test leaves no JVM behind.
struct Proc {
    name: String,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    out: PathBuf,
    err: PathBuf,
}

impl Proc {
    fn spawn(name: &str, dir: &Path, args: &[&str], with_stdin: bool) -> Proc {
        let out = dir.join(format!("{name}.out"));
        let err = dir.join(format!("{name}.err"));
        let mut cmd = java::command(args);
        cmd.stdout(Stdio::from(File::create(&out).expect("stdout file")))
            .stderr(Stdio::from(File::create(&err).expect("stderr file")));
        if with_stdin {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn java {name}: {e}"));
        let stdin = child.stdin.take();
        println!("started {name} (pid {})", child.id());
        Proc { name: name.to_string(), child: Some(child), stdin, out, err }
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// Waits (bounded) for the process to exit by itself; kills it past `limit`.
    fn wait(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        let mut c = self.child.take().expect("process already reaped");
        loop {
            if let Some(st) = c.try_wait().expect("try_wait") {
                return st;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let st = c.wait().expect("wait");
                panic!("{} did not exit within {limit:?}; killed it ({st})", self.name);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A clean stop: `stop` on stdin; the member commits, closes (LeaveGroup if dynamic), exits 0.
    fn stop(&mut self) {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.write_all(b"stop\n");
        }
        let st = self.wait(WAIT);
        assert!(st.success(), "{} exited with {st} after `stop`:\n{}", self.name, self.tail(30));
        assert!(self.stdout().lines().any(|l| l == "CLOSED"), "{} never printed CLOSED", self.name);
        println!("{} stopped cleanly", self.name);
    }

    /// SIGKILL: no commit, no LeaveGroup; the broker only learns from the session timeout.
    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.stdin.take();
        println!("{} killed (SIGKILL)", self.name);
    }

    fn tail(&self, n: usize) -> String {
        let mut s = String::new();
        for (what, p) in [("stderr", &self.err), ("stdout", &self.out)] {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            s.push_str(&format!("--- {} {what} (last {n} lines) ---\n", self.name));
            for l in &lines[lines.len().saturating_sub(n)..] {
                s.push_str(l);
                s.push('\n');
            }
        }
        s
    }

    /// Everything but the per-record lines, into the test's captured output.
    fn dump(&self) {
        for (what, p) in [("stderr", &self.err), ("stdout", &self.out)] {
            for l in std::fs::read_to_string(p).unwrap_or_default().lines() {
                if !l.starts_with("R ") {
                    println!("[{} {what}] {l}", self.name);
                }
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            self.dump();
        }
    }
}

struct Producer {
    proc: Proc,
    acked: PathBuf,
}

impl Producer {
    /// Starts the producer and waits until it has created the topic.
    fn start(bootstrap: &str, topic: &str, dir: &Path, records: u32, rate: u32) -> Producer {
        let acked = dir.join("acked.txt");
        let mut proc = Proc::spawn(
            "producer",
            dir,
            &[
                "group-produce",
                "--bootstrap",
                bootstrap,
                "--topic",
                topic,
                "--partitions",
                &PARTITIONS.to_string(),
                "--records",
                &records.to_string(),
                "--rate",
                &rate.to_string(),
                "--acked-file",
                acked.to_str().unwrap(),
            ],
            false,
        );
        wait_for("the producer to create the topic", || {
            if let Some(st) = proc.exited() {
                panic!("the producer exited ({st}) before the topic was ready");
            }
            proc.stdout().contains(" ready (")
        });
        Producer { proc, acked }
    }

    fn acked(&self) -> Vec<(i32, i64, String)> {
        let text = std::fs::read_to_string(&self.acked).unwrap_or_default();
        complete_lines(&text)
            .filter_map(|l| {
                let mut it = l.split(' ');
                Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?, it.next()?.to_string()))
            })
            .collect()
    }

    /// Whether the producer has finished (the scenario may then run on records already there).
    fn done(&mut self) -> bool {
        let done = self.proc.exited().is_some();
        if done {
            println!("note: the producer finished before the scenario reached this point");
        }
        done
    }

    /// Waits for the producer to finish; every record must have been acknowledged.
    fn finish(&mut self) -> Vec<(i32, i64, String)> {
        let st = self.proc.wait(Duration::from_secs(90));
        self.proc.dump();
        assert!(st.success(), "the producer failed ({st}):\n{}", self.proc.tail(20));
        self.acked()
    }
}

/// A group member: a GroupConsume JVM.
struct Member {
    proc: Proc,
}

impl Member {
    fn start(bootstrap: &str, topic: &str, group: &str, name: &str, dir: &Path, extra: &[&str]) -> Member {
        let mut args =
            vec!["group-consume", "--bootstrap", bootstrap, "--topic", topic, "--group", group, "--name", name];
        args.extend_from_slice(extra);
        Member { proc: Proc::spawn(name, dir, &args, true) }
    }

    fn name(&self) -> &str {
        &self.proc.name
    }

    fn events(&self) -> Events {
        Events::parse(&self.proc.stdout())
    }

    fn check_alive(&mut self) {
        if let Some(st) = self.proc.exited() {
            panic!("member {} exited unexpectedly ({st})", self.name());
        }
    }
}

// -------------------------------------------------------------------------------------------
// What a member printed
// -------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    Assigned { gen: i32, added: BTreeSet<i32>, owned: BTreeSet<i32> },
    Revoked { gen: i32, revoked: BTreeSet<i32>, owned: BTreeSet<i32> },
    Lost { gen: i32, lost: BTreeSet<i32>, owned: BTreeSet<i32> },
}

#[derive(Debug, Default)]
struct Events {
    /// (partition, offset, key) in processing order.
    records: Vec<(i32, i64, String)>,
    /// Rebalance listener calls, in order, with the index into `records` at which each happened.
    changes: Vec<(usize, Change)>,
    /// Successful commits: (why, [(partition, next offset)]).
    commits: Vec<(String, Vec<(i32, i64)>)>,
    commit_failures: Vec<String>,
    closed: bool,
}

/// Lines of `text` that are complete (newline-terminated): a file being written may end mid-line.
fn complete_lines(text: &str) -> impl Iterator<Item = &str> {
    let end = text.rfind('\n').map_or(0, |i| i + 1);
    text[..end].lines()
}

fn parse_set(s: &str) -> BTreeSet<i32> {
    if s == "-" {
        return BTreeSet::new();
    }
    s.split(',').map(|p| p.parse().unwrap_or_else(|_| panic!("bad partition list {s:?}"))).collect()
}

/// `key=value` fields of an event line.
fn fields(line: &str) -> HashMap<&str, &str> {
    line.split(' ').filter_map(|f| f.split_once('=')).collect()
}

impl Events {
    fn parse(text: &str) -> Events {
        let mut ev = Events::default();
        for line in complete_lines(text) {
            let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
            match kind {
                "R" => {
                    let mut it = rest.split(' ');
                    let p = it.next().and_then(|s| s.parse().ok());
                    let o = it.next().and_then(|s| s.parse().ok());
                    let k = it.next();
                    match (p, o, k) {
                        (Some(p), Some(o), Some(k)) => ev.records.push((p, o, k.to_string())),
                        _ => panic!("bad record line {line:?}"),
                    }
                }
                "ASSIGNED" | "REVOKED" | "LOST" => {
                    let f = fields(rest);
                    let gen = f.get("gen").and_then(|g| g.parse().ok()).unwrap_or(-1);
                    let owned = parse_set(f["owned"]);
                    let c = match kind {
                        "ASSIGNED" => Change::Assigned { gen, added: parse_set(f["added"]), owned },
                        "REVOKED" => Change::Revoked { gen, revoked: parse_set(f["revoked"]), owned },
                        _ => Change::Lost { gen, lost: parse_set(f["lost"]), owned },
                    };
                    ev.changes.push((ev.records.len(), c));
                }
                "COMMIT" => {
                    let (why, list) = rest.split_once(' ').unwrap_or((rest, ""));
                    let offsets = list
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(|po| {
                            let (p, o) = po.split_once(':').expect("p:o");
                            (p.parse().unwrap(), o.parse().unwrap())
                        })
                        .collect();
                    ev.commits.push((why.to_string(), offsets));
                }
                "COMMIT-FAILED" => ev.commit_failures.push(rest.to_string()),
                "CLOSED" => ev.closed = true,
                _ => {}
            }
        }
        ev
    }

    /// The partitions the member owns after the last listener call, and that call's generation.
    fn owned(&self) -> (BTreeSet<i32>, i32) {
        match self.changes.last() {
            None => (BTreeSet::new(), -1),
            Some((_, Change::Assigned { gen, owned, .. })) => (owned.clone(), *gen),
            Some((_, Change::Revoked { gen, revoked, owned })) => (owned - revoked, *gen),
            Some((_, Change::Lost { gen, lost, owned })) => (owned - lost, *gen),
        }
    }

    /// The offset the member last committed successfully per partition (next offset to read).
    fn last_commits(&self) -> BTreeMap<i32, i64> {
        let mut m = BTreeMap::new();
        for (_, offsets) in &self.commits {
            for &(p, o) in offsets {
                m.insert(p, o);
            }
        }
        m
    }
}

// -------------------------------------------------------------------------------------------
// Waiting and checking
// -------------------------------------------------------------------------------------------

/// Polls `cond` every 100 ms for up to [`WAIT`]; panics naming `what` if it never holds.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out after {WAIT:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the live members own disjoint, non-empty sets of partitions that together are all
/// of them, all from the same generation. Returns (generation, owned per member).
fn wait_settled(members: &mut [&mut Member], what: &str) -> (i32, Vec<BTreeSet<i32>>) {
    let deadline = Instant::now() + WAIT;
    loop {
        for m in members.iter_mut() {
            m.check_alive();
        }
        let owned: Vec<(BTreeSet<i32>, i32)> = members.iter().map(|m| m.events().owned()).collect();
        let all: BTreeSet<i32> = owned.iter().flat_map(|(s, _)| s.iter().copied()).collect();
        let total: usize = owned.iter().map(|(s, _)| s.len()).sum();
        let gen = owned[0].1;
        if all == (0..PARTITIONS).collect()
            && total == PARTITIONS as usize
            && owned.iter().all(|(s, g)| !s.is_empty() && *g == gen)
        {
            let names: Vec<&str> = members.iter().map(|m| m.name()).collect();
            println!(
                "settled ({what}): generation {gen}, {names:?} own {:?}",
                owned.iter().map(|o| &o.0).collect::<Vec<_>>()
            );
            return (gen, owned.into_iter().map(|(s, _)| s).collect());
        }
        if Instant::now() > deadline {
            let names: Vec<&str> = members.iter().map(|m| m.name()).collect();
            panic!("{what}: the group did not settle within {WAIT:?}; members {names:?} own {owned:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the members (live ones, and what gone ones printed) together processed every
/// acknowledged record.
fn wait_all_consumed(acked: &[(i32, i64, String)], members: &mut [&mut Member], gone: &[&Events]) {
    let want: BTreeSet<(i32, i64)> = acked.iter().map(|(p, o, _)| (*p, *o)).collect();
    let before: BTreeSet<(i32, i64)> = gone.iter().flat_map(|e| e.records.iter().map(|(p, o, _)| (*p, *o))).collect();
    let mut missing = want.len();
    let deadline = Instant::now() + WAIT;
    while missing > 0 {
        for m in members.iter_mut() {
            m.check_alive();
        }
        let mut got = before.clone();
        got.extend(members.iter().flat_map(|m| m.events().records.into_iter().map(|(p, o, _)| (p, o))));
        missing = want.difference(&got).count();
        if missing > 0 && Instant::now() > deadline {
            let first: Vec<_> = want.difference(&got).take(10).collect();
            panic!(
                "{missing} of {} acknowledged records were not consumed within {WAIT:?}; first: {first:?}",
                want.len()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Checks every acknowledged record was consumed (with the key it was produced with), nothing
/// else was, and returns the duplicates: (partition, offset) → who consumed it (member indexes).
fn check_consumed(
    acked: &[(i32, i64, String)],
    members: &[&Events],
    names: &[&str],
) -> BTreeMap<(i32, i64), Vec<usize>> {
    let mut want: HashMap<(i32, i64), &str> = HashMap::new();
    let mut keys: HashMap<&str, (i32, i64)> = HashMap::new();
    for (p, o, k) in acked {
        assert!(want.insert((*p, *o), k).is_none(), "the producer was acknowledged twice at p{p} o{o}");
        if let Some(prev) = keys.insert(k, (*p, *o)) {
            panic!("the producer wrote key {k} twice (at {prev:?} and p{p} o{o}): a retried send?");
        }
    }
    let mut who: BTreeMap<(i32, i64), Vec<usize>> = BTreeMap::new();
    let mut problems = Vec::new();
    for (i, ev) in members.iter().enumerate() {
        for (p, o, k) in &ev.records {
            match want.get(&(*p, *o)) {
                Some(w) if w == k => {}
                Some(w) => problems.push(format!("{} read key {k} at p{p} o{o}, where {w} was acknowledged", names[i])),
                None => problems.push(format!("{} read p{p} o{o} (key {k}), which was never acknowledged", names[i])),
            }
            who.entry((*p, *o)).or_default().push(i);
        }
    }
    let mut missing: Vec<_> = want.keys().filter(|po| !who.contains_key(po)).copied().collect();
    missing.sort();
    if !missing.is_empty() {
        problems.push(format!(
            "{} acknowledged records never consumed, first {:?}",
            missing.len(),
            &missing[..missing.len().min(10)]
        ));
    }
    assert!(problems.is_empty(), "consumption does not match what was produced:\n  {}", problems.join("\n  "));
    who.retain(|_, w| w.len() > 1);
    who
}

fn describe_dups(dups: &BTreeMap<(i32, i64), Vec<usize>>, names: &[&str]) -> String {
    let mut by_partition: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for (p, o) in dups.keys() {
        by_partition.entry(*p).or_default().push(*o);
    }
    let first: Vec<String> = dups
        .iter()
        .take(10)
        .map(|((p, o), w)| format!("p{p} o{o} by {:?}", w.iter().map(|i| names[*i]).collect::<Vec<_>>()))
        .collect();
    let ranges: Vec<String> = by_partition
        .iter()
        .map(|(p, os)| format!("p{p}: {} records, {}..={}", os.len(), os[0], os[os.len() - 1]))
        .collect();
    format!("{} duplicates ({}); first: {}", dups.len(), ranges.join("; "), first.join(", "))
}

/// Each partition's largest committed offset (across members) must be its end: everything consumed
/// was committed.
fn check_final_commits(acked: &[(i32, i64, String)], members: &[&Events]) {
    let mut end: BTreeMap<i32, i64> = BTreeMap::new();
    for (p, o, _) in acked {
        let e = end.entry(*p).or_default();
        *e = (*e).max(o + 1);
    }
    let mut committed: BTreeMap<i32, i64> = BTreeMap::new();
    for ev in members {
        for (p, o) in ev.last_commits() {
            let c = committed.entry(p).or_default();
            *c = (*c).max(o);
        }
    }
    assert_eq!(committed, end, "largest committed offset per partition vs. log end per partition");
}

fn topic_and_group(name: &str) -> (String, String) {
    (format!("groups-java-{name}"), format!("g-java-{name}"))
}

// -------------------------------------------------------------------------------------------
// The tests
// -------------------------------------------------------------------------------------------

/// Members join (1, then 2 more), one leaves cleanly, another joins, all while records arrive:
/// every record is consumed exactly once across the group.
#[test]
fn members_join_and_leave_every_record_consumed_once() {
    java::classpath();
    let _alone = machine::alone();
    let broker = broker();
    let bootstrap = broker.bootstrap();
    let dir = tempfile::tempdir().unwrap();
    let (topic, group) = topic_and_group("join-leave");
    let member = |name: &str| Member::start(&bootstrap, &topic, &group, name, dir.path(), &[]);

    let mut producer = Producer::start(&bootstrap, &topic, dir.path(), 30_000, 1_500);
    let mut a = member("a");
    wait_settled(&mut [&mut a], "a alone");
    let mut b = member("b");
    let mut c = member("c");
    wait_settled(&mut [&mut a, &mut b, &mut c], "a, b, c");
    println!("{} records acknowledged so far; b leaves", producer.acked().len());
    b.proc.stop();
    wait_settled(&mut [&mut a, &mut c], "a, c after b left");
    let mut d = member("d");
    wait_settled(&mut [&mut a, &mut c, &mut d], "a, c, d");
    let acked_when_settled = producer.acked().len();
    let acked = producer.finish();
    println!("{acked_when_settled} records acknowledged when d had joined; {} in all", acked.len());
    wait_all_consumed(&acked, &mut [&mut a, &mut b, &mut c, &mut d], &[]);
    for m in [&mut a, &mut c, &mut d] {
        m.proc.stop();
    }

    let evs: Vec<Events> = [&a, &b, &c, &d].iter().map(|m| m.events()).collect();
    let names = ["a", "b", "c", "d"];
    let refs: Vec<&Events> = evs.iter().collect();
    for (ev, n) in evs.iter().zip(names) {
        println!(
            "{n}: {} records, {} commits, commit failures: {:?}",
            ev.records.len(),
            ev.commits.len(),
            ev.commit_failures
        );
    }
    let dups = check_consumed(&acked, &refs, &names);
    assert!(
        dups.is_empty(),
        "with a synchronous commit after every batch and in onPartitionsRevoked, clean rebalances \
         must not redeliver anything: {}",
        describe_dups(&dups, &names)
    );
    check_final_commits(&acked, &refs);
    drop(broker);
}

/// A member is SIGKILLed: after its session times out its partitions move to the survivors,
/// and every record is still consumed; the only records consumed twice are those the dead
/// member processed after its last successful commit.
#[test]
fn killed_member_partitions_move_to_survivors() {
    java::classpath();
    let _alone = machine::alone();
    let broker = broker();
    let bootstrap = broker.bootstrap();
    let dir = tempfile::tempdir().unwrap();
    let (topic, group) = topic_and_group("kill");
    let session = ["--session-timeout-ms", "6000", "--heartbeat-ms", "1000"];
    let member = |name: &str| Member::start(&bootstrap, &topic, &group, name, dir.path(), &session);

    let mut producer = Producer::start(&bootstrap, &topic, dir.path(), 30_000, 2_000);
    let mut a = member("a");
    let mut b = member("b");
    let mut c = member("c");
    let (gen_before, owned) = wait_settled(&mut [&mut a, &mut b, &mut c], "a, b, c");
    // Let c process (and commit) some records of its own before it dies.
    wait_for("c to consume some records", || c.events().records.len() >= 200 || producer.done());
    c.proc.kill9();
    let c_ev = c.events();
    let c_owned = c_ev.owned().0;
    assert_eq!(c_owned, owned[2], "c's partitions at the kill");
    let (gen_after, owned_after) = wait_settled(&mut [&mut a, &mut b], "a, b after c was killed");
    assert!(gen_after > gen_before, "the survivors' generation must move on ({gen_before} -> {gen_after})");
    let taken: BTreeSet<i32> = owned_after.iter().flatten().copied().collect();
    assert!(c_owned.is_subset(&taken), "c's partitions {c_owned:?} must go to the survivors ({owned_after:?})");
    let acked = producer.finish();
    wait_all_consumed(&acked, &mut [&mut a, &mut b], &[&c_ev]);
    a.proc.stop();
    b.proc.stop();

    let names = ["a", "b", "c"];
    let evs = [a.events(), b.events(), c_ev];
    let refs: Vec<&Events> = evs.iter().collect();
    let dups = check_consumed(&acked, &refs, &names);
    let c_commits = evs[2].last_commits();
    println!("c's last commits: {c_commits:?}; {}", describe_dups(&dups, &names));
    // Allowed: records c processed but had not (visibly) committed when it died, read again by
    // the survivor that took the partition over from the committed offset.
    let bad: Vec<_> = dups
        .iter()
        .filter(|((p, o), w)| {
            let uncommitted_by_c = *o >= c_commits.get(p).copied().unwrap_or(0);
            !(w.len() == 2 && w.contains(&2) && c_owned.contains(p) && uncommitted_by_c)
        })
        .collect();
    assert!(
        bad.is_empty(),
        "duplicates other than c's uncommitted tail: {:?} (all: {})",
        &bad[..bad.len().min(10)],
        describe_dups(&dups, &names)
    );
    // The survivors resumed c's partitions at c's commits (or later, if c's last commit reached
    // the broker before c could print it), never before: c's tail is all that is read twice.
    for p in &c_owned {
        let c_last = c_commits.get(p).copied().unwrap_or(0);
        let c_read_to = evs[2].records.iter().filter(|r| r.0 == *p).map(|r| r.1 + 1).max().unwrap_or(0);
        let dup_count = dups.keys().filter(|(dp, _)| dp == p).count() as i64;
        assert!(
            dup_count <= c_read_to - c_last,
            "partition {p}: {dup_count} records read twice, but c only had {} uncommitted ({c_last}..{c_read_to})",
            c_read_to - c_last
        );
    }
    check_final_commits(&acked, &refs[..2]);
    drop(broker);
}

/// CooperativeStickyAssignor: a second member joins; the first gives up only the partitions
/// that move (it never has all of them revoked), and every record is consumed exactly once.
#[test]
fn cooperative_sticky_rebalances_incrementally() {
    java::classpath();
    let _alone = machine::alone();
    let broker = broker();
    let bootstrap = broker.bootstrap();
    let dir = tempfile::tempdir().unwrap();
    let (topic, group) = topic_and_group("cooperative");
    let opts = ["--assignor", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"];
    let member = |name: &str| Member::start(&bootstrap, &topic, &group, name, dir.path(), &opts);

    let mut producer = Producer::start(&bootstrap, &topic, dir.path(), 20_000, 2_000);
    let mut a = member("a");
    wait_settled(&mut [&mut a], "a alone");
    wait_for("a to consume some records", || a.events().records.len() >= 200 || producer.done());
    let mut b = member("b");
    let (_, owned) = wait_settled(&mut [&mut a, &mut b], "a, b");
    let acked = producer.finish();
    wait_all_consumed(&acked, &mut [&mut a, &mut b], &[]);
    // a's listener calls up to now (its own close revokes everything, as it should).
    let a_before_close = a.events();
    a.proc.stop();
    b.proc.stop();

    println!("a's rebalance listener calls before close: {:#?}", a_before_close.changes);
    let mut a_owned: BTreeSet<i32> = BTreeSet::new();
    let mut revocations = 0;
    for (at, ch) in &a_before_close.changes {
        match ch {
            Change::Assigned { added, owned, .. } => {
                assert!(a_owned.is_disjoint(added), "a was assigned {added:?} it already owned ({a_owned:?})");
                a_owned = owned.clone();
            }
            Change::Revoked { revoked, owned, .. } => {
                revocations += 1;
                assert!(
                    !revoked.is_empty() && revoked != owned,
                    "a had all its partitions revoked ({revoked:?} of {owned:?}) after {at} records: \
                     an eager rebalance, not an incremental one"
                );
                a_owned = owned - revoked;
            }
            Change::Lost { lost, .. } => panic!("a lost partitions {lost:?}"),
        }
    }
    assert!(revocations >= 1, "a never gave up a partition to b");
    assert_eq!(a_owned, owned[0], "a's partitions as its listener saw them");
    assert_eq!((owned[0].len(), owned[1].len()), (3, 3), "cooperative-sticky splits 6 partitions 3/3");

    let names = ["a", "b"];
    let evs = [a.events(), b.events()];
    let refs: Vec<&Events> = evs.iter().collect();
    let dups = check_consumed(&acked, &refs, &names);
    assert!(
        dups.is_empty(),
        "an incremental rebalance with commits on revocation redelivered: {}",
        describe_dups(&dups, &names)
    );
    check_final_commits(&acked, &refs);
    drop(broker);
}

/// Static membership: a member restarted with the same group.instance.id within its session
/// timeout gets its partitions back, in the same generation, and the other member's rebalance
/// listener is not called at all. Here the restarted member is a follower.
#[test]
fn static_member_restart_moves_no_partition() {
    static_restart(false);
}

/// The same when the restarted static member is the group leader: Kafka (2.4+, JoinGroup v9's
/// skipAssignment, KIP-814) answers the returning leader without a rebalance too.
#[test]
fn static_leader_restart_moves_no_partition() {
    static_restart(true);
}

fn static_restart(restart_leader: bool) {
    java::classpath();
    let _alone = machine::alone();
    let broker = broker();
    let bootstrap = broker.bootstrap();
    let dir = tempfile::tempdir().unwrap();
    let (topic, group) = topic_and_group(if restart_leader { "static-leader" } else { "static" });
    let member = |name: &str, instance: &str| {
        let opts = ["--instance-id", instance, "--session-timeout-ms", "30000", "--heartbeat-ms", "1000"];
        Member::start(&bootstrap, &topic, &group, name, dir.path(), &opts)
    };

    let mut producer = Producer::start(&bootstrap, &topic, dir.path(), 20_000, 1_000);
    // `lead` joins first and so is the group leader.
    let mut lead = member("lead", "static-lead");
    wait_settled(&mut [&mut lead], "lead alone");
    let mut follow = member("follow", "static-follow");
    let (gen, owned) = wait_settled(&mut [&mut lead, &mut follow], "lead, follow");
    let (mut stays, mut goes, instance) =
        if restart_leader { (follow, lead, "static-lead") } else { (lead, follow, "static-follow") };
    let goes_name = goes.name().to_string();
    wait_for("the member that restarts to consume some records", || {
        goes.events().records.len() >= 100 || producer.done()
    });
    let calls = stays.events().changes.len();

    // A static member's close() does not leave the group: the broker keeps its place for the
    // session timeout (30 s), and the new process takes it over.
    goes.proc.stop();
    let back_name = format!("{goes_name}2");
    let mut back = member(&back_name, instance);
    let (gen2, owned2) = if restart_leader {
        let (g, o) = wait_settled(&mut [&mut back, &mut stays], "after the leader restarted");
        (g, o)
    } else {
        wait_settled(&mut [&mut stays, &mut back], "after the follower restarted")
    };
    let stays_changes = stays.events().changes;
    assert_eq!(
        &stays_changes[calls..],
        &[],
        "the other member's rebalance listener was called while {goes_name} restarted with its \
         group.instance.id (generation {gen} before)"
    );
    assert_eq!(gen2, gen, "{goes_name}'s restart must not start a new generation");
    assert_eq!(owned2, owned, "partitions per member (leader first) after {goes_name}'s restart");
    let acked = producer.finish();
    wait_all_consumed(&acked, &mut [&mut stays, &mut back], &[&goes.events()]);
    let stays_changes = stays.events().changes;
    assert_eq!(&stays_changes[calls..], &[], "the other member's rebalance listener was called later on");
    stays.proc.stop();
    back.proc.stop();

    let names = [stays.name(), goes.name(), back.name()];
    let evs = [stays.events(), goes.events(), back.events()];
    let refs: Vec<&Events> = evs.iter().collect();
    let dups = check_consumed(&acked, &refs, &names);
    assert!(dups.is_empty(), "{goes_name}'s restart redelivered records: {}", describe_dups(&dups, &names));
    check_final_commits(&acked, &refs);
    drop(broker);
}

/// A member whose generation moved on (it stopped polling; the group rebalanced without it)
/// cannot commit, the group's committed offsets stay as they were, and it rejoins on its next
/// poll (tests/java/.../StaleCommit.java).
#[test]
fn commit_from_a_stale_generation_fails_and_the_member_rejoins() {
    java::classpath();
    let _alone = machine::alone();
    let broker = broker();
    let bootstrap = broker.bootstrap();
    let out = java::run(&[
        "group-stale-commit",
        "--bootstrap",
        &bootstrap,
        "--topic",
        "groups-java-stale",
        "--group",
        "g-java-stale",
    ]);
    assert!(out.status.success(), "group-stale-commit failed ({}):\n{}", out.status, java::tail(&out, 40));
    drop(broker);
}

/// Only the classic group protocol is served: a Java consumer configured for KIP-848's
/// (`group.protocol=consumer`) finds no ConsumerGroupHeartbeat in the broker's ApiVersions and
/// fails with UnsupportedVersionException, telling the user to set group.protocol=classic.
#[test]
fn a_consumer_asking_for_the_kip_848_protocol_is_refused_with_unsupported_version() {
    java::classpath();
    let _alone = machine::alone();
    let broker = broker();
    let bootstrap = broker.bootstrap();
    let mut child = java::command(&[
        "group-consume",
        "--bootstrap",
        &bootstrap,
        "--topic",
        "groups-java-848",
        "--group",
        "g-java-848",
        "--name",
        "m848",
        "--group-protocol",
        "consumer",
        "--max-seconds",
        "60",
    ])
    // An open stdin keeps the member running (end of input would stop it at once).
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("run the Java harness");
    let stdin = child.stdin.take();
    let deadline = Instant::now() + WAIT;
    while child.try_wait().expect("wait for the consumer").is_none() {
        assert!(Instant::now() < deadline, "the consumer with group.protocol=consumer is still running");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(stdin);
    let out = child.wait_with_output().expect("the consumer's output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the consumer ran with group.protocol=consumer:\n{}", java::tail(&out, 40));
    assert!(stderr.contains("UnsupportedVersionException"), "{}", java::tail(&out, 40));
    assert!(stderr.contains("group.protocol=classic"), "Kafka's client says what to do: {}", java::tail(&out, 40));
    drop(broker);
}

/// Cluster test 5: three members of a group while the broker coordinating it is killed with
/// SIGKILL (and restarted later): the members carry on at the new leader of the group's
/// `__consumer_offsets` partition, which replayed the group's stored membership, without a
/// rebalance; every acknowledged record is consumed at least once, and no member's committed
/// offsets ever go back.
#[test]
fn a_group_survives_its_coordinators_broker_being_killed() {
    java::classpath();
    let _alone = machine::alone();
    let mut cluster = Cluster::start(3, &["--flush", "os", "--group-initial-rebalance-delay-ms", "0"]);
    let bootstrap = cluster.bootstrap();
    let dir = tempfile::tempdir().unwrap();
    let (topic, group) = topic_and_group("coordinator-failover");
    cluster.create_topic(&topic, PARTITIONS, 3);
    let session = ["--session-timeout-ms", "6000", "--heartbeat-ms", "1000"];
    let member = |name: &str| Member::start(&bootstrap, &topic, &group, name, dir.path(), &session);
    let mut producer = Producer::start(&bootstrap, &topic, dir.path(), 30_000, 2_000);
    let mut a = member("a");
    let mut b = member("b");
    let mut c = member("c");
    let (gen_before, _) = wait_settled(&mut [&mut a, &mut b, &mut c], "a, b, c");
    wait_for("the group to consume some records", || a.events().records.len() >= 200 || producer.done());
    let coordinator = cluster.coordinator(&group).expect("the group has a coordinator");
    let changes_before: Vec<usize> = [&a, &b, &c].iter().map(|m| m.events().changes.len()).collect();
    println!("SIGKILL of node {coordinator}, the group's coordinator");
    let killed = Instant::now();
    cluster.kill9(coordinator);
    wait_for("another broker to coordinate the group", || {
        cluster.coordinator(&group).is_some_and(|n| n != coordinator)
    });
    // The members find the new coordinator, which replayed the group as it was stored in the
    // replicated `__consumer_offsets` (members, generation, assignments): they carry on there,
    // committing, without a rebalance.
    let commits_moved: Vec<usize> = [&a, &b, &c].iter().map(|m| m.events().commits.len()).collect();
    wait_for("every member to commit at the new coordinator", || {
        [&a, &b, &c].iter().zip(&commits_moved).all(|(m, before)| m.events().commits.len() > *before)
    });
    let (gen_after, _) = wait_settled(&mut [&mut a, &mut b, &mut c], "a, b, c at the new coordinator");
    println!("carrying on at generation {gen_after} (was {gen_before}) {:?} after the kill", killed.elapsed());
    assert!(killed.elapsed() < Duration::from_secs(45), "the group came back within a few session timeouts");
    for (m, before) in [&a, &b, &c].iter().zip(&changes_before) {
        let ev = m.events();
        assert!(ev.changes.len() == *before, "{} saw a rebalance: {:?}", m.name(), &ev.changes[*before..]);
    }
    assert_eq!(gen_after, gen_before, "the new coordinator knew the group's generation");
    cluster.restart(coordinator);
    let acked = producer.finish();
    wait_all_consumed(&acked, &mut [&mut a, &mut b, &mut c], &[]);
    for m in [&mut a, &mut b, &mut c] {
        m.proc.stop();
    }
    let names = ["a", "b", "c"];
    let evs = [a.events(), b.events(), c.events()];
    let refs: Vec<&Events> = evs.iter().collect();
    let dups = check_consumed(&acked, &refs, &names);
    println!("at least once: {}", describe_dups(&dups, &names));
    for (ev, name) in evs.iter().zip(names) {
        let mut last: BTreeMap<i32, i64> = BTreeMap::new();
        for (why, offsets) in &ev.commits {
            for &(p, o) in offsets {
                let before = last.insert(p, o).unwrap_or(0);
                assert!(o >= before, "{name} committed p{p} o{o} ({why}) after o{before}: a commit went back");
            }
        }
    }
    check_final_commits(&acked, &refs);
}
