//! NIC interrupts and packet steering, aimed at the shard CPUs (see the kernel's
//! `Documentation/networking/scaling.rst` for RPS, RFS and XPS).
//!
//! A connection lives on the shard that accepted it. The aim is that its packets are handled
//! on that shard's core too, and never on a core the broker does not own:
//!
//! - IRQ affinity: each of the NIC's interrupts goes to one shard CPU, spread round-robin
//!   (`/proc/irq/N/smp_affinity_list`, a CPU list). Stop irqbalance, or ban these IRQs in it,
//!   or it will move them back.
//! - RPS: every receive queue may hand packets to any shard CPU (`rps_cpus`, a hex CPU mask).
//! - RFS: the kernel remembers which CPU last read each flow and steers its packets there,
//!   i.e. to the owning shard. Global table: sysctl `net.core.rps_sock_flow_entries` (the
//!   `sysctl` tuner); each receive queue's share: `rps_flow_cnt` = entries / queues.
//! - XPS: transmit queues are spread over the shard CPUs (`xps_cpus`, a hex mask), so a shard
//!   sends on "its" queue without contending for another core's queue lock.
//!
//! NICs without a `device` link (loopback, bridges, veths, tunnels) are skipped.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::fs::{missing, Fs};
use super::{cpu_list, sys_path, sysctl, Finding, Fix};

/// A file's text that is not a kernel CPU mask.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a hex CPU mask")]
pub(super) struct NotAMask(String);

/// Parses a kernel CPU mask: hex, most significant first, optionally in comma-separated
/// 32-bit groups (`00000000,0000000f`).
pub(super) fn parse_mask(text: &str) -> Result<BTreeSet<usize>, NotAMask> {
    let mut cpus = BTreeSet::new();
    let digits: Vec<char> = text.trim().chars().filter(|&c| c != ',').collect();
    for (i, c) in digits.iter().rev().enumerate() {
        let nibble = c.to_digit(16).ok_or_else(|| NotAMask(text.to_string()))?;
        cpus.extend((0..4).filter(|b| nibble & (1 << b) != 0).map(|b| i * 4 + b));
    }
    Ok(cpus)
}

/// Formats CPUs as a kernel CPU mask in 32-bit groups, as the kernel prints them.
pub(super) fn format_mask(cpus: &[usize]) -> String {
    let groups = cpus.iter().max().map_or(1, |m| m / 32 + 1);
    let mut words = vec![0u32; groups];
    for &c in cpus {
        words[c / 32] |= 1 << (c % 32);
    }
    let mut parts: Vec<String> = Vec::new();
    for (i, w) in words.iter().enumerate().rev() {
        parts.push(if i == groups - 1 { format!("{w:x}") } else { format!("{w:08x}") });
    }
    parts.join(",")
}

/// The CPUs transmit queue `q` of `queues` serves: shard CPUs dealt out round-robin, so every
/// shard CPU has a queue and every queue has a CPU.
pub(super) fn xps_cpus(cpus: &[usize], q: usize, queues: usize) -> Vec<usize> {
    let mine: Vec<usize> = cpus.iter().enumerate().filter(|(j, _)| j % queues == q).map(|(_, &c)| c).collect();
    if mine.is_empty() {
        vec![cpus[q % cpus.len()]]
    } else {
        mine
    }
}

fn nic_dir(nic: &str) -> PathBuf {
    sys_path(&["sys/class/net", nic])
}

pub(super) fn check(fs: &dyn Fs, cpus: &[usize]) -> Vec<Finding> {
    let nics = match fs.list(Path::new("/sys/class/net")) {
        Ok(n) => n,
        Err(e) => return vec![Finding::failed("net", "nics", e.to_string())],
    };
    let nics: Vec<String> = nics.into_iter().filter(|n| n != "lo" && fs.exists(&nic_dir(n).join("device"))).collect();
    if nics.is_empty() {
        return vec![Finding::ok("net", "nics", "no physical NIC (only loopback or virtual ones)")];
    }
    let interrupts = fs.read(Path::new("/proc/interrupts"));
    let mut out = Vec::new();
    for nic in &nics {
        out.push(match &interrupts {
            Ok(text) => irqs(fs, nic, text, cpus),
            Err(e) => Finding::failed("net", format!("{nic} irq"), e.to_string()),
        });
        let rx = queues(fs, nic, "rx-");
        let tx = queues(fs, nic, "tx-");
        out.push(rps(fs, nic, &rx, cpus));
        out.push(rfs(fs, nic, &rx));
        out.push(xps(fs, nic, &tx, cpus));
    }
    out
}

