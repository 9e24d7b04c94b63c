//! The only module allowed `unsafe`: raw file descriptors, sendfile, memory maps and page-cache
//! residency. Everything here is a thin, owning wrapper with the invariant stated beside each
//! `unsafe` block, so the rest of the broker stays safe code.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

/// Puts a socket in non-blocking mode so `sendfile` returns EAGAIN instead of blocking the
/// shard. glommio itself sends with MSG_DONTWAIT and polls through the ring, so its own I/O on
/// the same socket is unaffected.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    // SAFETY: the caller passes the fd of a socket it owns for the duration of this call.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let flags = fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL).map_err(io::Error::from)?;
    let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
    fcntl(fd.as_raw_fd(), FcntlArg::F_SETFL(flags)).map_err(io::Error::from)?;
    Ok(())
}

/// Sets a socket's SO_SNDBUF and SO_RCVBUF where given (the kernel doubles each value for
/// its bookkeeping and stops autotuning that direction).
pub fn set_socket_buffers(fd: RawFd, send: Option<usize>, receive: Option<usize>) -> io::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt};
    // SAFETY: the caller passes the fd of a socket it owns for the duration of this call.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    if let Some(bytes) = send {
        setsockopt(&fd, sockopt::SndBuf, &bytes).map_err(io::Error::from)?;
    }
    if let Some(bytes) = receive {
        setsockopt(&fd, sockopt::RcvBuf, &bytes).map_err(io::Error::from)?;
    }
    Ok(())
}

/// Turns on TCP keepalive probes: after `idle` without traffic, a probe every `interval`,
/// and the connection fails after `count` unanswered ones (a peer whose host went away
/// without closing it).
pub fn set_keepalive(
    fd: RawFd,
    idle: std::time::Duration,
    interval: std::time::Duration,
    count: u32,
) -> io::Result<()> {
    // SAFETY: the caller passes the fd of a socket it owns for the duration of this call.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let probes = socket2::TcpKeepalive::new().with_time(idle).with_interval(interval).with_retries(count);
    socket2::SockRef::from(&fd).set_tcp_keepalive(&probes)
}

/// Hands a bound, listening socket to the shard's executor as its listener (glommio's own
/// `bind` always sets SO_REUSEPORT; this takes a socket bound with the options we chose).
pub fn glommio_listener(listening: socket2::Socket) -> glommio::net::TcpListener {
    use std::os::fd::{FromRawFd, IntoRawFd};
    // SAFETY: `into_raw_fd` gives up the socket's only owner, so the listener owns the fd alone.
    unsafe { glommio::net::TcpListener::from_raw_fd(listening.into_raw_fd()) }
}

/// One `sendfile` call: copies up to `count` bytes of `file` from `offset` to the socket
/// inside the kernel. Returns bytes sent; `WouldBlock` when the socket buffer is full.
pub fn sendfile(socket: RawFd, file: &File, offset: u64, count: usize) -> io::Result<usize> {
    // SAFETY: `socket` is an open socket owned by the calling connection for this call.
    let out = unsafe { BorrowedFd::borrow_raw(socket) };
    let mut off = offset as i64;
    loop {
        match nix::sys::sendfile::sendfile64(out, file.as_fd(), Some(&mut off), count) {
            Ok(n) => return Ok(n),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(io::Error::from(e)),
        }
    }
}

/// Whether every page of `file[offset..offset+len]` is in the page cache, by `cachestat(2)`
/// (Linux 6.5+). On older kernels this answers `true`: the caller then sends on the reactor,
/// as a broker without the check would.
pub fn resident(file: &File, offset: u64, len: u64) -> bool {
    if len == 0 {
        return true;
    }
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    const SYS_CACHESTAT: libc::c_long = 451;
    let page = 4096u64;
    let first = offset / page * page;
    let range = Range { off: first, len: offset + len - first };
    let mut stat = Stat::default();
    // SAFETY: cachestat reads `range` and writes `stat`, both live, correctly laid out
    // (`struct cachestat_range` / `struct cachestat` of the kernel ABI) for the call.
    let rc =
        unsafe { libc::syscall(SYS_CACHESTAT, file.as_raw_fd(), &range as *const Range, &mut stat as *mut Stat, 0) };
    if rc != 0 {
        return true;
    }
    let pages = range.len.div_ceil(page);
    stat.nr_cache >= pages
}

