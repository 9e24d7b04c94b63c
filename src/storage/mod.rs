//! The one way the broker touches its data directory: every open, read, write, sync,
//! allocation, truncation, rename and removal of a log, index, snapshot or catalog file goes
//! through here, so that tests can make any of them fail (`faults`) and the rest of the
//! broker handles one kind of error, `io::Error` with the OS's code kept.
//!
//! - Appends go through glommio's buffered files (`open_appender`, `append_at`,
//!   `fdatasync`): the page cache keeps fresh data for fetches. A log that syncs before
//!   every ack opens them with O_DSYNC, so that a write and its sync are one operation, and
//!   one whose fresh data nobody reads soon (a follower replica's) appends with O_DIRECT
//!   instead, past the page cache (`direct`).
//! - Index files are written through memory maps, and a store to a mapped page the file
//!   system cannot back kills the process with SIGBUS. So no mapped page is ever written
//!   before `allocate` has reserved its blocks (ENOSPC then comes back as an error), and
//!   stale entries are cleared with `zero` (a punched hole), never by storing through the map.
//! - Small files are replaced whole, atomically (`write_atomic`).
//! - The last handle on a removed segment is closed on a thread of the shard's own
//!   (`close_in_background`): that close frees the file's cached pages.

mod atomic;
mod closer;
mod direct;
pub mod faults;

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use glommio::io::BufferedFile;

pub use atomic::write_atomic;
pub use closer::close_in_background;
use faults::{hit, Fault, Op};

/// Whether an error means the device is full (ENOSPC, EDQUOT, or a short write, which for a
/// buffered file means the same): writes may succeed again once space is freed.
pub fn is_no_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
        || matches!(e.kind(), io::ErrorKind::StorageFull | io::ErrorKind::WriteZero)
}

pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    hit(Op::Open, dir)?;
    std::fs::create_dir_all(dir)
}

/// The names of the entries of `dir`.
pub fn list(dir: &Path) -> io::Result<Vec<PathBuf>> {
    hit(Op::Read, dir)?;
    std::fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect()
}

/// Opens a file for reading and writing, creating it if needed.
pub fn open_rw(path: &Path) -> io::Result<File> {
    hit(Op::Open, path)?;
    std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)
}

/// Like `open_rw`, but a file it creates is readable by its owner only (it will hold
/// secrets: the metadata log carries SCRAM keys).
pub fn open_private(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    hit(Op::Open, path)?;
    std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(path)
}

/// A whole file; `Ok(None)` if it does not exist.
pub fn read(path: &Path) -> io::Result<Option<Vec<u8>>> {
    hit(Op::Read, path)?;
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Opens a file to be read once through, with O_DIRECT: the device fills the reader's
/// (aligned) buffer, no page-cache copy passes through the CPU, and the page cache is left to
/// those who read the file again. Buffered where the file system refuses O_DIRECT (EINVAL).
pub fn open_direct(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    hit(Op::Open, path)?;
    match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => File::open(path),
        other => other,
    }
}

/// One read at `pos`: fewer bytes than `buf` holds only at the end of the file.
pub fn read_at(file: &File, path: &Path, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    hit(Op::Read, path)?;
    file.read_at(buf, pos)
}

pub fn read_exact_at(file: &File, path: &Path, buf: &mut [u8], pos: u64) -> io::Result<()> {
    hit(Op::Read, path)?;
    file.read_exact_at(buf, pos)
}

/// Writes a small file whole (not atomically: for markers whose absence is safe).
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    hit(Op::Write, path)?;
    std::fs::write(path, bytes)
}

/// Writes all of `bytes` at `pos`.
pub fn write_at(file: &File, path: &Path, bytes: &[u8], pos: u64) -> io::Result<()> {
    match faults::check(Op::Write, path) {
        None => file.write_all_at(bytes, pos),
        Some(Fault::Torn { keep }) => {
            file.write_all_at(&bytes[..keep.min(bytes.len())], pos)?;
            Err(Fault::NoSpace.error())
        }
        Some(f) => Err(f.error()),
    }
}

