//! Clocksource. Target: `tsc` where the kernel offers it.
//!
//! The broker reads the clock on every request (timeouts, latency metrics, timestamps) and
//! glommio on every scheduling decision. With `tsc` that read stays in user space (vDSO);
//! `hpet` or `acpi_pm` make it a slow device access or a system call. The kernel falls back
//! from tsc when it distrusts it at boot; writing the file switches at once, but only
//! `clocksource=tsc` on the kernel command line survives a reboot.

use std::path::Path;

use super::{fs::Fs, Finding, Fix};

const DIR: &str = "/sys/devices/system/clocksource/clocksource0";

pub(super) fn check(fs: &dyn Fs) -> Vec<Finding> {
    let setting = "clocksource";
    let current_path = Path::new(DIR).join("current_clocksource");
    let current = match fs.read(&current_path) {
        Ok(c) => c,
        Err(e) => return vec![Finding::failed("clock", setting, e.to_string())],
    };
    if current == "tsc" {
        return vec![Finding::ok("clock", setting, "is tsc")];
    }
    let available = match fs.read(&Path::new(DIR).join("available_clocksource")) {
        Ok(a) => a,
        Err(e) => return vec![Finding::failed("clock", setting, e.to_string())],
    };
    if !available.split_whitespace().any(|c| c == "tsc") {
        let detail = format!("is {current}; tsc not offered (not x86, or a VM without a stable TSC): nothing to do");
        return vec![Finding::ok("clock", setting, detail)];
    }
    let fix = Fix::Write { path: current_path, value: "tsc".into() };
    let mut finding = Finding::change("clock", setting, format!("is {current}, want tsc"), vec![fix]);
    let on_cmdline =
        fs.read(Path::new("/proc/cmdline")).is_ok_and(|c| c.split_whitespace().any(|w| w == "clocksource=tsc"));
    if !on_cmdline {
        finding.reboot = true;
        finding.caveat = Some(
            "to keep it after a reboot, add clocksource=tsc (and tsc=reliable if the kernel marked tsc \
             unstable) to the kernel command line, e.g. GRUB_CMDLINE_LINUX, then update-grub"
                .into(),
        );
    }
    vec![finding]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::testing::Tree;
    use crate::tune::Status;

    const CUR: &str = "sys/devices/system/clocksource/clocksource0/current_clocksource";
    const AVAIL: &str = "sys/devices/system/clocksource/clocksource0/available_clocksource";

    #[test]
    fn hpet_is_switched_to_tsc_and_asks_for_the_command_line() {
        let t = Tree::new();
        t.file(CUR, "hpet");
        t.file(AVAIL, "tsc hpet acpi_pm");
        t.file("proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro");
        let f = check(&t.fs());
        assert_eq!(f[0].status, Status::NeedsChange);
        assert!(f[0].reboot);
        assert_eq!(f[0].fixes, vec![Fix::Write { path: Path::new("/").join(CUR), value: "tsc".into() }]);
        t.file("proc/cmdline", "ro clocksource=tsc");
        assert!(!check(&t.fs())[0].reboot);
    }

    #[test]
    fn without_tsc_or_already_on_it_nothing_changes() {
        let t = Tree::new();
        t.file(CUR, "arch_sys_counter");
        t.file(AVAIL, "arch_sys_counter");
        let f = check(&t.fs());
        assert_eq!(f[0].status, Status::Ok);
        assert!(f[0].detail.contains("tsc not offered"));
        t.file(CUR, "tsc");
        assert_eq!(check(&t.fs())[0].status, Status::Ok);
    }

    #[test]
    fn a_missing_clocksource_file_fails_naming_it() {
        let t = Tree::new();
        let f = check(&t.fs());
        assert_eq!(f[0].status, Status::Failed);
        assert!(f[0].detail.contains(&t.shown(CUR)), "{}", f[0].detail);
    }
}
