//! `ringbroker dev-cluster`: a cluster of brokers on this machine, for trying the cluster
//! out and for tests. Broker `i` (node id `i`, from 1) gets the client port `port + i - 1`,
//! the cluster port `cluster_port + i - 1`, the metrics port `admin_port + i - 1`, one shard
//! and its own data directory; every broker is a voter of the metadata quorum. Their output
//! is passed through with a `[broker i]` prefix; the bootstrap string is printed once all
//! are listening, and SIGINT (Ctrl-C) or SIGTERM stops them all cleanly.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use anyhow::{bail, Context};
use nix::sys::signal::{kill, SigSet, Signal};
use nix::unistd::Pid;

#[derive(Debug, clap::Args)]
pub struct DevClusterArgs {
    /// Brokers to start
    #[arg(long, default_value_t = 3)]
    brokers: u16,
    /// Client port of broker 1; the others follow
    #[arg(long, default_value_t = 9092)]
    port: u16,
    /// Broker-to-broker port of broker 1; the others follow
    #[arg(long, default_value_t = 19092)]
    cluster_port: u16,
    /// Metrics port of broker 1; the others follow
    #[arg(long, default_value_t = 9644)]
    admin_port: u16,
    /// Directory holding each broker's data directory (broker-1, broker-2, ...)
    #[arg(long, default_value = "./ringbroker-dev-cluster")]
    data_dir: PathBuf,
    /// Settings passed to every broker, after `--` (e.g. -- --default-replication-factor 3)
    #[arg(last = true)]
    broker_args: Vec<String>,
}

pub fn run(a: DevClusterArgs) -> anyhow::Result<()> {
    if a.brokers == 0 || a.brokers > 100 {
        bail!("--brokers must be between 1 and 100");
    }
    let n = a.brokers;
    let port = |base: u16, i: u16| base.checked_add(i - 1).context("a port past 65535: choose lower base ports");
    let mut voters = Vec::new();
    for i in 1..=n {
        voters.push(format!("{i}@127.0.0.1:{}", port(a.cluster_port, i)?));
    }
    let voters = voters.join(",");
    let cpus = crate::sys::allowed_cpus().context("reading the CPUs this process may use")?;
    // Stop signals are taken here with sigwait; the brokers inherit the mask and wait for
    // theirs the same way.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals.thread_block().context("blocking SIGINT and SIGTERM")?;
    let exe = std::env::current_exe().context("finding this program to start the brokers")?;
    let (events, event_rx) = mpsc::channel::<Event>();
    let on_signal = events.clone();
    std::thread::spawn(move || {
        if let Ok(sig) = signals.wait() {
            let _ = on_signal.send(Event::Signal(sig));
        }
    });
    let mut children: Vec<(u16, Child)> = Vec::new();
    let mut bootstrap = Vec::new();
    for i in 1..=n {
        let dir = a.data_dir.join(format!("broker-{i}"));
        let client = format!("127.0.0.1:{}", port(a.port, i)?);
        let cpu = cpus.get(usize::from(i - 1) % cpus.len().max(1)).copied().unwrap_or(0);
        let mut cmd = Command::new(&exe);
        cmd.args(["--node-id", &i.to_string()])
            .args(["--listen", &client])
            .args(["--cluster-listen", &format!("127.0.0.1:{}", port(a.cluster_port, i)?)])
            .args(["--controller-quorum-voters", &voters])
            .args(["--admin-listen", &format!("127.0.0.1:{}", port(a.admin_port, i)?)])
            .args(["--cpus", &cpu.to_string(), "--pin", "false"])
            .arg("--data-dir")
            .arg(&dir)
            .args(&a.broker_args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: Ctrl-C reaches this command alone, which stops every
            // broker with one SIGTERM (a second signal would make a broker exit at once).
            .process_group(0);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                stop_all(&mut children);
                return Err(e).context(format!("starting broker {i}"));
            }
        };
        let (out, err) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
        let ready = events.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line.starts_with("ringbroker listening on ") {
                    let _ = ready.send(Event::Ready);
                }
                println!("[broker {i}] {line}");
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                eprintln!("[broker {i}] {line}");
            }
        });
        children.push((i, child));
        bootstrap.push(client);
    }
    drop(events);
    let mut listening = 0;
    while listening < n {
        match event_rx.recv_timeout(std::time::Duration::from_millis(200)) {
            Ok(Event::Ready) => listening += 1,
            Ok(Event::Signal(sig)) => {
                eprintln!("received {sig:?} before the cluster was up: stopping the brokers");
                stop_all(&mut children);
                return Ok(());
            }
            Err(_) => {
                if let Some(i) = exited(&mut children) {
                    stop_all(&mut children);
                    bail!("broker {i} exited before it was ready (its output is above)");
                }
            }
        }
    }
    println!("ringbroker dev-cluster of {n} brokers, bootstrap {}", bootstrap.join(","));
    let _ = std::io::stdout().flush();
    loop {
        match event_rx.recv_timeout(std::time::Duration::from_millis(500)) {
            Ok(Event::Signal(sig)) => {
                eprintln!("received {sig:?}: stopping the brokers");
                break;
            }
            Ok(Event::Ready) => {}
            Err(_) => {
                if let Some(i) = exited(&mut children) {
                    eprintln!("broker {i} exited: stopping the others");
                    break;
                }
            }
        }
    }
    stop_all(&mut children);
    Ok(())
}

enum Event {
    /// A broker printed its ready line.
    Ready,
    Signal(Signal),
}

/// The first broker that has exited, if any.
fn exited(children: &mut [(u16, Child)]) -> Option<u16> {
    children.iter_mut().find_map(|(i, c)| matches!(c.try_wait(), Ok(Some(_))).then_some(*i))
}

/// SIGTERM to every broker (a clean stop), then waits for them.
fn stop_all(children: &mut Vec<(u16, Child)>) {
    for (_, c) in children.iter() {
        let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGTERM);
    }
    for (i, mut c) in children.drain(..) {
        match c.wait() {
            Ok(status) if !status.success() => eprintln!("broker {i} ended with {status}"),
            Err(e) => eprintln!("broker {i}: {e}"),
            Ok(_) => {}
        }
    }
}
