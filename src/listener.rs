//! Named listeners, in Kafka's shape: `listeners = "PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9093"`,
//! `advertised_listeners` with the addresses clients are told, and
//! `listener_security_protocol_map = "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL"` for listeners
//! named other than their protocol. Without `listeners`, the broker has one PLAINTEXT
//! listener on `listen` (advertised as `advertise`), as before.
//!
//! Every shard binds every listener (SO_REUSEPORT spreads each listener's connections), and
//! a request is answered with the advertised addresses of the listener it arrived on, as
//! Kafka does, so clients stay on the listener (and security) they chose.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};

/// A listener setting that cannot be used: which of `listeners`, `advertised_listeners` and
/// `listener_security_protocol_map` is wrong, and how to write it. (`config` turns it into
/// its own error; this module sits below `config`, which parses listeners through it.)
#[derive(Debug, thiserror::Error)]
#[error("invalid setting `{setting}`: {problem}")]
pub struct ListenerError {
    pub setting: &'static str,
    pub problem: String,
    /// The address lookup that failed, when one did.
    pub source: Option<std::io::Error>,
}

fn bad(setting: &'static str, problem: impl Into<String>) -> ListenerError {
    ListenerError { setting, problem: problem.into(), source: None }
}

fn bad_because(setting: &'static str, problem: impl Into<String>, source: std::io::Error) -> ListenerError {
    ListenerError { setting, problem: problem.into(), source: Some(source) }
}

/// How a listener's connections are secured (Kafka's `SecurityProtocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(s: &str) -> Option<SecurityProtocol> {
        Some(match s.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => SecurityProtocol::Plaintext,
            "SSL" => SecurityProtocol::Ssl,
            "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
            "SASL_SSL" => SecurityProtocol::SaslSsl,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    pub fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn sasl(self) -> bool {
        matches!(self, SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl)
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One listener as configured: its name, protocol, the address to bind and, if set, the
/// address to advertise (otherwise derived from the bound address at start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    pub name: String,
    pub protocol: SecurityProtocol,
    pub bind: SocketAddr,
    pub advertised: Option<(String, u16)>,
}

/// The host and port clients are told to connect to on one listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advertised {
    pub host: String,
    pub port: u16,
}

/// A listener once bound: what a connection needs to know about the listener it came in on.
#[derive(Debug, Clone)]
pub struct Listener {
    pub name: String,
    pub protocol: SecurityProtocol,
    pub bound: SocketAddr,
    pub advertised: Advertised,
}

/// Splits `NAME://HOST:PORT` from `setting`; an empty host means every interface, as in Kafka.
fn split_endpoint(setting: &'static str, item: &str) -> Result<(String, String, u16), ListenerError> {
    let (name, addr) = item
        .split_once("://")
        .ok_or_else(|| bad(setting, format!("`{item}` is not NAME://HOST:PORT (e.g. SASL_SSL://0.0.0.0:9093)")))?;
    let name = name.trim().to_ascii_uppercase();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err(bad(setting, format!("listener name `{name}` in `{item}` must be letters, digits, '_' or '-'")));
    }
    let (host, port) = addr.rsplit_once(':').ok_or_else(|| bad(setting, format!("`{item}` has no :PORT")))?;
    let port = port.parse::<u16>().map_err(|_| bad(setting, format!("`{port}` in `{item}` is not a port number")))?;
    Ok((name, host.trim_start_matches('[').trim_end_matches(']').to_string(), port))
}

fn parse_map(map: &str) -> Result<Vec<(String, SecurityProtocol)>, ListenerError> {
    const SETTING: &str = "listener_security_protocol_map";
    let mut out = Vec::new();
    for item in map.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, proto) =
            item.split_once(':').ok_or_else(|| bad(SETTING, format!("`{item}` is not NAME:PROTOCOL")))?;
        let proto = SecurityProtocol::parse(proto).ok_or_else(|| {
            bad(SETTING, format!("`{proto}` in `{item}` is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"))
        })?;
        out.push((name.trim().to_ascii_uppercase(), proto));
    }
    Ok(out)
}

