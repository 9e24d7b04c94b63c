//! Transparent hugepages. Target: `madvise` (`never` is accepted too).
//!
//! Redpanda's tuner turns THP *on*, because Seastar takes all of a shard's memory up front and
//! wants it in huge TLB entries. Ringbroker is not built that way: it uses the system
//! allocator and serves data from the page cache (file pages, which THP does not cover). With
//! `always`, khugepaged compacts and collapses pages behind the broker's back and page faults
//! may stall a shard in direct compaction — the latency spikes Kafka operators are told to
//! avoid by disabling THP. `madvise` gives huge pages only to software that asks for them.

use std::path::Path;

use super::fs::{missing, Fs};
use super::{Finding, Fix};

const ENABLED: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// The bracketed choice and all choices of a sysfs selector like `always [madvise] never`.
/// A lone word is the choice: the kernel shows a queue with no scheduler to pick as `none`.
pub(super) fn selected(text: &str) -> (Option<&str>, Vec<&str>) {
    let mut current = None;
    let mut all = Vec::new();
    for word in text.split_whitespace() {
        let name = word.trim_start_matches('[').trim_end_matches(']');
        if word.starts_with('[') {
            current = Some(name);
        }
        all.push(name);
    }
    if let ([only], None) = (all.as_slice(), current) {
        current = Some(only);
    }
    (current, all)
}

pub(super) fn check(fs: &dyn Fs) -> Vec<Finding> {
    let path = Path::new(ENABLED);
    let setting = "transparent_hugepage";
    let text = match fs.read(path) {
        Ok(t) => t,
        Err(e) if missing(&e) => return vec![Finding::ok("thp", setting, "not built into this kernel")],
        Err(e) => return vec![Finding::failed("thp", setting, e.to_string())],
    };
    let (current, all) = selected(&text);
    match current {
        Some(c @ ("madvise" | "never")) => vec![Finding::ok("thp", setting, format!("is {c} (want madvise or never)"))],
        Some(c) => {
            let to = if all.contains(&"madvise") { "madvise" } else { "never" };
            let fix = Fix::Write { path: path.into(), value: to.into() };
            vec![Finding::change("thp", setting, format!("is {c}, want madvise or never"), vec![fix])]
        }
        None => vec![Finding::failed(
            "thp",
            setting,
            format!("{}: no [selected] value in `{text}`", fs.shown(path).display()),
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::testing::Tree;
    use crate::tune::Status;

    const REL: &str = "sys/kernel/mm/transparent_hugepage/enabled";

    #[test]
    fn always_is_changed_to_madvise_and_never_is_left_alone() {
        let t = Tree::new();
        t.file(REL, "[always] madvise never");
        let f = check(&t.fs());
        assert_eq!(f[0].status, Status::NeedsChange);
        assert_eq!(f[0].fixes, vec![Fix::Write { path: ENABLED.into(), value: "madvise".into() }]);
        t.file(REL, "always madvise [never]");
        assert_eq!(check(&t.fs())[0].status, Status::Ok);
        t.file(REL, "always [madvise] never");
        assert_eq!(check(&t.fs())[0].status, Status::Ok);
    }

    #[test]
    fn a_kernel_without_thp_is_ok_and_garbage_fails() {
        let t = Tree::new();
        assert_eq!(check(&t.fs())[0].status, Status::Ok);
        t.file(REL, "always madvise never");
        let f = check(&t.fs());
        assert_eq!(selected("none"), (Some("none"), vec!["none"]));
        assert_eq!(f[0].status, Status::Failed);
        assert!(f[0].detail.contains(&t.shown(REL)), "{}", f[0].detail);
    }
}
