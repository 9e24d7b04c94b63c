//! The admin HTTP listener: `GET /metrics` answers the Prometheus text page; any other path
//! is 404, any other method 405, anything that is not an HTTP/1.x request 400.
//!
//! It runs on a plain std thread with blocking sockets, not on a shard: a scrape then never
//! takes a shard's CPU time or a place in its io_uring, a busy or stuck shard cannot delay
//! it (the page reads the shards' atomics, see `mod.rs`), and a few dozen lines of HTTP/1.1
//! replace hyper and its tokio runtime, which a thread-per-core glommio broker would
//! otherwise carry for one endpoint scraped every few seconds. Connections are served one
//! at a time, each closed after its response and bounded by read/write timeouts, so a
//! stalled client holds the endpoint for at most `IO_TIMEOUT`.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::Duration;

use super::render::{Exposition, CONTENT_TYPE};

/// Longest a client may take to send its request or read the response.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request head (request line and headers) read.
const MAX_HEAD: usize = 16 * 1024;
/// After refusing a request, how much of what the client still sends is read and dropped,
/// and for how long: closing with unread input makes the kernel send a reset, which can
/// destroy the 400 before the client reads it.
const LINGER_BYTES: usize = 1 << 20;
const LINGER_TIME: Duration = Duration::from_secs(1);

/// Serves `listener` on a new thread named `admin-http` until the process exits.
pub fn spawn(listener: TcpListener, page: Exposition) -> std::io::Result<()> {
    std::thread::Builder::new().name("admin-http".into()).spawn(move || {
        for stream in listener.incoming() {
            match stream {
                Ok(s) => {
                    if let Err(e) = serve(s, &page) {
                        tracing::debug!("admin connection: {e}");
                    }
                }
                Err(e) => {
                    tracing::warn!("admin listener accept failed: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    })?;
    Ok(())
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    Metrics { head_only: bool },
    NotFound,
    MethodNotAllowed,
    BadRequest,
}

/// Reads the request line of a complete request head (the bytes before the blank line).
pub fn route(head: &[u8]) -> Route {
    let Ok(head) = std::str::from_utf8(head) else { return Route::BadRequest };
    let line = head.split("\r\n").next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Route::BadRequest;
    };
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') || method.is_empty() {
        return Route::BadRequest;
    }
    let path = target.split(['?', '#']).next().unwrap_or_default();
    match method {
        "GET" | "HEAD" if path == "/metrics" => Route::Metrics { head_only: method == "HEAD" },
        "GET" | "HEAD" => Route::NotFound,
        m if m.bytes().all(|b| b.is_ascii_uppercase()) => Route::MethodNotAllowed,
        _ => Route::BadRequest,
    }
}

fn serve(mut s: TcpStream, page: &Exposition) -> std::io::Result<()> {
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let route = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break route(&buf[..end]);
        }
        if buf.len() > MAX_HEAD {
            break Route::BadRequest;
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            // Closed before a whole head arrived: answer anyway, it may still be reading.
            break Route::BadRequest;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let (status, body, content_type, head_only) = match &route {
        Route::Metrics { head_only } => ("200 OK", page.render(), CONTENT_TYPE, *head_only),
        Route::NotFound => ("404 Not Found", "not found: metrics are at /metrics\n".into(), "text/plain", false),
        Route::MethodNotAllowed => ("405 Method Not Allowed", "use GET /metrics\n".into(), "text/plain", false),
        Route::BadRequest => ("400 Bad Request", "not an HTTP/1.1 request\n".into(), "text/plain", false),
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    s.write_all(&out)?;
    s.flush()?;
    if route == Route::BadRequest {
        s.shutdown(Shutdown::Write)?;
        s.set_read_timeout(Some(LINGER_TIME))?;
        let mut drained = 0;
        while drained < LINGER_BYTES {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_routed_by_method_and_path() {
        assert_eq!(route(b"GET /metrics HTTP/1.1\r\nHost: x"), Route::Metrics { head_only: false });
        assert_eq!(route(b"GET /metrics?name[]=x HTTP/1.0"), Route::Metrics { head_only: false });
        assert_eq!(route(b"HEAD /metrics HTTP/1.1"), Route::Metrics { head_only: true });
        assert_eq!(route(b"GET / HTTP/1.1"), Route::NotFound);
        assert_eq!(route(b"GET /metricsx HTTP/1.1"), Route::NotFound);
        assert_eq!(route(b"POST /metrics HTTP/1.1"), Route::MethodNotAllowed);
        for bad in [&b"GARBAGE"[..], b"GET /metrics", b"GET metrics HTTP/1.1", b"GET /metrics SPDY/3", b"\xff\xfe", b""]
        {
            assert_eq!(route(bad), Route::BadRequest, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(route(b"GET  /metrics HTTP/1.1"), Route::BadRequest, "two spaces");
    }
}
