//! Where shards run and how their executors are built: the CPU list (`cpus`, `numa_node`, or
//! every CPU the process may use, checked against what is online and allowed), the NUMA node
//! of each CPU, and the executor settings every shard gets. Reads `/sys` (through a root
//! path, so tests use a fake one); no other I/O.

use std::path::Path;
use std::time::Duration;

use crate::config::{bad, bad_because, format_cpu_list, parse_cpu_list, Config, ConfigError};

/// Memory each executor registers for io_uring; it pins 3× this. glommio's default (10 MiB)
/// trips the usual 8 MiB RLIMIT_MEMLOCK; below 512 KiB executors fail to start.
pub const IO_MEMORY: usize = 512 * 1024;

/// Preemption: glommio's 100 ms default lets background work stall the network, but at
/// 1–2 ms glommio 0.9 sometimes loses a wake-up and an executor sleeps in io_uring_enter with
/// work pending forever (a known bug, fixed only in an unreleased fork). Measured here with
/// 4 brokers starting in parallel: 2 ms hung 3 of 400 starts, 5 ms 1 of 400, 10 ms and
/// 20 ms none of 600. 10 ms keeps a background task from holding the CPU for long.
pub const PREEMPT: Duration = Duration::from_millis(10);

/// The CPUs the kernel reports online (`<sys>/devices/system/cpu/online`); `None` when it
/// does not say (no sysfs, as in some sandboxes).
pub fn online_cpus(sys_root: &Path) -> Option<Vec<usize>> {
    let text = std::fs::read_to_string(sys_root.join("devices/system/cpu/online")).ok()?;
    parse_cpu_list(text.trim()).ok()
}

/// CPU → NUMA node, from `<sys>/devices/system/node/nodeN/cpulist`. Empty when the machine
/// (or the kernel build) exposes no NUMA topology.
pub fn numa_nodes(sys_root: &Path) -> std::collections::BTreeMap<usize, u32> {
    let mut map = std::collections::BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(sys_root.join("devices/system/node")) else { return map };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(node) = name.to_str().and_then(|n| n.strip_prefix("node")).and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(entry.path().join("cpulist")) else { continue };
        // A node without CPUs (memory only) has an empty list.
        for cpu in parse_cpu_list(text.trim()).unwrap_or_default() {
            map.insert(cpu, node);
        }
    }
    map
}

