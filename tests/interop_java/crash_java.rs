//! Crash safety seen by the Apache Kafka Java client: with `--flush always`, every record the
//! broker acknowledged (acks=all) before a SIGKILL is there after a restart, at its acknowledged
//! offset with its key and value, and offsets are not reused afterwards
//! (tests/java/.../CrashProduce.java and CrashVerify.java).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::java;
use support::{restart, Broker};

use crate::machine;

const TOPIC: &str = "java-crash";
/// Acknowledged records to wait for before the kill.
const WANT_ACKED: usize = 3000;

fn count_lines(p: &Path) -> usize {
    match File::open(p) {
        Ok(f) => BufReader::new(f).lines().map_while(Result::ok).filter(|l| !l.trim().is_empty()).count(),
        Err(_) => 0,
    }
}

fn dump(p: &Path, what: &str) {
    if let Ok(s) = std::fs::read_to_string(p) {
        for l in s.lines() {
            println!("[java {what}] {l}");
        }
    }
}

/// Waits up to `limit` for the child to exit; kills it past that. Returns whether it exited by itself.
fn wait_or_kill(child: &mut Child, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Some(st)) = child.try_wait() {
            println!("crash-produce exited by itself: {st}");
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = child.kill();
    let _ = child.wait();
    println!("crash-produce still ran {limit:?} after the kill: killed it");
    false
}

#[test]
fn java_acked_records_survive_kill9() {
    let _machine = machine::shared();
    java::classpath(); // build the harness first
    let data = tempfile::tempdir().expect("temp dir");
    let work = tempfile::tempdir().expect("temp dir");
    let acked = work.path().join("acked.txt");
    let produce_log = work.path().join("crash-produce.log");
    let args = ["--flush", "always"];

    let mut broker = Broker::start_in(data.path(), "127.0.0.1:0", &args);
    let listen = broker.addr.to_string();
    let bootstrap = broker.bootstrap();
    let acked_s = acked.to_str().unwrap().to_string();

    let log = File::create(&produce_log).expect("producer log");
    let mut producer = java::command(&[
        "crash-produce",
        "--bootstrap",
        &bootstrap,
        "--topic",
        TOPIC,
        "--acked-file",
        &acked_s,
        "--max-seconds",
        "180",
    ])
    .stdout(Stdio::from(log.try_clone().unwrap()))
    .stderr(Stdio::from(log))
    .spawn()
    .expect("spawn java crash-produce");

    // Bounded wait for a few thousand acknowledgements.
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed() < Duration::from_secs(60) {
        n = count_lines(&acked);
        if n >= WANT_ACKED {
            break;
        }
        if let Ok(Some(st)) = producer.try_wait() {
            dump(&produce_log, "crash-produce");
            panic!("crash-produce exited early ({st}) with {n} acknowledged records");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    println!("{n} records acknowledged after {:?}; SIGKILL to the broker", start.elapsed());

    broker.kill9();
    // The producer sees the broker gone and gives up by itself (no acks while sends fail).
    wait_or_kill(&mut producer, Duration::from_secs(30));
    dump(&produce_log, "crash-produce");
    let acked_lines = count_lines(&acked);
    println!("acked file: {acked_lines} lines");
    assert!(acked_lines > 0, "the producer recorded no acknowledged record before the kill");
    if n < WANT_ACKED {
        println!("note: only {n} of the wanted {WANT_ACKED} acknowledgements came within 60 s; verifying those");
    }

    let broker2 = restart(data.path(), &listen, &args);
    assert_eq!(broker2.addr.to_string(), listen);
    let out = java::run(&[
        "crash-verify",
        "--bootstrap",
        &broker2.bootstrap(),
        "--topic",
        TOPIC,
        "--acked-file",
        &acked_s,
        "--timeout-sec",
        "60",
    ]);
    assert!(
        out.status.success(),
        "crash-verify after kill -9 and restart failed ({}), {acked_lines} acknowledged records:\n{}",
        out.status,
        java::tail(&out, 40)
    );
    drop(broker);
}
