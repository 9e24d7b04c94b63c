//! `ringbroker tune render`: the fixes as a POSIX shell script an operator can review, keep in
//! configuration management, and run as root. Rendering changes nothing.

use std::fmt::Write as _;

use super::fs::Fs;
use super::{Finding, Fix, Status};

/// Quotes `s` for sh: inside single quotes nothing is special but the quote itself.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The script fixing `findings`; `about` says what it was rendered for (one line).
pub(super) fn render(fs: &dyn Fs, findings: &[Finding], about: &str) -> String {
    let mut s = String::new();
    s.push_str("#!/bin/sh\n");
    s.push_str("# Ringbroker OS tuning, rendered by `ringbroker tune render`. Review it, then run it as root.\n");
    let _ = writeln!(s, "# {about}");
    s.push_str("# Each block fixes one finding of `ringbroker tune check`. The changes last until reboot:\n");
    s.push_str("# tuning/README.md says how to keep them.\n\n");
    s.push_str("failed=0\n");
    s.push_str("# w VALUE FILE: one write, as `ringbroker tune apply` does it; a failure is reported, not fatal.\n");
    s.push_str("w() {\n");
    s.push_str("    printf '%s\\n' \"$1\" > \"$2\" || { echo \"cannot write $1 to $2\" >&2; failed=1; }\n");
    s.push_str("}\n");
    for f in findings.iter().filter(|f| f.status == Status::NeedsChange) {
        let _ = writeln!(s, "\n# {} {}: {}", f.tuner, f.setting, f.detail);
        for fix in &f.fixes {
            let Fix::Write { path, value } = fix;
            let _ = writeln!(s, "w {} {}", quote(value), quote(&fs.shown(path).display().to_string()));
        }
        if let Some(caveat) = &f.caveat {
            let _ = writeln!(s, "# Note: {caveat}");
        }
    }
    let failed: Vec<&Finding> = findings.iter().filter(|f| f.status == Status::Failed).collect();
    if !failed.is_empty() {
        s.push_str("\n# Not fixable by this script (do it by hand):\n");
        for f in failed {
            let _ = writeln!(s, "#   {} {}: {}", f.tuner, f.setting, f.detail);
        }
    }
    let ok: Vec<&Finding> = findings.iter().filter(|f| f.status == Status::Ok).collect();
    if !ok.is_empty() {
        s.push_str("\n# Already right, left alone:\n");
        for f in ok {
            let _ = writeln!(s, "#   {} {}: {}", f.tuner, f.setting, f.detail);
        }
    }
    s.push_str("\nexit $failed\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::limits::{tests::FakeRlimits, Limit, Rlimits, UNLIMITED};
    use crate::tune::testing::Tree;
    use crate::tune::{check, Machine, Plan, Tuner};

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(quote("a'b"), r"'a'\''b'");
    }

    #[test]
    fn the_script_writes_what_apply_would_and_rendering_changes_nothing() {
        let t = Tree::new();
        t.file("proc/sys/vm/swappiness", "60");
        t.file("proc/sys/net/core/somaxconn", "65535");
        t.file("sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never");
        let before = t.snapshot();
        let fs = t.fs();
        let limits = FakeRlimits::new((8 << 20, 1 << 30), (1024, 1 << 20));
        let m = Machine { fs: &fs, rlimits: &limits };
        let plan = Plan { cpus: vec![0], data_dir: "/data".into(), tuners: Tuner::ALL.to_vec() };
        assert_eq!(limits.get(Limit::Nofile).unwrap(), (1024, 1 << 20));
        let script = render(&fs, &check(&m, &plan), "test");
        assert_eq!(t.snapshot(), before, "render wrote to the tree");
        assert!(script.starts_with("#!/bin/sh\n"));
        assert!(script.contains(&format!("w '1' '{}'", t.shown("proc/sys/vm/swappiness"))), "{script}");
        assert!(script.contains(&format!("w 'madvise' '{}'", t.shown("sys/kernel/mm/transparent_hugepage/enabled"))));
        assert!(!script.contains("somaxconn'"), "a better value is not rewritten: {script}");
        assert!(script.contains("net.core.somaxconn: is 65535"), "{script}");
        assert!(script.contains("# Not fixable by this script"), "missing files are listed: {script}");
    }

    #[test]
    fn the_script_runs_under_sh_and_makes_the_check_pass() {
        let t = Tree::new();
        t.file("proc/sys/vm/swappiness", "60");
        t.file("sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never");
        let fs = t.fs();
        let limits = FakeRlimits::new((UNLIMITED, UNLIMITED), (1 << 20, 1 << 20));
        let m = Machine { fs: &fs, rlimits: &limits };
        let plan = Plan { cpus: vec![0], data_dir: "/data".into(), tuners: vec![Tuner::Thp] };
        let script = render(&fs, &check(&m, &plan), "test");
        let out = std::process::Command::new("sh").arg("-c").arg(&script).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(t.read("sys/kernel/mm/transparent_hugepage/enabled"), "madvise");
        assert!(check(&m, &plan).iter().all(|f| f.status == Status::Ok));
        assert_eq!(t.read("proc/sys/vm/swappiness"), "60", "only the planned tuners are touched");
    }
}
