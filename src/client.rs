//! A minimal blocking Kafka client: one TCP connection, requests encoded with the generated
//! codec, responses read in order. Used by the admin commands (`ringbroker topic ...`) and the
//! load tool (`ringbench`); it is not a general client (no metadata cache, no retries).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use crate::protocol::messages::{ApiKey, RequestHeader};
use crate::protocol::{Decodable, Encodable, StrBytes};
use anyhow::{bail, Context, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};

pub struct Conn {
    stream: TcpStream,
    next_id: i32,
    client_id: Option<StrBytes>,
}

impl Conn {
    pub fn connect(addr: SocketAddr) -> Result<Conn> {
        let stream = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(Conn { stream, next_id: 1, client_id: Some(StrBytes::from_static_str("ringbroker")) })
    }

    /// The client id sent in every request header (quotas and broker logs key on it).
    pub fn set_client_id(&mut self, id: &str) {
        self.client_id = Some(StrBytes::from_string(id.to_string()));
    }

    pub fn try_clone(&self) -> Result<Conn> {
        Ok(Conn { stream: self.stream.try_clone()?, next_id: self.next_id, client_id: self.client_id.clone() })
    }

    /// Encodes and writes a request; returns its correlation id.
    pub fn send<R: Encodable>(&mut self, api: ApiKey, version: i16, req: &R) -> Result<i32> {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        let mut header = RequestHeader::default();
        header.request_api_key = api as i16;
        header.request_api_version = version;
        header.correlation_id = id;
        header.client_id = self.client_id.clone();
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        header.encode(&mut buf, api.request_header_version(version))?;
        req.encode(&mut buf, version)?;
        let len = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        self.stream.write_all(&buf)?;
        Ok(id)
    }

    /// Reads the next response frame and decodes it.
    pub fn recv<R: Decodable>(&mut self, api: ApiKey, version: i16) -> Result<(i32, R)> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let len = i32::from_be_bytes(len);
        if !(4..=256 << 20).contains(&len) {
            bail!("response frame of {len} bytes");
        }
        let mut body = vec![0u8; len as usize];
        self.stream.read_exact(&mut body)?;
        let mut body = Bytes::from(body);
        let id = body.get_i32();
        // ApiVersions answers with header v0; every other flexible response has a tag section.
        if api != ApiKey::ApiVersions && api.response_header_version(version) >= 1 {
            let tags = body.get_u8();
            if tags != 0 {
                bail!("unexpected tagged fields in a response header");
            }
        }
        Ok((id, R::decode(&mut body, version)?))
    }

    pub fn call<Q: Encodable, R: Decodable>(&mut self, api: ApiKey, version: i16, req: &Q) -> Result<R> {
        let id = self.send(api, version, req)?;
        let (got, r) = self.recv(api, version)?;
        if got != id {
            bail!("response {got} does not answer request {id}");
        }
        Ok(r)
    }
}
