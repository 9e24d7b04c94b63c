//! One client connection, served entirely on the shard that accepted it.
//!
//! The reader keeps reading and framing while earlier requests are still being handled:
//! each frame becomes a task, queued in arrival order into a bounded channel (at most
//! `max_in_flight` requests; a full channel stops the reading — backpressure). The writer
//! awaits those tasks in the same order and writes each response, so responses leave
//! strictly in request order even when later requests finish first. A task that yields no
//! response (acks=0 produce) is skipped. A frame that cannot be framed, or a request the
//! dispatcher refuses, closes the connection with the reason logged; other connections
//! never notice.
//!
//! Idle connections (`connections.max.idle.ms`): a watchdog task per connection sleeps until
//! the connection's deadline — `idle` after it last completed a request frame or wrote a
//! response — and, if nothing moved meanwhile and no request is in flight, shuts the socket
//! down, which wakes the reader. Bytes that never make up a whole frame do not move the
//! deadline, so a client trickling a frame byte by byte (slow loris) is closed like a silent
//! one. The read path itself arms no timer: it stores the frame's arrival time, which it
//! takes anyway. A request in flight (a JoinGroup waiting out a rebalance, say) keeps the
//! connection alive however long it takes, but a response that cannot be written for `idle`
//! (a client that sends requests and never reads the answers) closes it like silence does.
//!
//! Throttling (client quotas, KIP-219): a handler may say its client is throttled for some
//! time. The response leaves at once, carrying that time, and from the moment it is written
//! the connection is *muted*: the reader takes no further request from the socket until the
//! time has passed (requests already read keep going; bytes that arrive meanwhile wait in the
//! read buffer and the kernel's). Kafka mutes a throttled channel the same way. A muted
//! connection is not idle: its idle deadline counts from the end of the mute.
//!
//! Memory (`net::memory`): every byte read counts against the connection's and the broker's
//! budgets from the read until its request's response is written; with either spent the
//! reader reads nothing until responses give bytes back.
//!
//! Security (`auth::sasl`, `net::tls`): on a TLS listener the TLS handshake comes first
//! (bounded by the idle timeout), then everything is read and written through the TLS
//! stream; file regions are read and written rather than sent with sendfile, which cannot
//! encrypt. Until the connection has authenticated, frames are capped at
//! `sasl_server_max_receive_size`, and any error closes it only after the failed-
//! authentication delay, as Kafka does, so a password-guessing client gets one guess per
//! delay on each connection.
//!
//! Metrics recorded here (through the shard's probe): connections opened and closed (by the
//! client, on an error, or idle), bytes read and written, and for each request, once its response
//! has been written, its latency phases. The frame's arrival time travels beside its task
//! in the in-flight queue; the dispatcher reports when its handler started and finished.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use futures_lite::io::{ReadHalf, WriteHalf};
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use glommio::channels::local_channel::{self, LocalReceiver};
use glommio::net::TcpStream;
use glommio::Task;

use super::memory::{Budget, Held};
use super::sendfile::{copy_region, send_region};
use crate::listener::Listener;
use crate::metrics::{Closed, HandlerTiming, Probe};
use crate::protocol::frame::{self, FrameError, Framing};
use crate::protocol::response::{Chunk, Response};
use crate::sys;

#[derive(Debug, Clone)]
pub struct Limits {
    pub max_frame: u32,
    pub max_in_flight: usize,
    /// Request bytes this connection may hold read and unanswered (see `net::memory`).
    pub connection_memory: usize,
    /// The budget all connections of all shards share.
    pub broker_memory: Arc<Budget>,
    /// Send file regions with sendfile (otherwise read them and write the bytes).
    pub zero_copy: bool,
    /// SO_SNDBUF and SO_RCVBUF of the socket; None keeps the kernel's autotuning.
    pub send_buffer: Option<usize>,
    pub receive_buffer: Option<usize>,
    /// Close the connection after this long without a complete request (see the module doc).
    pub idle: Duration,
    /// The largest frame before authentication (`sasl_server_max_receive_size`).
    pub pre_auth_max_frame: u32,
    /// How long a connection whose authentication failed waits before it closes.
    pub failed_auth_delay: Duration,
}

/// What the idle watchdog watches, written by the reader and the writer.
struct Liveness {
    /// When a request frame was last completed or a response last written.
    last: Cell<Instant>,
    /// Requests read whose response (if any) is not written yet.
    in_flight: Cell<usize>,
    /// Set by the watchdog when it closes the connection.
    timed_out: Cell<bool>,
    /// The reader takes no request before this (a quota throttled the client).
    muted_until: Cell<Instant>,
    /// When the response being written started, while one is (a client that never reads
    /// stalls it; the watchdog closes such a connection after `idle`, in-flight or not).
    writing_since: Cell<Option<Instant>>,
}

