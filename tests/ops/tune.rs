//! `ringbroker tune` end to end: the built binary against a fake machine (`--root` at a temp
//! dir holding the /proc and /sys files the tuners read), in every mode and format.
//!
//! The `limits` tuner reads this test process's own rlimits, which the test cannot fake, so
//! runs name the other tuners explicitly.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_ringbroker");
const TUNERS: [&str; 6] = ["sysctl", "thp", "cpufreq", "net", "disk", "clock"];

/// A 4-CPU machine with one NVMe disk and one 2-queue NIC, nothing tuned.
struct Machine {
    dir: tempfile::TempDir,
}

impl Machine {
    fn untuned() -> Machine {
        let m = Machine { dir: tempfile::tempdir().unwrap() };
        m.file("sys/devices/system/cpu/online", "0-3");
        for (key, value) in [
            ("fs/aio-max-nr", "65536"),
            ("fs/file-max", "9223372036854775807"),
            ("net/core/somaxconn", "128"),
            ("net/ipv4/tcp_max_syn_backlog", "8192"),
            ("vm/swappiness", "60"),
            ("net/core/rps_sock_flow_entries", "0"),
        ] {
            m.file(&format!("proc/sys/{key}"), value);
        }
        m.file("sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never");
        for cpu in 0..4 {
            m.file(&format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"), "powersave");
        }
        m.file("sys/devices/system/clocksource/clocksource0/current_clocksource", "hpet");
        m.file("sys/devices/system/clocksource/clocksource0/available_clocksource", "tsc hpet acpi_pm");
        m.file("proc/cmdline", "ro quiet");
        // eth0 on PCI, with its queues and IRQs; lo is skipped.
        std::fs::create_dir_all(m.path("sys/devices/pci0000:00/0000:00:03.0")).unwrap();
        m.link("../../../devices/pci0000:00/0000:00:03.0", "sys/class/net/eth0/device");
        std::fs::create_dir_all(m.path("sys/class/net/lo")).unwrap();
        for q in 0..2 {
            m.file(&format!("sys/class/net/eth0/queues/rx-{q}/rps_cpus"), "0");
            m.file(&format!("sys/class/net/eth0/queues/rx-{q}/rps_flow_cnt"), "0");
            m.file(&format!("sys/class/net/eth0/queues/tx-{q}/xps_cpus"), "0");
        }
        m.file("proc/interrupts", "       CPU0\n 33:  9  PCI-MSI  eth0-rx-0\n 34:  9  PCI-MSI  eth0-tx-0\n");
        m.file("proc/irq/33/smp_affinity_list", "0-3");
        m.file("proc/irq/34/smp_affinity_list", "0-3");
        // /data is on whatever device the temp dir is: make that device an NVMe partition.
        std::fs::create_dir_all(m.path("data")).unwrap();
        let dev = std::fs::metadata(m.path("data")).unwrap().dev();
        let (maj, min) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
        let disk = "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1";
        m.file(&format!("{disk}/nvme0n1p1/partition"), "1");
        m.file(&format!("{disk}/queue/scheduler"), "[mq-deadline] none");
        m.file(&format!("{disk}/queue/nomerges"), "0");
        m.file(&format!("{disk}/queue/rotational"), "0");
        m.link(&format!("../../../{disk}/nvme0n1p1"), &format!("sys/dev/block/{maj}:{min}"));
        m
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().canonicalize().unwrap().join(rel)
    }

    fn file(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{text}\n")).unwrap();
    }

    fn link(&self, target: &str, rel: &str) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, p).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap().trim_end().to_string()
    }

    /// Every regular file and its content.
    fn snapshot(&self) -> Vec<(PathBuf, String)> {
        fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                let meta = std::fs::symlink_metadata(&p).unwrap();
                if meta.is_dir() {
                    walk(&p, out);
                } else if meta.is_file() {
                    out.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
                }
            }
        }
        let mut out = Vec::new();
        walk(self.dir.path(), &mut out);
        out.sort();
        out
    }

    /// `ringbroker tune MODE --root <tree> --cpus 2-3 --data-dir /data EXTRA... TUNERS...`
    fn tune(&self, mode: &str, extra: &[&str]) -> Output {
        Command::new(BIN)
            .args(["tune", mode, "--root"])
            .arg(self.dir.path())
            .args(["--cpus", "2-3", "--data-dir", "/data"])
            .args(extra)
            .args(TUNERS)
            .env_remove("RINGBROKER_CONFIG")
            .env_remove("RINGBROKER_NUMA_NODE")
            .output()
            .unwrap()
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The line of the text table for `setting`.
fn row<'a>(out: &'a str, setting: &str) -> &'a str {
    out.lines().find(|l| l.split("  ").any(|c| c.trim() == setting)).unwrap_or_else(|| panic!("no {setting}:\n{out}"))
}

