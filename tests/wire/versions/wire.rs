//! One connection of the sweep: requests framed with the generated codec, responses read
//! back and checked the way a strict client would — the correlation id, the response header
//! of the version the codec names, a body that decodes at the request's version with no
//! byte left over — returning a description of what went wrong instead of panicking, so
//! the sweep can go on and report every failing version at once.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ringbroker::client::{self, Conn};
use ringbroker::protocol::messages::ApiKey;
use ringbroker::protocol::{Decodable, Encodable, ErrorCode, StrBytes};

/// What a step of a case found wrong, if anything.
pub(crate) type Check = Result<(), String>;

/// The client id every sweep request carries (DescribeGroups shows it for members).
pub(crate) const CLIENT_ID: &str = "ringbroker-tests";

/// How long a response may take before the case fails.
const REPLY_LIMIT: Duration = Duration::from_secs(30);
/// How long a connection the broker should close may stay open.
const CLOSE_LIMIT: Duration = Duration::from_secs(10);

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
    conn: Conn,
    next_id: i32,
}

impl Wire {
    pub(crate) fn connect(addr: SocketAddr) -> Result<Wire, String> {
        let mut conn = Conn::connect_timeout(addr, Duration::from_secs(10), REPLY_LIMIT)
            .map_err(|e| format!("cannot connect to {addr}: {e:#}"))?;
        conn.set_client_id(CLIENT_ID);
        Ok(Wire { conn, next_id: 1 })
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
        self.conn.write_raw(bytes).map_err(|e| format!("sending a request: {e}"))
    }

    /// Sends a request without waiting; returns its correlation id.
    pub(crate) fn send<R: Encodable>(&mut self, api: ApiKey, version: i16, req: &R) -> Result<i32, String> {
        let body = Wire::body(api, version, req)?;
        self.send_raw_body(api, version, api.request_header_version(version), &body)
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
        let client_id = StrBytes::from_static_str(CLIENT_ID);
        self.write_raw(&client::raw_request_frame(api as i16, version, id, header_version, Some(&client_id), body))?;
        Ok(id)
    }

    /// The next size-prefixed frame, or `None` when the broker closed the connection first.
    pub(crate) fn read_frame(&mut self) -> Result<Option<Bytes>, String> {
        self.conn.read_frame().map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => "no response within the time limit".to_string(),
            io::ErrorKind::UnexpectedEof => "the connection closed inside a response frame".to_string(),
            _ => format!("reading a response: {e}"),
        })
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
        let (got, mut body) = client::response_body(api, version, frame).map_err(|e| format!("{e:#}"))?;
        if got != id {
            return Err(format!("{api:?} v{version}: the response has correlation id {got}, the request {id}"));
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
        self.conn.stream().set_read_timeout(Some(CLOSE_LIMIT)).map_err(|e| e.to_string())?;
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
