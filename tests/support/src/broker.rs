//! The real `ringbroker` binary run on 127.0.0.1 with a temporary data directory, and the
//! ports it bound; its `/metrics` page.
//!
//! The binary is the one cargo built beside the test binary: `cargo test` builds a package's
//! binaries before its integration tests, puts the tests in `target/<profile>/deps/` and the
//! binaries one level up (where `CARGO_BIN_EXE_ringbroker` points, a variable only the
//! package's own test crates see).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The `ringbroker` binary of this build (`target/<profile>/ringbroker`).
pub fn exe() -> PathBuf {
    let test = std::env::current_exe().expect("the test binary's path");
    let dir = test.parent().and_then(Path::parent).expect("the test binary lives in target/<profile>/deps");
    let exe = dir.join("ringbroker");
    assert!(
        exe.is_file(),
        "no broker binary at {} (beside {}); run the tests with `cargo test`, which builds it",
        exe.display(),
        test.display()
    );
    exe
}

/// The line the broker prints on stdout once every shard accepts connections.
const READY_PREFIX: &str = "ringbroker listening on ";
/// The line the broker prints, before the ready line, when its admin (metrics) listener is on.
const ADMIN_PREFIX: &str = "ringbroker admin listening on ";
/// The lines the broker prints, before the ready line, one per listener:
/// `ringbroker listener NAME (PROTOCOL) on HOST:PORT`.
const LISTENER_PREFIX: &str = "ringbroker listener ";

pub struct Broker {
    child: Option<Child>,
    pub addr: SocketAddr,
    /// The admin listener (`/metrics`), when the broker runs one. Test brokers get a free
    /// port (RINGBROKER_ADMIN_LISTEN=127.0.0.1:0) so that parallel brokers do not all
    /// claim the default 9644; `--admin-listen` in the args still wins.
    pub admin_addr: Option<SocketAddr>,
    /// Every listener's bound address by name (`PLAINTEXT`, `SASL_SSL`, ...).
    pub listeners: std::collections::HashMap<String, SocketAddr>,
    pub data_dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
}

impl Broker {
    /// A broker on an ephemeral port with a fresh data directory and the default shards.
    pub fn start() -> Broker {
        Broker::start_args(&[])
    }

    /// A broker on an ephemeral port with a fresh data directory and extra flags.
    pub fn start_args(args: &[&str]) -> Broker {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().to_path_buf();
        let mut b = Broker::start_in(&dir, "127.0.0.1:0", args);
        b._tmp = Some(tmp);
        b
    }

    /// A broker on `listen` using `data_dir` (kept by the caller, so a restart sees the data).
    pub fn start_in(data_dir: &Path, listen: &str, args: &[&str]) -> Broker {
        let mut child = Command::new(exe())
            .arg("--listen")
            .arg(listen)
            .arg("--data-dir")
            .arg(data_dir)
            .args(args)
            .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()))
            .env(
                "RINGBROKER_ADMIN_LISTEN",
                std::env::var("RINGBROKER_ADMIN_LISTEN").unwrap_or_else(|_| "127.0.0.1:0".into()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn ringbroker");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            let mut admin = None;
            let mut listeners = std::collections::HashMap::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix(ADMIN_PREFIX) {
                    admin = Some(rest.trim().to_string());
                } else if let Some(rest) = line.strip_prefix(LISTENER_PREFIX) {
                    // NAME (PROTOCOL) on ADDR
                    let name = rest.split_whitespace().next().unwrap_or_default().to_string();
                    if let Some((_, addr)) = rest.rsplit_once(" on ") {
                        listeners.insert(name, addr.trim().parse::<SocketAddr>().expect("listener address"));
                    }
                } else if let Some(rest) = line.strip_prefix(READY_PREFIX) {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send((rest.trim().to_string(), admin.take(), std::mem::take(&mut listeners)));
                    }
                } else {
                    println!("[broker stdout] {line}");
                }
            }
        });
        let (addr, admin_addr, listeners) = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok((a, admin, listeners)) => (
                a.parse().expect("broker printed a socket address"),
                admin.map(|a| a.parse().expect("broker printed an admin socket address")),
                listeners,
            ),
            Err(_) => {
                let _ = child.kill();
                panic!("ringbroker did not report it was listening within 60 s");
            }
        };
        Broker { child: Some(child), addr, admin_addr, listeners, data_dir: data_dir.to_path_buf(), _tmp: None }
    }

    /// The bound address of the listener named `name` (e.g. "SASL_SSL").
    pub fn listener(&self, name: &str) -> SocketAddr {
        *self.listeners.get(name).unwrap_or_else(|| panic!("the broker has no listener {name}: {:?}", self.listeners))
    }

    /// `host:port` for a client's bootstrap.servers.
    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    /// The broker's process id (while it runs).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// SIGKILL: no shutdown path runs, as in a power cut of the process.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for a clean exit; returns the exit status.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
        for _ in 0..300 {
            if let Ok(Some(st)) = c.try_wait() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = c.kill();
        c.wait().ok()
    }

    /// Keeps the data directory alive past this broker (for restarts in the same dir).
    pub fn take_tempdir(&mut self) -> Option<tempfile::TempDir> {
        self._tmp.take()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Restarts on the same data dir and address, retrying for a few seconds: the port of a
/// broker that was just stopped may take a moment to be free again.
pub fn restart(data_dir: &Path, listen: &str, args: &[&str]) -> Broker {
    let mut last = None;
    for attempt in 0..10 {
        match std::panic::catch_unwind(|| Broker::start_in(data_dir, listen, args)) {
            Ok(b) => return b,
            Err(e) => {
                println!("restart attempt {attempt} on {listen} failed; retrying");
                last = Some(e);
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
    std::panic::resume_unwind(last.expect("at least one attempt"))
}

/// The broker's `/metrics` page (Prometheus text), from its admin listener.
pub fn scrape(admin: SocketAddr) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(admin).expect("connect to the admin listener");
    s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n").expect("send the scrape");
    let mut page = String::new();
    s.read_to_string(&mut page).expect("read the scrape (the listener closes after one response)");
    let (head, body) = page.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "scrape answered {head}");
    body.to_string()
}

/// The sum over shards (and any other labels) of the samples of metric `name` on a scraped
/// page, counting only samples whose labels include each of `labels` (e.g. `reason="idle"`).
pub fn metric_sum(page: &str, name: &str, labels: &[&str]) -> f64 {
    page.lines()
        .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' ')))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .map(|l| l.rsplit_once(' ').expect("a sample value").1.parse::<f64>().expect("a number"))
        .sum()
}

/// The bytes of a partition directory's segment files (`*.log`).
pub fn log_bytes(partition_dir: &Path) -> u64 {
    std::fs::read_dir(partition_dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", partition_dir.display()))
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().map_or(0, |m| m.len()))
        .sum()
}