pub fn set_len(file: &File, path: &Path, len: u64) -> io::Result<()> {
    hit(Op::Truncate, path)?;
    file.set_len(len)
}

pub fn sync(file: &File, path: &Path) -> io::Result<()> {
    hit(Op::Sync, path)?;
    file.sync_all()
}

/// fsyncs a directory, so that the names created or removed in it survive a crash.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    hit(Op::Sync, dir)?;
    File::open(dir)?.sync_all()
}

/// Tells the kernel that `len` bytes at `offset` will not be read soon: what of them the page
/// cache holds clean is dropped, and writeback of what is dirty is started. Advice only: it
/// changes no byte of the file.
pub fn drop_cached(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use nix::fcntl::{posix_fadvise, PosixFadviseAdvice};
    let (offset, len) = (offset as libc::off_t, len as libc::off_t);
    posix_fadvise(file.as_raw_fd(), offset, len, PosixFadviseAdvice::POSIX_FADV_DONTNEED).map_err(io::Error::from)
}

/// Reserves the blocks of `len` bytes at `offset` (the file grows if shorter), so that later
/// stores through a map cannot find the device full.
pub fn allocate(file: &File, path: &Path, offset: u64, len: u64) -> io::Result<()> {
    hit(Op::Allocate, path)?;
    if len == 0 {
        return Ok(());
    }
    let (offset, len) = (offset as libc::off_t, len as libc::off_t);
    nix::fcntl::posix_fallocate(file.as_raw_fd(), offset, len).map_err(io::Error::from)
}

/// Makes `len` bytes at `offset` read as zeros without storing anything: the blocks are
/// released (a punched hole), so this needs no free space. File systems without hole
/// punching get the zeros written instead.
pub fn zero(file: &File, path: &Path, offset: u64, len: u64) -> io::Result<()> {
    hit(Op::Write, path)?;
    if len == 0 {
        return Ok(());
    }
    use nix::fcntl::FallocateFlags;
    let flags = FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE;
    match nix::fcntl::fallocate(file.as_raw_fd(), flags, offset as libc::off_t, len as libc::off_t) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EOPNOTSUPP) => file.write_all_at(&vec![0u8; len as usize], offset),
        Err(e) => Err(e.into()),
    }
}

/// Renames `from` to `to` (replacing it), atomically; durable once the directory is synced.
pub fn rename(from: &Path, to: &Path) -> io::Result<()> {
    hit(Op::Rename, to)?;
    std::fs::rename(from, to)
}

pub fn remove_file(path: &Path) -> io::Result<()> {
    hit(Op::Remove, path)?;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

pub fn remove_dir_all(dir: &Path) -> io::Result<()> {
    hit(Op::Remove, dir)?;
    std::fs::remove_dir_all(dir)
}

/// How a segment file is appended to (`open_appender`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendMode {
    /// Through the page cache; made durable by a later `fdatasync`.
    Cached,
    /// Through the page cache with O_DSYNC: each write returns once its bytes (and any
    /// metadata needed to read them back) are on stable storage, as if an fdatasync of its
    /// range followed it. For a log that syncs before every ack: io_uring hands each buffered
    /// write and each fdatasync on ext4 to an io-wq worker thread, and one operation instead
    /// of two halves those hand-offs, the context switches and wake-ups that were most of a
    /// replicated log's cost per write at a moderate rate
    /// (bench/results/2026-12-05-cluster-write-path.md).
    CachedDurable,
    /// With O_DIRECT and O_DSYNC, past the page cache (see `direct`): durable as
    /// `CachedDurable`, at a fraction of its CPU, but a read of what was written goes to the
    /// disk. For a log that syncs before every ack and whose fresh data nobody reads soon.
    Direct,
}

/// A segment file open for appends.
pub struct Appender {
    file: AppendFile,
    mode: AppendMode,
    /// What `open_appender` was asked for (`mode` is `CachedDurable` where O_DIRECT was refused).
    asked: AppendMode,
}