/// Parses `listeners`, `advertised_listeners` and `listener_security_protocol_map`. A
/// listener's protocol comes from the map, or is its name when the name is a protocol.
/// Errors say which of the three settings is wrong and how.
pub fn parse(listeners: &str, advertised: &str, map: &str) -> Result<Vec<ListenerSpec>, ListenerError> {
    let map = parse_map(map)?;
    let mut specs: Vec<ListenerSpec> = Vec::new();
    for item in listeners.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, host, port) = split_endpoint("listeners", item)?;
        if specs.iter().any(|s| s.name == name) {
            return Err(bad("listeners", format!("listener {name} is named twice; each needs its own name")));
        }
        let protocol = match map.iter().find(|(n, _)| *n == name) {
            Some((_, p)) => *p,
            None => SecurityProtocol::parse(&name).ok_or_else(|| {
                bad(
                    "listener_security_protocol_map",
                    format!("listener {name} has no protocol: add `{name}:SASL_SSL` (or another protocol) to the map"),
                )
            })?,
        };
        let host = if host.is_empty() { "0.0.0.0".to_string() } else { host };
        let bind = format!("{host}:{port}")
            .to_socket_addrs()
            .map_err(|e| bad_because("listeners", format!("cannot resolve `{item}`: {e}"), e))?
            .next()
            .ok_or_else(|| bad("listeners", format!("`{item}` resolves to no address")))?;
        if let Some(other) = specs.iter().find(|s| s.bind == bind && port != 0) {
            return Err(bad("listeners", format!("listeners {} and {name} both bind {bind}", other.name)));
        }
        specs.push(ListenerSpec { name, protocol, bind, advertised: None });
    }
    if specs.is_empty() {
        return Err(bad("listeners", "names no listener"));
    }
    for item in advertised.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, host, port) = split_endpoint("advertised_listeners", item)?;
        let Some(spec) = specs.iter_mut().find(|s| s.name == name) else {
            return Err(bad(
                "advertised_listeners",
                format!("`{item}` names listener {name}, which `listeners` lacks"),
            ));
        };
        if host.is_empty() {
            return Err(bad("advertised_listeners", format!("`{item}` needs a host clients can reach")));
        }
        spec.advertised = Some((host, port));
    }
    Ok(specs)
}

impl ListenerSpec {
    /// The plain listener of `listen`/`advertise`, for configs without `listeners`.
    pub fn plaintext(bind: SocketAddr, advertise: Option<(String, u16)>) -> ListenerSpec {
        ListenerSpec { name: "PLAINTEXT".into(), protocol: SecurityProtocol::Plaintext, bind, advertised: advertise }
    }

    /// The listener once bound to `bound` (the port resolved when 0 was asked for). An
    /// advertised port of 0 means the bound port; an unset advertised address is the bound
    /// one, or 127.0.0.1 for a wildcard bind (with a warning: remote clients need
    /// `advertised_listeners`).
    pub fn bound(&self, bound: SocketAddr) -> Listener {
        let advertised = match &self.advertised {
            Some((host, port)) => {
                Advertised { host: host.clone(), port: if *port == 0 { bound.port() } else { *port } }
            }
            None if bound.ip().is_unspecified() => {
                tracing::warn!(
                    listener = %self.name,
                    "listening on every interface without an advertised address: telling clients 127.0.0.1"
                );
                Advertised { host: "127.0.0.1".into(), port: bound.port() }
            }
            None => Advertised { host: bound.ip().to_string(), port: bound.port() },
        };
        Listener { name: self.name.clone(), protocol: self.protocol, bound, advertised }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_protocols_unless_mapped() {
        let l = parse("PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093", "", "").unwrap();
        assert_eq!(l[0].protocol, SecurityProtocol::Plaintext);
        assert_eq!(l[1].protocol, SecurityProtocol::SaslSsl);
        let l = parse("INTERNAL://127.0.0.1:1,EXTERNAL://127.0.0.1:2", "", "internal:PLAINTEXT, EXTERNAL:SSL").unwrap();
        assert_eq!((l[0].name.as_str(), l[0].protocol), ("INTERNAL", SecurityProtocol::Plaintext));
        assert_eq!((l[1].name.as_str(), l[1].protocol), ("EXTERNAL", SecurityProtocol::Ssl));
    }

    #[test]
    fn advertised_addresses_apply_by_name() {
        let l = parse("PLAINTEXT://:9092,SSL://:9093", "SSL://broker.example:19093", "").unwrap();
        assert!(l[0].bind.ip().is_unspecified());
        assert_eq!(l[0].advertised, None);
        assert_eq!(l[1].advertised, Some(("broker.example".into(), 19093)));
        let b = l[1].bound("0.0.0.0:9093".parse().unwrap());
        assert_eq!(b.advertised, Advertised { host: "broker.example".into(), port: 19093 });
        let b = l[0].bound("127.0.0.1:40000".parse().unwrap());
        assert_eq!(b.advertised, Advertised { host: "127.0.0.1".into(), port: 40000 });
    }

    #[test]
    fn mistakes_name_the_setting() {
        assert_eq!(parse("INTERNAL://127.0.0.1:1", "", "").unwrap_err().setting, "listener_security_protocol_map");
        assert_eq!(parse("127.0.0.1:9092", "", "").unwrap_err().setting, "listeners");
        assert_eq!(parse("SSL://127.0.0.1:1,SSL://127.0.0.1:2", "", "").unwrap_err().setting, "listeners");
        assert_eq!(parse("SSL://127.0.0.1:1,PLAINTEXT://127.0.0.1:1", "", "").unwrap_err().setting, "listeners");
        assert_eq!(parse("SSL://127.0.0.1:1", "PLAINTEXT://h:1", "").unwrap_err().setting, "advertised_listeners");
        assert_eq!(parse("A://127.0.0.1:1", "", "A:TLS").unwrap_err().setting, "listener_security_protocol_map");
        assert_eq!(parse("", "", "").unwrap_err().setting, "listeners");
    }
}
