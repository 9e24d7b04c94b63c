//! Printing findings: an aligned table for people, JSON for scripts.

use serde::Serialize;

use super::{Finding, Status};

/// What a run was about, printed with its findings.
#[derive(Debug, Serialize)]
pub(super) struct Report<'a> {
    pub mode: &'static str,
    pub root: String,
    pub cpus: String,
    pub data_dir: String,
    /// Every finding is ok (check), or none failed (apply).
    pub ok: bool,
    pub findings: &'a [Finding],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script: Option<&'a str>,
}

pub(super) fn json(r: &Report) -> String {
    serde_json::to_string_pretty(r).expect("findings serialize")
}

pub(super) fn table(findings: &[Finding]) -> String {
    let head = ("TUNER", "SETTING", "STATUS");
    let w0 = findings.iter().map(|f| f.tuner.len()).chain([head.0.len()]).max().unwrap_or(0);
    let w1 = findings.iter().map(|f| f.setting.len()).chain([head.1.len()]).max().unwrap_or(0);
    let w2 = findings.iter().map(|f| f.status.as_str().len()).chain([head.2.len()]).max().unwrap_or(0);
    let mut out = format!("{:w0$}  {:w1$}  {:w2$}  DETAIL\n", head.0, head.1, head.2);
    for f in findings {
        out.push_str(&format!("{:w0$}  {:w1$}  {:w2$}  {}\n", f.tuner, f.setting, f.status.as_str(), f.detail));
    }
    out
}

/// "5 ok, 2 needs-change, 1 failed"
pub(super) fn counts(findings: &[Finding]) -> String {
    let all = [Status::Ok, Status::NeedsChange, Status::Changed, Status::NeedsReboot, Status::Failed];
    all.iter()
        .map(|s| (s, findings.iter().filter(|f| f.status == *s).count()))
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{n} {}", s.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_aligns_columns_and_counts_sum_up() {
        let f = vec![
            Finding::ok("sysctl", "vm.swappiness", "is 1 (want <= 1)"),
            Finding::failed("clock", "clocksource", "cannot read"),
        ];
        let t = table(&f);
        let lines: Vec<&str> = t.lines().collect();
        let col = lines[0].find("STATUS").unwrap();
        assert_eq!(lines[1].find("ok").unwrap(), col);
        assert_eq!(lines[2].find("failed").unwrap(), col);
        assert_eq!(counts(&f), "1 ok, 1 failed");
    }
}