enum AppendFile {
    Cached(BufferedFile),
    Direct(direct::DirectFile),
}

impl Appender {
    /// Whether every write returns only once it is durable.
    pub fn writes_durably(&self) -> bool {
        self.mode != AppendMode::Cached
    }

    /// How it appends: `CachedDurable` where `Direct` was asked and the file system refuses
    /// O_DIRECT.
    pub fn mode(&self) -> AppendMode {
        self.mode
    }

    /// The mode it was opened for.
    pub fn asked(&self) -> AppendMode {
        self.asked
    }
}

/// Opens a segment file, which exists, for appends in `mode`. Where the file system refuses
/// O_DIRECT (EINVAL), `Direct` falls back to `CachedDurable`: as durable, through the page cache.
pub async fn open_appender(path: &Path, mode: AppendMode) -> io::Result<Appender> {
    hit(Op::Open, path)?;
    if mode == AppendMode::Direct {
        match direct::DirectFile::open(path).await {
            Ok(f) => return Ok(Appender { file: AppendFile::Direct(f), mode, asked: mode }),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                tracing::debug!(path = %path.display(), "O_DIRECT refused, appending through the page cache: {e}");
                let cached = open_cached(path, AppendMode::CachedDurable).await?;
                return Ok(Appender { asked: mode, ..cached });
            }
            Err(e) => return Err(e),
        }
    }
    open_cached(path, mode).await
}

async fn open_cached(path: &Path, mode: AppendMode) -> io::Result<Appender> {
    let flags = if mode == AppendMode::Cached { 0 } else { libc::O_DSYNC };
    let file = glommio::io::OpenOptions::new().write(true).custom_flags(flags).buffered_open(path).await?;
    Ok(Appender { file: AppendFile::Cached(file), mode, asked: mode })
}

/// What one append writes: one buffer, or batches back to back. A direct appender copies
/// the batches straight into its aligned buffer, where joining them first was a second copy
/// of every byte a follower writes; a cached one joins them into the one buffer its write
/// takes.
pub enum Chunk {
    Joined(Vec<u8>),
    Batches(Vec<Bytes>),
}

