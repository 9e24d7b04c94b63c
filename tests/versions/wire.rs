//! One connection of the sweep: requests framed with the generated codec, responses read
//! back and checked the way a strict client would — the correlation id, the response header
//! of the version the codec names, a body that decodes at the request's version with no
//! byte left over — returning a description of what went wrong instead of panicking, so
//! the sweep can go on and report every failing version at once.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use ringbroker::protocol::messages::{ApiKey, RequestHeader};
use ringbroker::protocol::{Decodable, Encodable, ErrorCode, StrBytes};

/// What a step of a case found wrong, if anything.
pub(crate) type Check = Result<(), String>;

/// The client id every sweep request carries (DescribeGroups shows it for members).
pub(crate) const CLIENT_ID: &str = "ringbroker-tests";

/// How long a response may take before the case fails.
const REPLY_LIMIT: Duration = Duration::from_secs(30);
/// How long a connection the broker should close may stay open.
const CLOSE_LIMIT: Duration = Duration::from_secs(10);
/// Larger response frames are taken as garbage.
const MAX_FRAME: i32 = 64 << 20;

/// An error code with its name, for messages.
pub(crate) fn code_name(code: i16) -> String {
    match ErrorCode::try_from_code(code) {
        Some(e) if code != 0 => format!("{code} ({e:?})"),
        _ if code == 0 => "0 (NONE)".to_string(),
        _ => format!("{code} (unknown)"),
    }
}

/// `got` must be `want`; `what` says where the code was found.
pub(crate) fn expect_code(what: &str, got: i16, want: i16) -> Check {
    expect_code_msg(what, got, want, &None)
}

/// As [`expect_code`], quoting the response's error message when it has one.
pub(crate) fn expect_code_msg(what: &str, got: i16, want: i16, message: &Option<StrBytes>) -> Check {
    if got == want {
        return Ok(());
    }
    let msg = message.as_ref().map(|m| format!(" ({:?})", m.as_str())).unwrap_or_default();
    Err(format!("{what}: error {}{msg} where {} was expected", code_name(got), code_name(want)))
}

pub(crate) struct Wire {
    stream: TcpStream,
    next_id: i32,
}

