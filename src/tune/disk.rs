//! I/O scheduler and request merging of the disk(s) under the data directory.
//!
//! The data directory's filesystem device (`st_dev`) leads to `/sys/dev/block/MAJ:MIN`; a
//! partition is tuned through its whole disk, and a device-mapper or md device through the
//! disks beneath it (`slaves/`), since their queues are the ones that schedule.
//!
//! Targets, for SSD/NVMe (`queue/rotational` = 0): scheduler `none` (`mq-deadline` where
//! `none` is not offered) — the device reorders better than the kernel, and a scheduler only
//! adds CPU time and latency on the shard that submitted the I/O; `nomerges` = 2 — the broker
//! already writes whole batches, so the merge lookups cost CPU for nothing. A rotating disk
//! wants `mq-deadline` (seeks do benefit from ordering) and keeps merging.

use std::path::{Path, PathBuf};

use super::fs::Fs;
use super::thp::selected;
use super::{sys_path, Finding, Fix};

pub(super) fn check(fs: &dyn Fs, data_dir: &Path) -> Vec<Finding> {
    let (major, minor) = match fs.device_of(data_dir) {
        Ok(d) => d,
        Err(e) => return vec![Finding::failed("disk", "device", format!("cannot stat the data directory: {e}"))],
    };
    let link = sys_path(&["sys/dev/block", &format!("{major}:{minor}")]);
    if !fs.exists(&link) {
        let detail = format!(
            "{} is on device {major}:{minor}, which is no block device (tmpfs, overlay, btrfs, NFS?): \
             tune the disks beneath it by hand",
            data_dir.display()
        );
        return vec![Finding::ok("disk", "device", detail)];
    }
    let disks = match disks_under(fs, &link, 0) {
        Ok(d) => d,
        Err(e) => return vec![Finding::failed("disk", "device", e.to_string())],
    };
    let mut out = Vec::new();
    for disk in disks {
        let name = disk.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        match fs.read(&disk.join("queue/rotational")) {
            Ok(r) => {
                let rotational = r == "1";
                out.push(scheduler(fs, &disk, &name, rotational));
                out.push(nomerges(fs, &disk, &name, rotational));
            }
            Err(e) => out.push(Finding::failed("disk", name, e.to_string())),
        }
    }
    out
}