impl Chunk {
    pub fn len(&self) -> usize {
        match self {
            Chunk::Joined(b) => b.len(),
            Chunk::Batches(bs) => bs.iter().map(Bytes::len).sum(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes the first `len` bytes off as a chunk of their own: the first `batches` batches
    /// of a `Batches` chunk, which hold exactly that many bytes.
    pub fn split_front(&mut self, len: usize, batches: usize) -> Chunk {
        match self {
            Chunk::Joined(b) => {
                let rest = b.split_off(len);
                Chunk::Joined(std::mem::replace(b, rest))
            }
            Chunk::Batches(bs) => {
                let front: Vec<Bytes> = bs.drain(..batches).collect();
                debug_assert_eq!(front.iter().map(Bytes::len).sum::<usize>(), len);
                Chunk::Batches(front)
            }
        }
    }

    /// The first `keep` bytes (a torn write's).
    fn truncate(&mut self, keep: usize) {
        match self {
            Chunk::Joined(b) => b.truncate(keep),
            Chunk::Batches(bs) => {
                let mut left = keep;
                bs.retain_mut(|b| {
                    let take = b.len().min(left);
                    b.truncate(take);
                    left -= take;
                    take > 0
                });
            }
        }
    }

    fn into_vec(self) -> Vec<u8> {
        match self {
            Chunk::Joined(b) => b,
            Chunk::Batches(bs) => bs.concat(),
        }
    }
}

impl From<Vec<u8>> for Chunk {
    fn from(b: Vec<u8>) -> Chunk {
        Chunk::Joined(b)
    }
}

/// Writes the whole chunk at `pos`, the end of the file's data. glommio consumes the
/// buffer, so a short write (for a buffered file: the disk or a file-size limit is full) is
/// reported as an error rather than retried; whatever part landed is the caller's to cut
/// (see `is_no_space`).
///
/// A cached write goes through io_uring, and on ext4 every buffered write is handed to an
/// io-wq worker thread, which does the page-cache copy: ext4 refuses non-blocking buffered
/// writes (RWF_NOWAIT gives EOPNOTSUPP; XFS takes them but gives EAGAIN on most appends,
/// which need block allocation). A plain pwrite(2) on the shard's thread instead measured 6%
/// more produce throughput with the broker on a core of its own and 10% more (noisy) sharing
/// cores (2026-12-01, `bench/run.sh ab`), and was not kept: a write the kernel holds — dirty
/// page throttling, a journal commit, a page under writeback — would then stop the whole
/// shard, every connection and partition on it, instead of one worker.
pub async fn append_at(file: &Appender, path: &Path, chunk: Chunk, pos: u64) -> io::Result<()> {
    let len = chunk.len();
    let chunk = match faults::check(Op::Write, path) {
        None => chunk,
        Some(Fault::Torn { keep }) if keep < len => {
            let mut prefix = chunk;
            prefix.truncate(keep);
            prefix
        }
        Some(f) => return Err(f.error()),
    };
    let wanted = chunk.len();
    let n = match &file.file {
        AppendFile::Cached(f) => f.write_at(chunk.into_vec(), pos).await?,
        AppendFile::Direct(f) => {
            match &chunk {
                Chunk::Joined(b) => f.append(path, &[b.as_slice()], pos).await?,
                Chunk::Batches(bs) => f.append(path, &bs.iter().map(|b| &b[..]).collect::<Vec<_>>(), pos).await?,
            }
            wanted
        }
    };
    if file.writes_durably() {
        // The sync a durable write makes is where a failing device reports (EIO).
        hit(Op::Sync, path)?;
    }
    if n != len {
        let reason = format!("short write ({n} of {len} bytes) at {}: is the data disk full?", path.display());
        return Err(io::Error::new(io::ErrorKind::WriteZero, reason));
    }
    Ok(())
}

/// Writes zeros over [from, to), past the end of the file's data: what a log writes ahead so
/// that its appends overwrite blocks the file system has already written (see `segment`). A
/// direct appender writes only the whole blocks of the range.
pub async fn write_zeros(file: &Appender, path: &Path, from: u64, to: u64) -> io::Result<()> {
    match &file.file {
        AppendFile::Cached(_) => append_at(file, path, vec![0; (to - from) as usize].into(), from).await,
        AppendFile::Direct(f) => {
            hit(Op::Write, path)?;
            f.write_zeros(path, from, to).await
        }
    }
}

pub async fn fdatasync(file: &Appender, path: &Path) -> io::Result<()> {
    hit(Op::Sync, path)?;
    match &file.file {
        AppendFile::Cached(f) => Ok(f.fdatasync().await?),
        AppendFile::Direct(f) => f.fdatasync().await,
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::*;

    fn status_flags(a: &Appender) -> i32 {
        let fd = match &a.file {
            AppendFile::Cached(f) => f.as_raw_fd(),
            AppendFile::Direct(_) => panic!("a cached appender"),
        };
        nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL).unwrap()
    }

    #[test]
    fn a_durable_appender_is_open_with_o_dsync_and_a_plain_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        std::fs::write(&path, b"").unwrap();
        glommio::LocalExecutorBuilder::default().make().unwrap().run(async move {
            let durable = open_appender(&path, AppendMode::CachedDurable).await.unwrap();
            assert!(durable.writes_durably());
            assert_ne!(status_flags(&durable) & libc::O_DSYNC, 0);
            append_at(&durable, &path, b"one".to_vec().into(), 0).await.unwrap();
            let plain = open_appender(&path, AppendMode::Cached).await.unwrap();
            assert!(!plain.writes_durably());
            assert_eq!(status_flags(&plain) & libc::O_DSYNC, 0);
            append_at(&plain, &path, b"two".to_vec().into(), 3).await.unwrap();
            fdatasync(&plain, &path).await.unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), b"onetwo");
        });
    }
}