impl Liveness {
    fn request_read(&self, at: Instant) {
        self.last.set(at);
        self.in_flight.set(self.in_flight.get() + 1);
    }

    fn request_done(&self, at: Instant) {
        self.last.set(at);
        self.in_flight.set(self.in_flight.get().saturating_sub(1));
    }

    /// Mutes the connection for `throttle` from `at` (a longer mute already set stands).
    fn throttle(&self, at: Instant, throttle: Duration) {
        if !throttle.is_zero() {
            self.muted_until.set(self.muted_until.get().max(at + throttle));
        }
    }
}

/// Why a handler refused a request: logged, then the connection closes. The layer above
/// owns the type; the connection only shows it.
pub type Refusal = Box<dyn std::error::Error>;

/// Why a connection closes other than by its client or its idle timeout: logged once.
#[derive(Debug, thiserror::Error)]
enum Closing {
    #[error(transparent)]
    Frame(FrameError),
    #[error("{0} before authentication (sasl_server_max_receive_size)")]
    PreAuthFrame(FrameError),
    #[error("read failed: {0}")]
    Read(#[source] io::Error),
    #[error("peer closed with {0} bytes of an unfinished request")]
    Unfinished(usize),
    #[error("write failed: {0}")]
    Write(#[source] io::Error),
    #[error("authentication failed")]
    AuthenticationFailed,
    #[error("{0}")]
    Refused(Refusal),
}

/// What the dispatcher made of one request frame.
pub struct Handled {
    /// The response (none for acks=0 produce), or why the connection must close.
    pub outcome: Result<Option<Response>, Refusal>,
    pub timing: HandlerTiming,
    /// How long a quota throttles the client: the connection reads no request for this long
    /// after the response is written (zero: not throttled).
    pub throttle: Duration,
    /// Close the connection once the response is written (authentication failed).
    pub close_after_answer: bool,
}

/// A request in flight: its handler's task, when its frame was read, and the frame's bytes
/// in the memory budgets (given back once the response is written).
type InFlight = (Task<Handled>, Instant, Held);

/// Smallest read: also what an idle connection holds, since the buffer is zero-filled up to
/// the read size (filling spare capacity directly would need unsafe code outside `sys/`).
const READ_MIN: usize = 8 * 1024;
/// Largest read. A frame's buffer grows by at most this much beyond the bytes that arrived,
/// so a client announcing a 100 MiB frame and trickling it costs what it has sent, not the
/// announced size.
const READ_MAX: usize = 1 << 20;
/// How often a connection waiting for memory budget looks again.
const MEMORY_RETRY: Duration = Duration::from_millis(5);

/// What a connection knows of its security state, which the layer above keeps (SASL and
/// its authorizations): only whether the client has authenticated, which decides the frame
/// cap and whether garbage is answered after the failed-authentication delay.
pub trait Session {
    fn authenticated(&self) -> bool;
}

/// Serves one accepted connection of `listener` until it closes. `tls` is set on SSL and
/// SASL_SSL listeners; `make_dispatch` makes the connection's session and request handler
/// once its client certificate's principal (if any) is known, after the TLS handshake.
pub async fn serve<S, M, F, Fut>(
    stream: TcpStream,
    peer: SocketAddr,
    listener: Rc<Listener>,
    tls: Option<futures_rustls::TlsAcceptor>,
    limits: Limits,
    probe: Probe,
    make_dispatch: M,
) where
    S: Session + 'static,
    M: FnOnce(Option<String>) -> (Rc<S>, F),
    F: Fn(Bytes) -> Fut + 'static,
    Fut: Future<Output = Handled> + 'static,
{
    probe.connection_opened();
    let fd = stream.as_raw_fd();
    if let Err(e) = sys::set_nonblocking(fd) {
        tracing::warn!(%peer, "closing: cannot make the socket non-blocking: {e}");
        probe.connection_closed(Closed::Error);
        return;
    }
    let _ = stream.set_nodelay(true);
    if let Err(e) = sys::set_socket_buffers(fd, limits.send_buffer, limits.receive_buffer) {
        tracing::warn!(%peer, "socket buffer sizes not set, keeping the kernel's: {e}");
    }
    let Some(acceptor) = tls else {
        let (sec, dispatch) = make_dispatch(None);
        return run(stream, fd, peer, limits, probe, sec, dispatch).await;
    };
    // The fallible form hands the socket back on failure, so it stays open for the delay.
    let handshake =
        glommio::timer::timeout(limits.idle, async { Ok(acceptor.accept(stream).into_fallible().await) }).await;
    let stream = match handshake {
        Ok(Ok(s)) => s,
        failed => {
            let (why, socket) = match failed {
                Ok(Err((e, socket))) => (format!("TLS handshake failed: {e}"), Some(socket)),
                _ => (format!("no TLS handshake within {:?} (connections_max_idle_ms)", limits.idle), None),
            };
            tracing::info!(%peer, listener = %listener.name, "closing connection: {why}");
            probe.tls_handshake_failed();
            glommio::timer::sleep(limits.failed_auth_delay).await;
            drop(socket);
            probe.connection_closed(Closed::Error);
            return;
        }
    };
    let principal = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|certs| certs.first())
        .and_then(super::tls::certificate_principal);
    let (sec, dispatch) = make_dispatch(principal);
    // sendfile would bypass the encryption.
    let limits = Limits { zero_copy: false, ..limits };
    run(stream, fd, peer, limits, probe, sec, dispatch).await
}

async fn run<S, Z, F, Fut>(
    stream: S,
    fd: RawFd,
    peer: SocketAddr,
    limits: Limits,
    probe: Probe,
    sec: Rc<Z>,
    dispatch: F,
) where
    S: AsyncRead + AsyncWrite + Unpin + 'static,
    Z: Session,
    F: Fn(Bytes) -> Fut + 'static,
    Fut: Future<Output = Handled> + 'static,
{
    let now = Instant::now();
    let live = Rc::new(Liveness {
        last: Cell::new(now),
        in_flight: Cell::new(0),
        timed_out: Cell::new(false),
        muted_until: Cell::new(now),
        writing_since: Cell::new(None),
    });
    let watchdog = glommio::spawn_local(watch_idle(fd, limits.idle, live.clone()));
    let (reader, writer) = futures_lite::io::split(stream);
    let (tx, rx) = local_channel::new_bounded(limits.max_in_flight);
    let writer = glommio::spawn_local(write_loop(writer, fd, peer, limits.zero_copy, probe.clone(), rx, live.clone()));
    let read = read_loop(reader, &limits, &probe, &dispatch, &tx, &live, &*sec).await;
    if read.is_err() && !sec.authenticated() {
        // Kafka's failed-authentication delay: garbage before authentication (a bad frame,
        // an oversized one) closes the connection only after it.
        glommio::timer::sleep(limits.failed_auth_delay).await;
    }
    drop(watchdog); // cancels it: the reading is over
    let idle = live.timed_out.get();
    match &read {
        _ if idle => {
            tracing::info!(%peer, "closing connection: no complete request for {:?} (connections_max_idle_ms)", limits.idle)
        }
        Err(reason) => tracing::warn!(%peer, "closing connection: {reason}"),
        Ok(()) => {}
    }
    drop(tx); // the writer finishes what was queued, then stops
    let write_failed = writer.await;
    probe.connection_closed(match () {
        _ if idle => Closed::Idle,
        _ if read.is_err() || write_failed => Closed::Error,
        _ => Closed::Client,
    });
}

/// Shuts the connection down once it has been idle for `idle` (see the module doc).
async fn watch_idle(fd: RawFd, idle: Duration, live: Rc<Liveness>) {
    let mut wait = idle;
    loop {
        glommio::timer::sleep(wait).await;
        if let Some(since) = live.writing_since.get() {
            let stalled = Instant::now().saturating_duration_since(since);
            if stalled >= idle {
                live.timed_out.set(true);
                let _ = sys::shutdown(fd);
                return;
            }
            wait = idle - stalled;
            continue;
        }
        if live.in_flight.get() > 0 {
            wait = idle;
            continue;
        }
        let quiet = Instant::now().saturating_duration_since(live.last.get().max(live.muted_until.get()));
        if quiet >= idle {
            live.timed_out.set(true);
            let _ = sys::shutdown(fd);
            return;
        }
        wait = idle - quiet;
    }
}

async fn read_loop<S, F, Fut>(
    mut reader: ReadHalf<S>,
    limits: &Limits,
    probe: &Probe,
    dispatch: &F,
    tx: &local_channel::LocalSender<InFlight>,
    live: &Liveness,
    sec: &dyn Session,
) -> Result<(), Closing>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: Fn(Bytes) -> Fut + 'static,
    Fut: Future<Output = Handled> + 'static,
{
    let mut buf = BytesMut::with_capacity(READ_MIN);
    // Always equal to buf.len() between reads: the bytes of frames not yet complete.
    let mut held = Held::empty(&Budget::new(limits.connection_memory), &limits.broker_memory);
    loop {
        let muted = live.muted_until.get().saturating_duration_since(Instant::now());
        if !muted.is_zero() {
            glommio::timer::sleep(muted).await;
            continue; // a response written meanwhile may have extended the mute
        }
        let max_frame = match sec.authenticated() {
            true => limits.max_frame,
            false => limits.pre_auth_max_frame.min(limits.max_frame),
        };
        let want = match frame::check(&buf, max_frame).map_err(|e| match sec.authenticated() {
            true => Closing::Frame(e),
            false => Closing::PreAuthFrame(e),
        })? {
            Framing::Complete { len } => {
                let received = Instant::now();
                live.request_read(received);
                let mut f = buf.split_to(4 + len);
                f.advance(4);
                let task = glommio::spawn_local(dispatch(f.freeze()));
                let frame_bytes = held.split(4 + len);
                if tx.send((task, received, frame_bytes)).await.is_err() {
                    return Ok(()); // the writer stopped: it logged why
                }
                continue;
            }
            Framing::Incomplete { needed } => needed.map_or(READ_MIN, |n| (n - buf.len()).clamp(READ_MIN, READ_MAX)),
        };
        if !held.grow(want) {
            // A budget is spent: read nothing until responses give bytes back. The idle
            // watchdog still runs meanwhile: a connection that completes no request for the
            // idle timeout is closed here too, giving back what it holds. Otherwise clients
            // that hold partial frames and stop (or go away) while waiting would keep the
            // broker-wide budget spent for good, since a waiting reader reads nothing and so
            // never sees the end of the stream.
            probe.memory_wait();
            while !held.grow(want) {
                if live.timed_out.get() {
                    return Ok(()); // `serve` logs the idle close
                }
                glommio::timer::sleep(MEMORY_RETRY).await;
            }
        }
        let old = buf.len();
        buf.resize(old + want, 0);
        let n = match reader.read(&mut buf[old..]).await {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => 0,
            Err(e) => return Err(Closing::Read(e)),
        };
        buf.truncate(old + n);
        held.shrink_to(buf.len());
        probe.bytes_received(n);
        if n == 0 {
            if !buf.is_empty() {
                return Err(Closing::Unfinished(buf.len()));
            }
            return Ok(());
        }
    }
}

/// Writes responses in request order; returns whether it stopped on an error.
async fn write_loop<S: AsyncRead + AsyncWrite + Unpin>(
    mut writer: WriteHalf<S>,
    fd: RawFd,
    peer: SocketAddr,
    zero_copy: bool,
    probe: Probe,
    rx: LocalReceiver<InFlight>,
    live: Rc<Liveness>,
) -> bool {
    while let Some((task, received, _frame_bytes)) = rx.recv().await {
        let handled = task.await;
        let sending = Instant::now();
        let failure = match handled.outcome {
            Ok(Some(resp)) => {
                let len = resp.total_len();
                live.writing_since.set(Some(Instant::now()));
                let written = write_response(&mut writer, fd, zero_copy, resp).await;
                live.writing_since.set(None);
                match written {
                    Ok(()) => {
                        probe.bytes_sent(len);
                        None
                    }
                    Err(e) => Some(Closing::Write(e)),
                }
            }
            Ok(None) => None,
            Err(reason) => Some(Closing::Refused(reason)),
        };
        let written = Instant::now();
        probe.request_done(&handled.timing, received, sending, written);
        live.request_done(written);
        live.throttle(written, handled.throttle);
        let failure = match failure {
            None if handled.close_after_answer => Some(Closing::AuthenticationFailed),
            failure => failure,
        };
        if let Some(reason) = failure {
            tracing::warn!(%peer, "closing connection: {reason}");
            // Wake the reader (blocked in read) so the whole connection ends.
            let _ = sys::shutdown(fd);
            // Drain so queued handlers still finish (their effects already happened).
            while let Some((t, received, _frame_bytes)) = rx.recv().await {
                let h = t.await;
                let now = Instant::now();
                probe.request_done(&h.timing, received, now, now);
            }
            return true;
        }
    }
    false
}

async fn write_response<W: AsyncWrite + Unpin>(
    w: &mut W,
    fd: RawFd,
    zero_copy: bool,
    resp: Response,
) -> io::Result<()> {
    for chunk in &resp.chunks {
        match chunk {
            Chunk::Bytes(b) => w.write_all(b).await?,
            Chunk::File(region) if zero_copy => send_region(w, fd, region).await?,
            Chunk::File(region) => copy_region(w, region).await?,
        }
    }
    // A TLS stream holds written bytes until flushed; a plain socket has nothing to flush.
    w.flush().await
}
