//! The admin CLI (`ringbroker topic|produce|consume|group|user|acl`) run as a process against a
//! broker, and its output checked.
//!
//! Every function takes the address the CLI is pointed at: `Broker::addr`, or a named listener
//! such as `broker.listener("PLAINTEXT")` when the broker has several.

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// The CLI with the broker given by the environment variable (`-b` is tested on its own).
pub(crate) fn cli(broker: SocketAddr) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ringbroker"));
    c.env("RINGBROKER_BROKERS", broker.to_string());
    c
}

/// Runs the CLI with `args` and nothing on stdin.
pub(crate) fn run(broker: SocketAddr, args: &[&str]) -> Output {
    cli(broker).args(args).stdin(Stdio::null()).output().expect("run ringbroker")
}

/// Runs the CLI with `args` and `input` on stdin.
pub(crate) fn run_with_input(broker: SocketAddr, args: &[&str], input: &[u8]) -> Output {
    let mut child = cli(broker)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().expect("wait")
}

/// The stdout of a run that must have succeeded; `what` names the run if it did not.
pub(crate) fn stdout_of(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}): stdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8 output")
}

/// The stdout of a run that must have succeeded, parsed as one JSON document.
pub(crate) fn json_of(out: &Output, what: &str) -> Value {
    let text = stdout_of(out, what);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {text}"))
}

/// The stderr of a run that must have exited with `code`.
pub(crate) fn failure(out: &Output, code: i32) -> String {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}
