//! A process's CPU time from /proc, so that a run can say what the broker spent on it.
//!
//! `/proc/PID/stat` counts every thread of the process, including those that exited during
//! the run (io_uring's io-wq workers come and go), which per-thread counters would miss.

use std::time::Duration;

/// Ticks per second of `/proc/PID/stat`'s times: USER_HZ, fixed at 100 by the kernel's ABI
/// whatever the kernel's own tick rate.
const USER_HZ: u64 = 100;

/// User plus system time of process `pid` so far; `None` when it cannot be read (the process
/// is gone, or this is not Linux).
pub fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)
}

/// utime + stime (fields 14 and 15) of a `/proc/PID/stat` line. The command name (field 2)
/// is in parentheses and may hold spaces and parentheses itself, so fields are counted from
/// its last `)`.
fn parse_stat(stat: &str) -> Option<Duration> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11); // field 3 is the first after `)`
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 1000 / USER_HZ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_and_system_ticks_add_up_whatever_the_command_name() {
        let line = "4242 (shard 0) (x)) S 1 4242 4242 0 -1 4194560 2600 0 0 0 1234 566 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_stat(line), Some(Duration::from_millis(18_000)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_has_a_cpu_time() {
        let spin = std::time::Instant::now();
        while spin.elapsed() < Duration::from_millis(50) {}
        assert!(process_cpu(std::process::id()).is_some_and(|t| t > Duration::ZERO));
    }
}