/// The CPUs the shards run on: `cpus`, or `numa_node`'s CPUs, or all CPUs the process may use.
/// Always checked against the CPUs the kernel has online and the process's allowed set
/// (cgroup cpuset / sched_setaffinity): a CPU named in `cpus` that is offline or not allowed
/// is an error naming it; `numa_node` and the default quietly use the usable part.
pub fn resolve_cpus(cfg: &Config, allowed: &[usize], sys_root: &Path) -> Result<Vec<usize>, ConfigError> {
    if allowed.is_empty() {
        return Err(bad("cpus", "the process is allowed no CPU (check its cpuset/affinity)"));
    }
    let online = online_cpus(sys_root);
    let is_online = |c: &usize| online.as_ref().is_none_or(|o| o.contains(c));
    let wanted = if let Some(list) = &cfg.cpus {
        let cpus = parse_cpu_list(list).map_err(|e| bad_because("cpus", e.to_string(), e))?;
        let offline: Vec<usize> = cpus.iter().copied().filter(|c| !is_online(c)).collect();
        if !offline.is_empty() {
            let online = online.as_deref().map_or_else(String::new, format_cpu_list);
            return Err(bad(
                "cpus",
                format!(
                    "CPU {} is not online (online: {online}): leave it out of `cpus`, or bring it online with \
                     `echo 1 > /sys/devices/system/cpu/cpuN/online`",
                    format_cpu_list(&offline)
                ),
            ));
        }
        cpus
    } else if let Some(node) = cfg.numa_node {
        let path = sys_root.join(format!("devices/system/node/node{node}/cpulist"));
        let text = std::fs::read_to_string(&path).map_err(|e| {
            bad_because("numa_node", format!("NUMA node {node} not found ({}: {e})", path.display()), e)
        })?;
        let node_cpus = parse_cpu_list(text.trim()).map_err(|e| bad_because("numa_node", e.to_string(), e))?;
        let usable: Vec<usize> = node_cpus.into_iter().filter(|c| is_online(c) && allowed.contains(c)).collect();
        if usable.is_empty() {
            return Err(bad(
                "numa_node",
                format!(
                    "none of node {node}'s CPUs is online and in this process's allowed set {}",
                    format_cpu_list(allowed)
                ),
            ));
        }
        usable
    } else {
        let usable: Vec<usize> = allowed.iter().copied().filter(is_online).collect();
        if usable.is_empty() {
            return Err(bad("cpus", "none of the CPUs this process may use is online"));
        }
        usable
    };
    let refused: Vec<usize> = wanted.iter().copied().filter(|c| !allowed.contains(c)).collect();
    if !refused.is_empty() {
        return Err(bad(
            "cpus",
            format!(
                "CPU {} is not in this process's allowed set {} (cgroup cpuset or taskset): \
                 choose CPUs from that set",
                format_cpu_list(&refused),
                format_cpu_list(allowed)
            ),
        ));
    }
    Ok(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_outside_the_allowed_set_are_refused() {
        let c = Config { cpus: Some("0-3".into()), ..Config::default() };
        let e = resolve_cpus(&c, &[0, 1], Path::new("/nonexistent")).unwrap_err();
        assert!(e.problem.contains("CPU 2"), "{e}");
        assert_eq!(resolve_cpus(&Config::default(), &[0, 1], Path::new("/x")).unwrap(), vec![0, 1]);
    }

    #[test]
    fn numa_node_uses_its_allowed_cpus() {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("devices/system/node/node1");
        std::fs::create_dir_all(&node).unwrap();
        std::fs::write(node.join("cpulist"), "2-5\n").unwrap();
        let c = Config { numa_node: Some(1), ..Config::default() };
        assert_eq!(resolve_cpus(&c, &[0, 1, 2, 3], dir.path()).unwrap(), vec![2, 3]);
        assert!(resolve_cpus(&c, &[0, 1], dir.path()).is_err());
        let c = Config { numa_node: Some(7), ..Config::default() };
        assert_eq!(resolve_cpus(&c, &[0], dir.path()).unwrap_err().setting, "numa_node");
    }

    /// A fake sysfs: node 0 has CPUs 0-3, node 1 CPUs 4-7, CPUs 3 and 6 are offline.
    fn two_node_sysfs() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (node, cpus) in [(0, "0-3"), (1, "4-7")] {
            let d = dir.path().join(format!("devices/system/node/node{node}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cpulist"), format!("{cpus}\n")).unwrap();
        }
        // A memory-only node lists no CPUs.
        let d = dir.path().join("devices/system/node/node2");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cpulist"), "\n").unwrap();
        let d = dir.path().join("devices/system/cpu");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("online"), "0-2,4-5,7\n").unwrap();
        dir
    }

    #[test]
    fn offline_cpus_named_in_cpus_are_refused_by_number() {
        let sys = two_node_sysfs();
        let allowed: Vec<usize> = (0..8).collect();
        let c = Config { cpus: Some("2-6".into()), ..Config::default() };
        let e = resolve_cpus(&c, &allowed, sys.path()).unwrap_err();
        assert_eq!(e.setting, "cpus");
        assert!(e.problem.contains("CPU 3,6 is not online"), "{e}");
        assert!(e.problem.contains("online: 0-2,4-5,7"), "{e}");
        let c = Config { cpus: Some("4,5".into()), ..Config::default() };
        assert_eq!(resolve_cpus(&c, &allowed, sys.path()).unwrap(), vec![4, 5]);
    }

    #[test]
    fn numa_node_and_the_default_skip_offline_and_disallowed_cpus() {
        let sys = two_node_sysfs();
        // A cpuset that allows 1-5 only (CPU 3 is also offline).
        let allowed = [1, 2, 3, 4, 5];
        let node0 = Config { numa_node: Some(0), ..Config::default() };
        assert_eq!(resolve_cpus(&node0, &allowed, sys.path()).unwrap(), vec![1, 2]);
        let node1 = Config { numa_node: Some(1), ..Config::default() };
        assert_eq!(resolve_cpus(&node1, &allowed, sys.path()).unwrap(), vec![4, 5]);
        assert_eq!(resolve_cpus(&Config::default(), &allowed, sys.path()).unwrap(), vec![1, 2, 4, 5]);
        // Node 1's only allowed CPUs are 6 (offline) and 7: 7 remains.
        assert_eq!(resolve_cpus(&node1, &[6, 7], sys.path()).unwrap(), vec![7]);
        let e = resolve_cpus(&node1, &[0, 1, 6], sys.path()).unwrap_err();
        assert_eq!(e.setting, "numa_node");
        let memory_only = Config { numa_node: Some(2), ..Config::default() };
        assert!(resolve_cpus(&memory_only, &allowed, sys.path()).is_err());
        // Allowed but outside the cpuset: named, with the set to choose from.
        let c = Config { cpus: Some("0-2".into()), ..Config::default() };
        let e = resolve_cpus(&c, &allowed, sys.path()).unwrap_err();
        assert!(e.problem.contains("CPU 0 is not in this process's allowed set 1-5"), "{e}");
    }

    #[test]
    fn numa_topology_maps_each_cpu_to_its_node() {
        let sys = two_node_sysfs();
        let nodes = numa_nodes(sys.path());
        assert_eq!(nodes.get(&0), Some(&0));
        assert_eq!(nodes.get(&6), Some(&1));
        assert_eq!(nodes.len(), 8);
        assert!(numa_nodes(Path::new("/nonexistent")).is_empty());
        assert_eq!(online_cpus(sys.path()), Some(vec![0, 1, 2, 4, 5, 7]));
    }
}