/// Why the disks under a block device cannot be found.
#[derive(Debug, thiserror::Error)]
enum DeviceTreeError {
    /// Deeper than real stacks go (dm on md on partitions): a cycle, or a broken tree.
    #[error("{}: block devices nest too deep", .0.display())]
    TooDeep(PathBuf),
    /// A link that does not resolve (the error names it).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The whole disks whose queues serve the block device at `dev` (a `/sys` path).
fn disks_under(fs: &dyn Fs, dev: &Path, depth: usize) -> Result<Vec<PathBuf>, DeviceTreeError> {
    if depth > 4 {
        return Err(DeviceTreeError::TooDeep(fs.shown(dev)));
    }
    let mut dev = fs.resolve(dev)?;
    if fs.exists(&dev.join("partition")) {
        dev.pop();
    }
    let slaves = fs.list(&dev.join("slaves")).unwrap_or_default();
    if slaves.is_empty() {
        return Ok(vec![dev]);
    }
    let mut disks = Vec::new();
    for slave in slaves {
        for d in disks_under(fs, &dev.join("slaves").join(slave), depth + 1)? {
            if !disks.contains(&d) {
                disks.push(d);
            }
        }
    }
    Ok(disks)
}

fn scheduler(fs: &dyn Fs, disk: &Path, name: &str, rotational: bool) -> Finding {
    let setting = format!("{name} scheduler");
    let path = disk.join("queue/scheduler");
    let text = match fs.read(&path) {
        Ok(t) => t,
        Err(e) => return Finding::failed("disk", setting, e.to_string()),
    };
    let (current, offered) = selected(&text);
    let Some(current) = current else {
        return Finding::failed(
            "disk",
            setting,
            format!("{}: no [selected] value in `{text}`", fs.shown(&path).display()),
        );
    };
    let kind = if rotational { "rotational" } else { "SSD/NVMe" };
    let prefs: &[&str] = if rotational { &["mq-deadline"] } else { &["none", "mq-deadline"] };
    let Some(want) = prefs.iter().copied().find(|p| offered.contains(p)) else {
        return Finding::ok("disk", setting, format!("{kind}: is {current}; {} not offered", prefs.join(" or ")));
    };
    if current == want {
        return Finding::ok("disk", setting, format!("{kind}: is {current}"));
    }
    let fix = Fix::Write { path, value: want.into() };
    Finding::change("disk", setting, format!("{kind}: is {current}, want {want}"), vec![fix])
}

fn nomerges(fs: &dyn Fs, disk: &Path, name: &str, rotational: bool) -> Finding {
    let setting = format!("{name} nomerges");
    if rotational {
        return Finding::ok("disk", setting, "rotational: merging helps, left as is");
    }
    let path = disk.join("queue/nomerges");
    match fs.read(&path).map(|t| t.parse::<u32>()) {
        Ok(Ok(n)) if n >= 2 => Finding::ok("disk", setting, format!("is {n}")),
        Ok(Ok(n)) => {
            let fix = Fix::Write { path, value: "2".into() };
            Finding::change("disk", setting, format!("is {n}, want 2"), vec![fix])
        }
        Ok(Err(e)) => Finding::failed("disk", setting, format!("{}: {e}", fs.shown(&path).display())),
        Err(e) => Finding::failed("disk", setting, e.to_string()),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::tune::testing::Tree;
    use crate::tune::Status;

    /// Builds `/sys` for an NVMe disk with a partition holding the tree's `/data`, whatever
    /// device the temp dir really lives on.
    pub(crate) fn nvme_tree(t: &Tree, scheduler: &str, nomerges: &str) {
        t.dir("data");
        let (maj, min) = t.fs().device_of(Path::new("/data")).unwrap();
        let disk = "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1";
        t.file(&format!("{disk}/nvme0n1p1/partition"), "1");
        t.file(&format!("{disk}/queue/scheduler"), scheduler);
        t.file(&format!("{disk}/queue/nomerges"), nomerges);
        t.file(&format!("{disk}/queue/rotational"), "0");
        t.link(&format!("../../../{disk}/nvme0n1p1"), &format!("sys/dev/block/{maj}:{min}"));
    }

    #[test]
    fn a_partition_is_tuned_through_its_whole_disk() {
        let t = Tree::new();
        nvme_tree(&t, "[mq-deadline] kyber none", "0");
        let f = check(&t.fs(), Path::new("/data/not-yet-created"));
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(f[0].setting, "nvme0n1 scheduler");
        assert_eq!(f[0].status, Status::NeedsChange);
        let disk = PathBuf::from("/sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1");
        assert_eq!(f[0].fixes, vec![Fix::Write { path: disk.join("queue/scheduler"), value: "none".into() }]);
        assert_eq!(f[1].fixes, vec![Fix::Write { path: disk.join("queue/nomerges"), value: "2".into() }]);
    }

    #[test]
    fn mq_deadline_stands_in_when_none_is_not_offered_and_right_values_stay() {
        let t = Tree::new();
        nvme_tree(&t, "[mq-deadline] kyber", "2");
        let f = check(&t.fs(), Path::new("/data"));
        assert_eq!(f[0].status, Status::Ok, "{f:?}");
        assert_eq!(f[1].status, Status::Ok, "{f:?}");
    }

    #[test]
    fn a_data_dir_on_no_block_device_is_ok_with_a_note() {
        let t = Tree::new();
        t.dir("data");
        let f = check(&t.fs(), Path::new("/data"));
        assert_eq!(f[0].status, Status::Ok);
        assert!(f[0].detail.contains("no block device"), "{}", f[0].detail);
    }

    #[test]
    fn device_mapper_is_tuned_through_its_slaves() {
        let t = Tree::new();
        t.dir("data");
        let (maj, min) = t.fs().device_of(Path::new("/data")).unwrap();
        t.dir("sys/devices/virtual/block/dm-0/slaves");
        t.link("../../../../pci/block/sda/sda2", "sys/devices/virtual/block/dm-0/slaves/sda2");
        t.file("sys/devices/pci/block/sda/sda2/partition", "2");
        t.file("sys/devices/pci/block/sda/queue/rotational", "1");
        t.file("sys/devices/pci/block/sda/queue/scheduler", "[bfq] mq-deadline none");
        t.link("../../devices/virtual/block/dm-0", &format!("sys/dev/block/{maj}:{min}"));
        let f = check(&t.fs(), Path::new("/data"));
        assert_eq!(f[0].setting, "sda scheduler");
        assert_eq!(f[0].detail, "rotational: is bfq, want mq-deadline");
        assert_eq!(f[1].status, Status::Ok);
    }

    #[test]
    fn an_unreadable_queue_file_fails_naming_it() {
        let t = Tree::new();
        nvme_tree(&t, "[none] mq-deadline", "0");
        let disk = "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1";
        std::fs::remove_file(t.root().join(disk).join("queue/nomerges")).unwrap();
        let f = check(&t.fs(), Path::new("/data"));
        assert_eq!(f[1].status, Status::Failed);
        assert!(f[1].detail.contains(&t.shown(&format!("{disk}/queue/nomerges"))), "{}", f[1].detail);
    }
}