/// A file mapped read-write into memory, for the sparse offset and time indexes. The map is
/// private to the partition's home shard; the file behind it is never truncated while mapped
/// (see `log::index`).
pub struct MappedFile {
    map: memmap2::MmapMut,
}

impl MappedFile {
    /// Maps the first `len` bytes of `file` (which must already be at least that long).
    pub fn map(file: &File, len: usize) -> io::Result<MappedFile> {
        if len == 0 {
            return Ok(MappedFile { map: memmap2::MmapMut::map_anon(0)? });
        }
        // SAFETY: the index file is owned by one shard, which never truncates it below `len`
        // while this map lives; no other process is expected to modify the data directory.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map_mut(file)? };
        // No readahead: an index is written a few bytes at a time, and a fault on its sparse
        // file otherwise read ahead (zero-filling) large folios it would not touch for a long
        // time. With 3,000 partitions that zeroing was half the broker's CPU time and cut
        // produce throughput from 444k to 6k records/s (bench/results/2026-12-01-scale.md).
        map.advise(memmap2::Advice::Random)?;
        Ok(MappedFile { map })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }

    /// Writes dirty pages back (msync), for a clean shutdown or a segment roll.
    pub fn flush(&self) -> io::Result<()> {
        self.map.flush()
    }
}

/// The CPUs this process may run on (sched_getaffinity, which reflects the cgroup cpuset).
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).map_err(io::Error::from)?;
    Ok((0..nix::sched::CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false)).collect())
}

/// RLIMIT_MEMLOCK soft limit in bytes (None when unlimited), for io_uring startup advice.
pub fn memlock_limit() -> Option<u64> {
    use nix::sys::resource::{getrlimit, Resource};
    match getrlimit(Resource::RLIMIT_MEMLOCK) {
        Ok((soft, _)) if soft != nix::sys::resource::RLIM_INFINITY => Some(soft),
        _ => None,
    }
}

/// Shuts a socket down in both directions, waking any task blocked reading it.
pub fn shutdown(fd: RawFd) -> io::Result<()> {
    nix::sys::socket::shutdown(fd, nix::sys::socket::Shutdown::Both).map_err(io::Error::from)
}