impl Wire {
    pub(crate) fn connect(addr: SocketAddr) -> Result<Wire, String> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        stream.set_read_timeout(Some(REPLY_LIMIT)).map_err(|e| e.to_string())?;
        stream.set_write_timeout(Some(REPLY_LIMIT)).map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(Wire { stream, next_id: 1 })
    }

    /// A whole request frame: size, a request header of `header_version`, then `body`.
    pub(crate) fn frame_of(
        api: ApiKey,
        version: i16,
        correlation_id: i32,
        header_version: i16,
        body: &[u8],
    ) -> Vec<u8> {
        let mut header = RequestHeader::default();
        header.request_api_key = api as i16;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(StrBytes::from_static_str(CLIENT_ID));
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        header.encode(&mut buf, header_version).expect("a request header encodes");
        buf.extend_from_slice(body);
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        buf.to_vec()
    }

    /// The body of `req` at `version`, as the codec encodes it.
    pub(crate) fn body<R: Encodable>(api: ApiKey, version: i16, req: &R) -> Result<Vec<u8>, String> {
        let mut body = BytesMut::new();
        req.encode(&mut body, version).map_err(|e| format!("cannot encode the {api:?} v{version} request: {e}"))?;
        Ok(body.to_vec())
    }

    fn next_id(&mut self) -> i32 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    pub(crate) fn write_raw(&mut self, bytes: &[u8]) -> Check {
        self.stream.write_all(bytes).map_err(|e| format!("sending a request: {e}"))
    }

    /// Sends a request without waiting; returns its correlation id.
    pub(crate) fn send<R: Encodable>(&mut self, api: ApiKey, version: i16, req: &R) -> Result<i32, String> {
        let body = Wire::body(api, version, req)?;
        let id = self.next_id();
        self.write_raw(&Wire::frame_of(api, version, id, api.request_header_version(version), &body))?;
        Ok(id)
    }

    /// Sends a frame built by hand (header version and body as given); returns its id.
    pub(crate) fn send_raw_body(
        &mut self,
        api: ApiKey,
        version: i16,
        header_version: i16,
        body: &[u8],
    ) -> Result<i32, String> {
        let id = self.next_id();
        self.write_raw(&Wire::frame_of(api, version, id, header_version, body))?;
        Ok(id)
    }

    /// The next size-prefixed frame, or `None` when the broker closed the connection first.
    pub(crate) fn read_frame(&mut self) -> Result<Option<Vec<u8>>, String> {
        let mut size = [0u8; 4];
        if !read_full(&mut self.stream, &mut size)? {
            return Ok(None);
        }
        let size = i32::from_be_bytes(size);
        if !(0..=MAX_FRAME).contains(&size) {
            return Err(format!("a response frame of {size} bytes"));
        }
        let mut frame = vec![0u8; size as usize];
        if !read_full(&mut self.stream, &mut frame)? {
            return Err("the connection closed inside a response frame".into());
        }
        Ok(Some(frame))
    }

    /// Reads the response to request `id` (`api` at `version`) and decodes it strictly.
    pub(crate) fn recv<T: Decodable + std::fmt::Debug>(
        &mut self,
        api: ApiKey,
        version: i16,
        id: i32,
    ) -> Result<T, String> {
        let frame = self
            .read_frame()?
            .ok_or_else(|| format!("the broker closed the connection instead of answering {api:?} v{version}"))?;
        if frame.len() < 4 {
            return Err(format!("a {}-byte response frame has no correlation id", frame.len()));
        }
        let mut body = Bytes::from(frame);
        let got = body.get_i32();
        if got != id {
            return Err(format!("{api:?} v{version}: the response has correlation id {got}, the request {id}"));
        }
        let header_version = api.response_header_version(version);
        if header_version >= 1 {
            skip_tagged_fields(&mut body)
                .map_err(|e| format!("{api:?} v{version}: bad response header v{header_version}: {e}"))?;
        }
        let resp = T::decode(&mut body, version)
            .map_err(|e| format!("the {api:?} v{version} response does not decode at v{version}: {e}"))?;
        dump(api, version, &resp);
        if !body.is_empty() {
            return Err(format!("{} bytes left over after the {api:?} v{version} response", body.len()));
        }
        Ok(resp)
    }

    pub(crate) fn call<Req: Encodable, Resp: Decodable + std::fmt::Debug>(
        &mut self,
        api: ApiKey,
        version: i16,
        req: &Req,
    ) -> Result<Resp, String> {
        let id = self.send(api, version, req)?;
        self.recv(api, version, id)
    }

    /// The broker must close the connection without answering.
    pub(crate) fn expect_closed(&mut self, what: &str) -> Check {
        self.stream.set_read_timeout(Some(CLOSE_LIMIT)).map_err(|e| e.to_string())?;
        match self.read_frame() {
            Ok(None) => Ok(()),
            Ok(Some(f)) => {
                Err(format!("{what}: the broker answered ({} bytes) instead of closing the connection", f.len()))
            }
            Err(e) => Err(format!("{what}: the connection was not closed: {e}")),
        }
    }
}

/// With `SWEEP_DUMP=FILE` (by hand), every decoded response is appended to FILE, one line
/// each: sweeping two brokers into two files shows where their answers differ.
fn dump(api: ApiKey, version: i16, resp: &impl std::fmt::Debug) {
    let Ok(path) = std::env::var("SWEEP_DUMP") else { return };
    let line = format!("{api:?} v{version}: {resp:?}\n");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!("SWEEP_DUMP={path}: {e}");
    }
}

/// Fills `buf`; `false` when the stream ended (or was reset) before its first byte.
fn read_full(s: &mut TcpStream, buf: &mut [u8]) -> Result<bool, String> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err("the connection closed mid-frame".into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if got == 0
                    && matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted) =>
            {
                return Ok(false)
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err("no response within the time limit".into())
            }
            Err(e) => return Err(format!("reading a response: {e}")),
        }
    }
    Ok(true)
}

fn uvarint(b: &mut Bytes) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        if !b.has_remaining() {
            return Err("truncated varint".into());
        }
        let byte = b.get_u8();
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint too long".into())
}

fn skip_tagged_fields(b: &mut Bytes) -> Check {
    for _ in 0..uvarint(b)? {
        let _tag = uvarint(b)?;
        let len = uvarint(b)? as usize;
        if b.remaining() < len {
            return Err(format!("a tagged field of {len} bytes past the end"));
        }
        b.advance(len);
    }
    Ok(())
}
