//! CPU frequency governor of the shard CPUs. Target: `performance`.
//!
//! A shard polls its rings and runs its tasks in short bursts; power-saving governors read
//! that as a light load and clock the core down, so the next burst of requests runs slowly
//! until the governor catches up. Only the shard CPUs are touched: the rest of the machine
//! keeps its power policy.

use super::fs::{missing, Fs};
use super::{cpu_list, sys_path, Finding, Fix};

const WANT: &str = "performance";

pub(super) fn check(fs: &dyn Fs, cpus: &[usize]) -> Vec<Finding> {
    let setting = "scaling_governor";
    let mut fixes = Vec::new();
    let mut off: Vec<String> = Vec::new();
    let mut problems: Vec<String> = Vec::new();
    let mut scaled = 0;
    for &cpu in cpus {
        let name = format!("cpu{cpu}");
        if !fs.exists(&sys_path(&["sys/devices/system/cpu", &name, "cpufreq"])) {
            continue;
        }
        scaled += 1;
        let path = sys_path(&["sys/devices/system/cpu", &name, "cpufreq/scaling_governor"]);
        let governor = match fs.read(&path) {
            Ok(g) => g,
            Err(e) => {
                problems.push(e.to_string());
                continue;
            }
        };
        if governor == WANT {
            continue;
        }
        let available = sys_path(&["sys/devices/system/cpu", &name, "cpufreq/scaling_available_governors"]);
        match fs.read(&available) {
            Ok(list) if !list.split_whitespace().any(|g| g == WANT) => {
                problems
                    .push(format!("cpu {cpu} offers no {WANT} governor (only {list}): check the BIOS power profile"));
                continue;
            }
            Err(e) if !missing(&e) => {
                problems.push(e.to_string());
                continue;
            }
            _ => {}
        }
        off.push(format!("cpu {cpu} is {governor}"));
        fixes.push(Fix::Write { path, value: WANT.into() });
    }
    let shard_cpus = cpu_list(cpus);
    if scaled == 0 {
        return vec![Finding::ok("cpufreq", setting, "no cpufreq (VM or fixed frequency)")];
    }
    if !problems.is_empty() {
        return vec![Finding::failed("cpufreq", setting, problems.join("; "))];
    }
    if fixes.is_empty() {
        return vec![Finding::ok("cpufreq", setting, format!("{WANT} on shard CPUs {shard_cpus}"))];
    }
    vec![Finding::change("cpufreq", setting, format!("{}, want {WANT}", off.join(", ")), fixes)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::testing::Tree;
    use crate::tune::Status;

    fn gov(t: &Tree, cpu: usize, g: &str) {
        t.file(&format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"), g);
        t.file(
            &format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_available_governors"),
            "performance powersave",
        );
    }

    #[test]
    fn only_the_shard_cpus_off_performance_are_changed() {
        let t = Tree::new();
        gov(&t, 0, "powersave");
        gov(&t, 1, "performance");
        gov(&t, 2, "schedutil");
        gov(&t, 3, "powersave"); // not a shard CPU
        let f = check(&t.fs(), &[0, 1, 2]);
        assert_eq!(f[0].status, Status::NeedsChange);
        let paths: Vec<_> = f[0].fixes.iter().map(|Fix::Write { path, .. }| path.display().to_string()).collect();
        assert_eq!(
            paths,
            [
                "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
                "/sys/devices/system/cpu/cpu2/cpufreq/scaling_governor"
            ]
        );
        assert!(f[0].detail.contains("cpu 0 is powersave"), "{}", f[0].detail);
    }

    #[test]
    fn no_cpufreq_directory_is_ok() {
        let t = Tree::new();
        t.dir("sys/devices/system/cpu/cpu0");
        let f = check(&t.fs(), &[0]);
        assert_eq!(f[0].status, Status::Ok);
        assert!(f[0].detail.contains("no cpufreq"));
    }

    #[test]
    fn a_governor_that_cannot_be_offered_or_read_fails_naming_why() {
        let t = Tree::new();
        t.file("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "powersave");
        t.file("sys/devices/system/cpu/cpu0/cpufreq/scaling_available_governors", "powersave");
        t.dir("sys/devices/system/cpu/cpu1/cpufreq");
        let f = check(&t.fs(), &[0, 1]);
        assert_eq!(f[0].status, Status::Failed);
        assert!(f[0].detail.contains("offers no performance"), "{}", f[0].detail);
        assert!(f[0].detail.contains(&t.shown("sys/devices/system/cpu/cpu1/cpufreq/scaling_governor")));
    }
}
