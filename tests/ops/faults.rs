//! A full data disk, for real: the broker's data directory is a small tmpfs (mounted by the
//! test, which needs root, as CI runs), filled by producing until appends are refused. The
//! test counts what was acknowledged and reads it back at every step:
//!
//! - appends past the space get KAFKA_STORAGE_ERROR, and every acknowledged record is served;
//! - after kill -9 the broker starts again on the full disk (recovery must not die of SIGBUS
//!   touching its mapped index files) and serves the same records;
//! - once space is freed (the tmpfs grows), appends resume where the log ended, and in the
//!   end every acknowledged record is read back exactly once, in order, with its value.
//!
//! (Injected faults — EIO on a sync or a read, a write torn at every byte — are unit tests
//! in `log::partition`, through the storage seam.)

use std::path::{Path, PathBuf};
use std::process::Command;

use ringbroker::protocol::ErrorCode;
use support::client;
use support::client::{batch, Client};

/// A tmpfs mounted for the test's lifetime.
struct Tmpfs {
    dir: PathBuf,
    _parent: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(megabytes: u32) -> Tmpfs {
        let parent = tempfile::tempdir().expect("temp dir");
        let dir = parent.path().join("data");
        std::fs::create_dir(&dir).unwrap();
        let size = format!("size={megabytes}m");
        let out =
            Command::new("mount").args(["-t", "tmpfs", "-o", &size, "tmpfs"]).arg(&dir).output().expect("run mount");
        assert!(
            out.status.success(),
            "this test mounts a small tmpfs as a full data disk and needs root (CI runs as root): mount said {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs { dir, _parent: parent }
    }

    fn grow(&self, megabytes: u32) {
        let opts = format!("remount,size={megabytes}m");
        let st = Command::new("mount").args(["-o", &opts]).arg(&self.dir).status().expect("run mount");
        assert!(st.success(), "remounting the tmpfs bigger failed");
    }

    fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

fn value(i: usize) -> Vec<u8> {
    format!("record-{i:06}-{}", "x".repeat(2000)).into_bytes()
}

/// Produces batches of 4 records (acks=all) until one is refused; the acknowledged
/// (offset, value) pairs in order.
fn fill(c: &mut Client, topic: &str, from: usize, acked: &mut Vec<(i64, Vec<u8>)>) -> usize {
    let mut i = from;
    loop {
        let values: Vec<Vec<u8>> = (i..i + 4).map(value).collect();
        let r = c.produce(topic, 0, batch(client::now_ms(), &values));
        if r.error_code == ErrorCode::KafkaStorageError.code() {
            return i;
        }
        assert_eq!(r.error_code, 0, "produce {i}");
        for (k, v) in values.into_iter().enumerate() {
            acked.push((r.base_offset + k as i64, v));
        }
        i += 4;
        assert!(i < 100_000, "the disk never filled");
    }
}

fn check_all_there(c: &mut Client, topic: &str, acked: &[(i64, Vec<u8>)], when: &str) {
    let got: Vec<(i64, Vec<u8>)> = c.fetch_all(topic, 0, 0).into_iter().map(|r| (r.offset, r.value.unwrap())).collect();
    assert_eq!(got.len(), acked.len(), "{when}: records read back");
    assert!(got == acked, "{when}: every acknowledged record, once, in order, with its value");
}

#[test]
fn a_full_data_disk_refuses_appends_survives_kill_9_and_resumes_when_space_returns() {
    let fs = Tmpfs::mount(8);
    let args = ["--flush", "always"];
    let mut broker = support::Broker::start_in(fs.path(), "127.0.0.1:0", &args);
    let mut c = Client::connect(broker.addr);
    c.create_topic("full", 1, &[]);
    let mut acked = Vec::new();
    let next = fill(&mut c, "full", 0, &mut acked);
    assert!(acked.len() > 1000, "8 MiB held only {} records", acked.len());
    // A refused write's landed part is cut again, so a little may still fit: fill to the
    // next refusal once more.
    let next = fill(&mut c, "full", next, &mut acked);
    check_all_there(&mut c, "full", &acked, "with the disk full");

    broker.kill9();
    let listen = broker.addr.to_string();
    let broker = support::restart(fs.path(), &listen, &args);
    let mut c = Client::connect(broker.addr);
    check_all_there(&mut c, "full", &acked, "after kill -9 on the full disk");
    let next = fill(&mut c, "full", next, &mut acked);

    fs.grow(32);
    let more = fill(&mut c, "full", next, &mut acked);
    assert!(more > next + 1000, "appends resumed after space was freed ({next} → {more})");
    check_all_there(&mut c, "full", &acked, "after space returned");
    drop(broker);
}