/// Sets the calling thread's nice value (Linux keeps one per thread, so the rest of the
/// process keeps its own): 19 lets the thread run on what the CPU's other threads leave.
pub fn nice_this_thread(nice: i32) -> io::Result<()> {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    // SAFETY: setpriority takes plain integers and touches no memory of ours.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets the calling thread's `nice` and asks for the shortest time slice the scheduler takes,
/// 0.1 ms (a slice of a thread's own: Linux 6.12 and later; earlier kernels keep the default).
/// Under EEVDF a thread that wakes on a CPU where another runs may wait until the running
/// one's slice is used up (1.4 ms by default on two CPUs, up to 2.8 ms on more), whatever
/// the running thread's nice: a nice-19 cleaner kept the shard it shares a core with waiting
/// 121 µs per wake-up on average, against 89 µs with the short slice and 63 µs with no
/// cleaner running (bench/results/2026-12-07-cleaner-default-limit.md).
pub fn short_slice_this_thread(nice: i32) -> io::Result<()> {
    /// `struct sched_attr`, its first version (48 bytes).
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice,
        priority: 0,
        runtime: 100_000,
        deadline: 0,
        period: 0,
    };
    // SAFETY: the kernel reads `size` bytes of `attr`, which outlives the call; pid 0 is the
    // calling thread.
    if unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Starts a thread beside the calling one, named after it with `-{role}`, at nice 19 with
/// the shortest slice: it inherits the caller's CPU placement (a shard's core) and runs on
/// what the shard leaves of it, holding a waking shard up for less than the default slice
/// would. The shard's cleaner and its file closer are such threads.
pub fn spawn_niced_beside(role: &str, body: impl FnOnce() + Send + 'static) -> io::Result<()> {
    let name = std::thread::current().name().map_or(role.to_string(), |n| format!("{n}-{role}"));
    let thread = name.clone();
    std::thread::Builder::new().name(name).spawn(move || {
        if let Err(e) = short_slice_this_thread(19) {
            tracing::debug!("thread {thread}: no short slice ({e}); nice 19 alone");
            if let Err(e) = nice_this_thread(19) {
                tracing::warn!("thread {thread} runs at the priority of the thread that started it: {e}");
            }
        }
        body();
    })?;
    Ok(())
}

/// The wall clock, ms since the Unix epoch (0 if the clock is before it): record and batch
/// timestamps, retention and offset expiry.
pub fn unix_now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    use nix::sys::socket::{getsockopt, sockopt};

    #[test]
    fn index_maps_read_no_pages_ahead() {
        let file = tempfile::tempfile().unwrap();
        file.set_len(1 << 20).unwrap();
        let map = super::MappedFile::map(&file, 1 << 20).unwrap();
        let start = format!("{:x}-", map.bytes().as_ptr() as usize);
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let entry = smaps.split_once(&start).expect("the map is listed in smaps").1;
        let flags = entry.lines().find(|l| l.starts_with("VmFlags:")).expect("VmFlags of the map");
        // "rr": madvise(MADV_RANDOM), no readahead on faults.
        assert!(flags.split_whitespace().any(|f| f == "rr"), "{flags}");
    }

    #[test]
    fn socket_buffers_are_set_where_given_and_kept_where_not() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let receive_before = getsockopt(&s, sockopt::RcvBuf).unwrap();
        super::set_socket_buffers(s.as_raw_fd(), Some(65_536), None).unwrap();
        // Linux doubles the value asked for (its bookkeeping overhead).
        assert_eq!(getsockopt(&s, sockopt::SndBuf).unwrap(), 131_072);
        assert_eq!(getsockopt(&s, sockopt::RcvBuf).unwrap(), receive_before);
        super::set_socket_buffers(s.as_raw_fd(), None, Some(32_768)).unwrap();
        assert_eq!(getsockopt(&s, sockopt::RcvBuf).unwrap(), 65_536);
    }

    /// The kernel's release as (major, minor).
    fn kernel_release() -> (u32, u32) {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut parts = release.trim().split(['.', '-']).map(|p| p.parse().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
    }

    #[test]
    fn a_thread_spawned_beside_runs_at_nice_19_with_the_shortest_slice() {
        let (tx, rx) = std::sync::mpsc::channel();
        super::spawn_niced_beside("test", move || {
            // SAFETY: getpriority of the calling thread (tid) reads no memory of ours.
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
            let sched = std::fs::read_to_string("/proc/thread-self/sched").unwrap();
            tx.send((nice, sched)).unwrap();
        })
        .unwrap();
        let (nice, sched) = rx.recv().unwrap();
        assert_eq!(nice, 19);
        let slice =
            sched.lines().find(|l| l.starts_with("se.slice")).map(|l| l.rsplit(' ').next().unwrap().to_string());
        if kernel_release() >= (6, 12) {
            assert_eq!(slice.as_deref(), Some("100000"), "{sched}");
        } else {
            // Earlier kernels take no slice of a thread's own: the default stays.
            assert_ne!(slice.as_deref(), Some("100000"), "{sched}");
        }
    }
}