#[test]
fn check_names_what_is_off_exits_1_and_changes_nothing() {
    let m = Machine::untuned();
    let before = m.snapshot();
    let out = m.tune("check", &[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(row(&text, "vm.swappiness").contains("needs-change"), "{text}");
    assert!(row(&text, "vm.swappiness").contains("is 60, want <= 1"), "{text}");
    assert!(row(&text, "net.ipv4.tcp_max_syn_backlog").contains(" ok "), "8192 beats 4096: {text}");
    for setting in
        ["transparent_hugepage", "scaling_governor", "eth0 irq", "eth0 rps", "nvme0n1 scheduler", "clocksource"]
    {
        assert!(row(&text, setting).contains("needs-change"), "{setting}: {text}");
    }
    assert!(!text.contains("lo "), "loopback is skipped: {text}");
    assert_eq!(m.snapshot(), before, "check wrote to the tree");
}

#[test]
fn apply_fixes_the_tree_and_a_recheck_passes() {
    let m = Machine::untuned();
    let out = m.tune("apply", &[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(row(&text, "vm.swappiness").contains("changed"), "{text}");
    assert!(row(&text, "clocksource").contains("needs-reboot"), "{text}");
    assert_eq!(m.read("proc/sys/vm/swappiness"), "1");
    assert_eq!(m.read("proc/sys/net/core/somaxconn"), "4096");
    assert_eq!(m.read("proc/sys/net/ipv4/tcp_max_syn_backlog"), "8192", "a better value was lowered");
    assert_eq!(m.read("sys/kernel/mm/transparent_hugepage/enabled"), "madvise");
    assert_eq!(m.read("sys/devices/system/cpu/cpu2/cpufreq/scaling_governor"), "performance");
    assert_eq!(m.read("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"), "powersave", "not a shard CPU");
    assert_eq!(m.read("proc/irq/33/smp_affinity_list"), "2");
    assert_eq!(m.read("proc/irq/34/smp_affinity_list"), "3");
    assert_eq!(m.read("sys/class/net/eth0/queues/rx-0/rps_cpus"), "c");
    assert_eq!(m.read("sys/class/net/eth0/queues/tx-1/xps_cpus"), "8");
    assert_eq!(m.read("sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1/queue/scheduler"), "none");
    let again = m.tune("check", &[]);
    assert_eq!(again.status.code(), Some(0), "{}", stdout(&again));
}

#[test]
fn render_prints_a_script_that_changes_nothing_until_run() {
    let m = Machine::untuned();
    let before = m.snapshot();
    let out = m.tune("render", &[]);
    let script = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{script}");
    assert_eq!(m.snapshot(), before, "render wrote to the tree");
    assert!(script.starts_with("#!/bin/sh\n"), "{script}");
    assert!(script.contains("# sysctl vm.swappiness: is 60, want <= 1"), "{script}");
    let swappiness = m.path("proc/sys/vm/swappiness");
    assert!(script.contains(&format!("w '1' '{}'", swappiness.display())), "{script}");
    // The script is what apply would do: after running it, check passes.
    let run = Command::new("sh").arg("-c").arg(&script).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(m.tune("check", &[]).status.code(), Some(0));
}

#[test]
fn json_output_parses_and_carries_every_finding() {
    let m = Machine::untuned();
    let out = m.tune("check", &["--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("check --format json is JSON");
    assert_eq!(v["mode"], "check");
    assert_eq!(v["ok"], false);
    assert_eq!(v["cpus"], "2-3");
    let findings = v["findings"].as_array().unwrap();
    let swappiness = findings.iter().find(|f| f["setting"] == "vm.swappiness").unwrap();
    assert_eq!(swappiness["status"], "needs-change");
    assert_eq!(swappiness["tuner"], "sysctl");
    let tuners: std::collections::BTreeSet<&str> = findings.iter().map(|f| f["tuner"].as_str().unwrap()).collect();
    assert_eq!(tuners, TUNERS.into_iter().collect());
    let render = m.tune("render", &["--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&render.stdout).unwrap();
    assert!(v["script"].as_str().unwrap().starts_with("#!/bin/sh"));
}

#[test]
fn cpus_outside_the_machine_are_refused_as_bad_usage() {
    let m = Machine::untuned();
    let out =
        Command::new(BIN).args(["tune", "check", "--root"]).arg(m.dir.path()).args(["--cpus", "2-9"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("CPU 4") && err.contains("cpus"), "{err}");
}
