//! Sending a file region to a socket without copying it through user space. glommio has no
//! sendfile, so the socket is non-blocking and `sendfile(2)` is called directly. When the
//! socket buffer is full (EAGAIN) the task must wait until the socket is writable, and
//! glommio only offers that wait inside its own async write: so the next `WAIT_CHUNK` bytes
//! of the region are read and written through it, which parks the task until the socket
//! takes them, and sendfile resumes after them. (A single byte there would also wait, but
//! would put a one-byte segment on the wire for every full buffer.)
//!
//! A region not in the page cache would make sendfile block the whole shard on disk reads
//! (tens of ms), so such ranges are first read into the cache on a blocking thread.

use std::io;
use std::os::fd::RawFd;
use std::os::unix::fs::FileExt;

use futures_lite::{AsyncWrite, AsyncWriteExt};

use crate::protocol::response::FileRegion;
use crate::sys;

const CHUNK: usize = 1 << 20;
/// Bytes written through glommio's async write when the socket buffer is full.
const WAIT_CHUNK: usize = 64 << 10;

pub async fn send_region<W: AsyncWrite + Unpin>(w: &mut W, socket: RawFd, region: &FileRegion) -> io::Result<()> {
    if !sys::resident(&region.file, region.pos, region.len as u64) {
        let file = region.file.clone();
        let (pos, len) = (region.pos, region.len as u64);
        glommio::executor()
            .spawn_blocking(move || {
                let mut scratch = vec![0u8; CHUNK.min(len as usize)];
                let mut at = pos;
                while at < pos + len {
                    let n = scratch.len().min((pos + len - at) as usize);
                    match file.read_at(&mut scratch[..n], at) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => at += n as u64,
                    }
                }
            })
            .await;
    }
    let end = region.pos + region.len as u64;
    let mut pos = region.pos;
    while pos < end {
        let want = CHUNK.min((end - pos) as usize);
        match sys::sendfile(socket, &region.file, pos, want) {
            Ok(0) => {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "segment file ended before the region did"));
            }
            Ok(n) => pos += n as u64,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let n = WAIT_CHUNK.min((end - pos) as usize);
                let mut piece = vec![0u8; n];
                region.file.read_exact_at(&mut piece, pos)?;
                w.write_all(&piece).await?;
                pos += n as u64;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The copying path: read the region into memory, then write it. Used only when
/// `zero_copy_fetch` is off, to measure what sendfile saves.
pub async fn copy_region<W: AsyncWrite + Unpin>(w: &mut W, region: &FileRegion) -> io::Result<()> {
    let mut buf = vec![0u8; CHUNK.min(region.len as usize)];
    let end = region.pos + region.len as u64;
    let mut pos = region.pos;
    while pos < end {
        let n = buf.len().min((end - pos) as usize);
        region.file.read_exact_at(&mut buf[..n], pos)?;
        w.write_all(&buf[..n]).await?;
        pos += n as u64;
    }
    Ok(())
}