/// The NIC's IRQs: /proc/interrupts lines naming it (`eth0`, `eth0-TxRx-3`), or failing
/// that, the MSI vectors of its PCI device (drivers such as mlx5 name the device, not the NIC).
fn irq_numbers(fs: &dyn Fs, nic: &str, interrupts: &str) -> Vec<u32> {
    let named = |t: &str| t == nic || t.starts_with(&format!("{nic}-")) || t.starts_with(&format!("{nic}@"));
    let mut irqs: Vec<u32> = interrupts
        .lines()
        .filter_map(|line| {
            let (num, rest) = line.split_once(':')?;
            let irq = num.trim().parse::<u32>().ok()?;
            rest.split_whitespace().any(named).then_some(irq)
        })
        .collect();
    if irqs.is_empty() {
        let msi = nic_dir(nic).join("device/msi_irqs");
        irqs = fs.list(&msi).unwrap_or_default().iter().filter_map(|n| n.parse().ok()).collect();
    }
    irqs.sort_unstable();
    irqs.dedup();
    irqs
}

fn irqs(fs: &dyn Fs, nic: &str, interrupts: &str, cpus: &[usize]) -> Finding {
    let setting = format!("{nic} irq");
    let irqs = irq_numbers(fs, nic, interrupts);
    if irqs.is_empty() {
        return Finding::ok("net", setting, "no IRQ of its own found (virtio or shared): nothing to pin");
    }
    let mut fixes = Vec::new();
    let mut off = Vec::new();
    let mut problems = Vec::new();
    for (i, irq) in irqs.iter().enumerate() {
        let want = cpus[i % cpus.len()];
        let path = sys_path(&["proc/irq", &irq.to_string(), "smp_affinity_list"]);
        match fs.read(&path).map(|t| crate::config::parse_cpu_list(&t)) {
            Ok(Ok(now)) if now == [want] => {}
            Ok(Ok(now)) => {
                off.push(format!("irq {irq} on {}, want {want}", cpu_list(&now)));
                fixes.push(Fix::Write { path, value: want.to_string() });
            }
            Ok(Err(e)) => problems.push(format!("{}: {e}", fs.shown(&path).display())),
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !problems.is_empty() {
        return Finding::failed("net", setting, problems.join("; "));
    }
    if fixes.is_empty() {
        return Finding::ok("net", setting, format!("{} IRQs spread over shard CPUs {}", irqs.len(), cpu_list(cpus)));
    }
    Finding::change("net", setting, format!("{} of {} IRQs off: {}", off.len(), irqs.len(), summary(&off)), fixes)
}

/// Queue directory names (`rx-0`, `rx-1`, …) in queue order.
fn queues(fs: &dyn Fs, nic: &str, prefix: &str) -> Vec<String> {
    let mut q: Vec<(usize, String)> = fs
        .list(&nic_dir(nic).join("queues"))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|n| Some((n.strip_prefix(prefix)?.parse().ok()?, n)))
        .collect();
    q.sort();
    q.into_iter().map(|(_, n)| n).collect()
}

/// Each queue file found off its wanted mask, as a finding.
fn masks(fs: &dyn Fs, nic: &str, what: &str, file: &str, wanted: Vec<(String, Vec<usize>)>) -> Finding {
    let setting = format!("{nic} {what}");
    let mut fixes = Vec::new();
    let mut off = Vec::new();
    let mut problems = Vec::new();
    for (queue, want) in &wanted {
        let path = nic_dir(nic).join("queues").join(queue).join(file);
        let want_set: BTreeSet<usize> = want.iter().copied().collect();
        match fs.read(&path).map(|t| parse_mask(&t)) {
            Ok(Ok(now)) if now == want_set => {}
            Ok(Ok(now)) => {
                let now: Vec<usize> = now.into_iter().collect();
                let now = if now.is_empty() { "none".to_string() } else { cpu_list(&now) };
                off.push(format!("{queue} on {now}, want {}", cpu_list(want)));
                fixes.push(Fix::Write { path, value: format_mask(want) });
            }
            Ok(Err(e)) => problems.push(format!("{}: {e}", fs.shown(&path).display())),
            Err(e) if missing(&e) => problems.push(format!("{e} (kernel without CONFIG_RPS/CONFIG_XPS?)")),
            Err(e) => problems.push(e.to_string()),
        }
    }
    if wanted.is_empty() {
        return Finding::ok("net", setting, "no queues to steer");
    }
    if !problems.is_empty() {
        return Finding::failed("net", setting, problems.join("; "));
    }
    if fixes.is_empty() {
        return Finding::ok("net", setting, format!("{} queues on the shard CPUs", wanted.len()));
    }
    Finding::change("net", setting, format!("{} of {} queues off: {}", off.len(), wanted.len(), summary(&off)), fixes)
}

fn rps(fs: &dyn Fs, nic: &str, rx: &[String], cpus: &[usize]) -> Finding {
    masks(fs, nic, "rps", "rps_cpus", rx.iter().map(|q| (q.clone(), cpus.to_vec())).collect())
}

fn xps(fs: &dyn Fs, nic: &str, tx: &[String], cpus: &[usize]) -> Finding {
    if tx.len() < 2 {
        // One transmit queue: every CPU uses it anyway, and the kernel offers no xps_cpus.
        return Finding::ok("net", format!("{nic} xps"), "single transmit queue: nothing to spread");
    }
    let wanted = tx.iter().enumerate().map(|(q, name)| (name.clone(), xps_cpus(cpus, q, tx.len()))).collect();
    masks(fs, nic, "xps", "xps_cpus", wanted)
}

fn rfs(fs: &dyn Fs, nic: &str, rx: &[String]) -> Finding {
    let setting = format!("{nic} rfs");
    if rx.is_empty() {
        return Finding::ok("net", setting, "no receive queues");
    }
    let entries = sysctl::want("net.core.rps_sock_flow_entries").target();
    // The kernel rounds both tables up to a power of two; asking for one keeps reads equal.
    let want = (entries / rx.len() as u64).max(1).next_power_of_two();
    let mut fixes = Vec::new();
    let mut problems = Vec::new();
    let mut low = Vec::new();
    for queue in rx {
        let path = nic_dir(nic).join("queues").join(queue).join("rps_flow_cnt");
        match fs.read(&path).map(|t| t.parse::<u64>()) {
            Ok(Ok(n)) if n >= want => {}
            Ok(Ok(n)) => {
                low.push(format!("{queue} has {n}"));
                fixes.push(Fix::Write { path, value: want.to_string() });
            }
            Ok(Err(e)) => problems.push(format!("{}: {e}", fs.shown(&path).display())),
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !problems.is_empty() {
        return Finding::failed("net", setting, problems.join("; "));
    }
    if fixes.is_empty() {
        return Finding::ok("net", setting, format!("rps_flow_cnt >= {want} on {} queues", rx.len()));
    }
    Finding::change("net", setting, format!("rps_flow_cnt: {}, want >= {want}", summary(&low)), fixes)
}

/// The first few items of a long list, then how many more.
fn summary(items: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut s = items.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > SHOWN {
        s.push_str(&format!(" and {} more", items.len() - SHOWN));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::testing::Tree;
    use crate::tune::Status;

    /// eth0: a PCI NIC with 2 rx and 4 tx queues and 3 IRQs; br0: virtual; lo.
    fn nic_tree() -> Tree {
        let t = Tree::new();
        t.dir("sys/devices/pci0000:00/0000:00:03.0");
        t.link("../../../devices/pci0000:00/0000:00:03.0", "sys/class/net/eth0/device");
        t.dir("sys/class/net/br0/queues/rx-0");
        t.dir("sys/class/net/lo");
        for q in 0..2 {
            t.file(&format!("sys/class/net/eth0/queues/rx-{q}/rps_cpus"), "00000000");
            t.file(&format!("sys/class/net/eth0/queues/rx-{q}/rps_flow_cnt"), "0");
        }
        for q in 0..4 {
            t.file(&format!("sys/class/net/eth0/queues/tx-{q}/xps_cpus"), "0");
        }
        t.file(
            "proc/interrupts",
            "           CPU0       CPU1\n\
             \x20 24:          5          0   PCI-MSI 49152-edge      eth0-TxRx-0\n\
             \x20 25:          5          0   PCI-MSI 49153-edge      eth0-TxRx-1\n\
             \x20 26:          1          0   PCI-MSI 49154-edge      eth0\n\
             \x20 30:          1          0   PCI-MSI 49155-edge      eth10-TxRx-0\n\
             NMI:          0          0   Non-maskable interrupts",
        );
        for irq in [24, 25, 26, 30] {
            t.file(&format!("proc/irq/{irq}/smp_affinity_list"), "0-7");
        }
        t
    }

    #[test]
    fn masks_round_trip_in_kernel_format() {
        assert_eq!(format_mask(&[0, 1]), "3");
        assert_eq!(format_mask(&[0, 40]), "100,00000001");
        assert_eq!(parse_mask("00000000,0000000f").unwrap(), [0, 1, 2, 3].into());
        assert_eq!(parse_mask(&format_mask(&[2, 33, 70])).unwrap(), [2, 33, 70].into());
        assert!(parse_mask("zz").is_err());
    }

    #[test]
    fn transmit_queues_share_the_shard_cpus_out() {
        assert_eq!(xps_cpus(&[4, 5, 6, 7], 1, 2), vec![5, 7]);
        assert_eq!(xps_cpus(&[4, 5], 3, 4), vec![5]);
    }

    #[test]
    fn a_pci_nic_is_pinned_and_steered_to_the_shard_cpus_and_virtual_ones_skipped() {
        let t = nic_tree();
        let f = check(&t.fs(), &[2, 3]);
        let names: Vec<&str> = f.iter().map(|x| x.setting.as_str()).collect();
        assert_eq!(names, ["eth0 irq", "eth0 rps", "eth0 rfs", "eth0 xps"]);
        assert!(f.iter().all(|x| x.status == Status::NeedsChange), "{f:?}");
        let writes = |i: usize| -> Vec<(String, String)> {
            f[i].fixes.iter().map(|Fix::Write { path, value }| (path.display().to_string(), value.clone())).collect()
        };
        // eth10's IRQ 30 is not eth0's.
        assert_eq!(
            writes(0),
            [
                ("/proc/irq/24/smp_affinity_list".into(), "2".into()),
                ("/proc/irq/25/smp_affinity_list".into(), "3".into()),
                ("/proc/irq/26/smp_affinity_list".into(), "2".into())
            ]
        );
        assert_eq!(writes(1)[1], ("/sys/class/net/eth0/queues/rx-1/rps_cpus".into(), "c".into()));
        assert_eq!(writes(2)[0].1, "16384", "32768 entries over 2 queues");
        let xps: Vec<String> = writes(3).into_iter().map(|w| w.1).collect();
        assert_eq!(xps, ["4", "8", "4", "8"]);
    }

    #[test]
    fn settings_already_right_are_left_alone() {
        let t = nic_tree();
        t.file("proc/irq/24/smp_affinity_list", "2");
        t.file("proc/irq/25/smp_affinity_list", "3");
        t.file("proc/irq/26/smp_affinity_list", "2");
        for q in 0..2 {
            t.file(&format!("sys/class/net/eth0/queues/rx-{q}/rps_cpus"), "0000000c");
            t.file(&format!("sys/class/net/eth0/queues/rx-{q}/rps_flow_cnt"), "65536");
            // more than wanted
        }
        for (q, m) in ["4", "8", "4", "8"].iter().enumerate() {
            t.file(&format!("sys/class/net/eth0/queues/tx-{q}/xps_cpus"), m);
        }
        let f = check(&t.fs(), &[2, 3]);
        assert!(f.iter().all(|x| x.status == Status::Ok), "{f:?}");
    }

    #[test]
    fn msi_vectors_are_used_when_interrupts_do_not_name_the_nic() {
        let t = nic_tree();
        t.file("proc/interrupts", "  CPU0\n 40:  1  PCI-MSI  mlx5_comp0@pci:0000:00:03.0");
        t.dir("sys/devices/pci0000:00/0000:00:03.0/msi_irqs/40");
        t.file("proc/irq/40/smp_affinity_list", "0");
        let f = check(&t.fs(), &[1]);
        assert_eq!(f[0].fixes, vec![Fix::Write { path: "/proc/irq/40/smp_affinity_list".into(), value: "1".into() }]);
    }

    #[test]
    fn a_missing_steering_file_fails_naming_it() {
        let t = nic_tree();
        std::fs::remove_file(t.root().join("sys/class/net/eth0/queues/rx-1/rps_cpus")).unwrap();
        let f = check(&t.fs(), &[0]);
        let rps = f.iter().find(|x| x.setting == "eth0 rps").unwrap();
        assert_eq!(rps.status, Status::Failed);
        assert!(rps.detail.contains(&t.shown("sys/class/net/eth0/queues/rx-1/rps_cpus")), "{}", rps.detail);
    }
}
