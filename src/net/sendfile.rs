//! Sending a file region to a socket without copying it through user space. glommio has no
//! sendfile, so the socket is non-blocking and `sendfile(2)` is called directly. When the
//! socket buffer is full (EAGAIN) the task must wait until the socket is writable, and
//! glommio only offers that wait inside its own async write: so the next `WAIT_CHUNK` bytes
//! of the region are read and written through it, which parks the task until the socket
//! takes them, and sendfile resumes after them. (A single byte there would also wait, but
//! would put a one-byte segment on the wire for every full buffer.)
//!
//! A read that misses the page cache waits for the disk (tens of ms), and on the reactor
//! that wait would stall every connection of the shard. So no file byte is read on the
//! reactor: a region not in the page cache is first read into the cache on the shard's
//! blocking thread before sendfile sends it, and the bytes the EAGAIN path and the copying
//! path (TLS, which must encrypt them; `zero_copy_fetch = false`) hold in memory are read
//! there too.

use std::fs::File;
use std::future::Future;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use futures_lite::{AsyncWrite, AsyncWriteExt};

use crate::protocol::response::FileRegion;
use crate::sys;

const CHUNK: usize = 1 << 20;
/// Bytes written through glommio's async write when the socket buffer is full.
const WAIT_CHUNK: usize = 64 << 10;
/// Bytes the copying path reads at a time. It reads the next piece while writing one, so a
/// connection holds at most two.
const COPY_CHUNK: usize = 256 << 10;

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
                let piece = read_off_reactor(&region.file, pos, WAIT_CHUNK.min((end - pos) as usize)).await?;
                w.write_all(&piece).await?;
                pos += piece.len() as u64;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The copying path: read the region into memory, then write it. Used where sendfile cannot
/// go (a TLS stream encrypts the bytes) and when `zero_copy_fetch` is off, to measure what
/// sendfile saves. The read of the next piece overlaps the write of this one.
pub async fn copy_region<W: AsyncWrite + Unpin>(w: &mut W, region: &FileRegion) -> io::Result<()> {
    let end = region.pos + region.len as u64;
    // Spawned so that the read starts now, not when it is awaited.
    let read =
        |pos: u64| glommio::spawn_local(read_off_reactor(&region.file, pos, COPY_CHUNK.min((end - pos) as usize)));
    let mut pos = region.pos;
    let mut next = (pos < end).then(|| read(pos));
    while let Some(reading) = next.take() {
        let piece = reading.await?;
        pos += piece.len() as u64;
        next = (pos < end).then(|| read(pos));
        w.write_all(&piece).await?;
    }
    Ok(())
}

/// Reads `len` bytes of `file` at `pos` on the shard's blocking thread.
fn read_off_reactor(file: &Arc<File>, pos: u64, len: usize) -> impl Future<Output = io::Result<Vec<u8>>> {
    let file = file.clone();
    glommio::executor().spawn_blocking(move || {
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, pos)?;
        Ok(buf)
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn the_copying_path_writes_the_region_exactly() {
        let bytes: Vec<u8> = (0..3 * COPY_CHUNK + 123).map(|i| (i % 251) as u8).collect();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        let file = Arc::new(file);
        glommio::LocalExecutorBuilder::default().io_memory(512 * 1024).make().unwrap().run(async move {
            for (pos, len) in [(0, bytes.len()), (7, 2 * COPY_CHUNK), (5, 10), (9, 0)] {
                let region = FileRegion { file: file.clone(), pos: pos as u64, len: len as u32 };
                let mut out = Vec::new();
                copy_region(&mut out, &region).await.unwrap();
                assert_eq!(out, &bytes[pos..pos + len], "region at {pos}, {len} bytes");
            }
            let past_the_end = FileRegion { file: file.clone(), pos: bytes.len() as u64 - 4, len: 8 };
            let err = copy_region(&mut Vec::new(), &past_the_end).await.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        });
    }
}
