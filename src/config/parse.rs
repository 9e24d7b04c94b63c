//! The structured values written inside string settings: addresses, listeners, per-IP
//! connection caps, quotas, SASL mechanisms and super users. Each parser names the setting
//! it reads in its error.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use super::{bad, bad_because, Config, ConfigError};
use crate::listener::ListenerSpec;
use crate::quota::ClientQuota;

impl Config {
    /// `max_connections_per_ip_overrides` parsed: `IP:COUNT` pairs, separated by commas. An
    /// IPv6 address may be bracketed (`[::1]:5`) or not (`::1:5`: the count follows the last
    /// colon). IPv4-mapped IPv6 addresses are taken as the IPv4 address they map.
    pub fn connection_ip_overrides(&self) -> Result<Vec<(IpAddr, u32)>, ConfigError> {
        const SETTING: &str = "max_connections_per_ip_overrides";
        let mut out = Vec::new();
        for part in self.max_connections_per_ip_overrides.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (host, count) =
                part.rsplit_once(':').ok_or_else(|| bad(SETTING, format!("`{part}` is not IP:COUNT")))?;
            let host = host.trim().trim_start_matches('[').trim_end_matches(']');
            let ip = host.parse::<IpAddr>().map_err(|_| {
                bad(SETTING, format!("`{host}` in `{part}` is not an IP address (host names are not resolved)"))
            })?;
            let count = count
                .trim()
                .parse::<u32>()
                .map_err(|_| bad(SETTING, format!("`{count}` in `{part}` is not a connection count")))?;
            out.push((ip.to_canonical(), count));
        }
        Ok(out)
    }

    /// The default client quota and `quota_client_overrides` parsed: `CLIENT_ID:KIND=BYTES`
    /// items separated by commas, KIND being `producer` or `consumer`. The client-id is what
    /// comes before the last colon (so it may hold colons, not commas); an override starts
    /// from the default quota and replaces the kind it names.
    pub fn client_quotas(&self) -> Result<(ClientQuota, HashMap<String, ClientQuota>), ConfigError> {
        let default = ClientQuota {
            producer: self.quota_producer_byte_rate,
            consumer: self.quota_consumer_byte_rate,
            request: percent_to_micros(self.quota_request_percentage),
        };
        let overrides = parse_quotas("quota_client_overrides", "CLIENT_ID", &self.quota_client_overrides, default)?;
        Ok((default, overrides))
    }

    /// `quota_user_overrides` parsed: `USER:KIND=VALUE` items as for client-ids, by user
    /// name (the principal `User:<name>`); kinds a user is not given stay unlimited, so the
    /// client-id's quota applies to them (see `quota`).
    pub fn user_quotas(&self) -> Result<HashMap<String, ClientQuota>, ConfigError> {
        parse_quotas("quota_user_overrides", "USER", &self.quota_user_overrides, ClientQuota::NONE)
    }

    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        resolve_addr("listen", &self.listen)
    }

    /// The listeners to bind: `listeners` parsed, or one PLAINTEXT listener on `listen`.
    pub fn listener_specs(&self) -> Result<Vec<ListenerSpec>, ConfigError> {
        if self.listeners.trim().is_empty() {
            let advertise = match &self.advertise {
                Some(a) => {
                    let (host, port) = split_host_port("advertise", a)?;
                    Some((host.to_string(), port))
                }
                None => None,
            };
            return Ok(vec![ListenerSpec::plaintext(self.listen_addr()?, advertise)]);
        }
        let specs =
            crate::listener::parse(&self.listeners, &self.advertised_listeners, &self.listener_security_protocol_map)?;
        Ok(specs)
    }

    /// The SASL mechanisms offered, in the order configured.
    pub fn sasl_mechanisms(&self) -> Result<Vec<String>, ConfigError> {
        let mut out = Vec::new();
        for m in self.sasl_enabled_mechanisms.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            let m = m.to_ascii_uppercase();
            if !matches!(m.as_str(), "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512") {
                return Err(bad(
                    "sasl_enabled_mechanisms",
                    format!("`{m}` is not served here; choose from PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
                ));
            }
            out.push(m);
        }
        Ok(out)
    }

    /// `super_users` split on `;`.
    pub fn super_user_list(&self) -> Vec<String> {
        self.super_users.split(';').map(str::trim).filter(|u| !u.is_empty()).map(str::to_string).collect()
    }

    /// The admin listener's address, `None` when it is turned off.
    pub fn admin_addr(&self) -> Result<Option<SocketAddr>, ConfigError> {
        match self.admin_listen.trim() {
            "" | "off" => Ok(None),
            a => resolve_addr("admin_listen", a).map(Some),
        }
    }
}

/// `NAME:producer=BYTES`, `NAME:consumer=BYTES` or `NAME:request=PERCENT` items separated by
/// commas; each name starts from `base` and has the kinds it names replaced.
fn parse_quotas(
    setting: &'static str,
    who: &str,
    text: &str,
    base: ClientQuota,
) -> Result<HashMap<String, ClientQuota>, ConfigError> {
    let mut out: HashMap<String, ClientQuota> = HashMap::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let shape = || {
            bad(setting, format!("`{part}` is not {who}:producer=BYTES, {who}:consumer=BYTES or {who}:request=PERCENT"))
        };
        let (name, item) = part.rsplit_once(':').ok_or_else(shape)?;
        let (kind, rate) = item.split_once('=').ok_or_else(shape)?;
        let rate = match rate.trim().parse::<u64>() {
            Ok(r) if r > 0 => r,
            _ => return Err(bad(setting, format!("`{rate}` in `{part}` is not a rate of at least 1 byte/s"))),
        };
        let q = out.entry(name.trim().to_string()).or_insert(base);
        match kind.trim() {
            "producer" => q.producer = rate,
            "consumer" => q.consumer = rate,
            "request" => q.request = percent_to_micros(rate),
            other => {
                return Err(bad(setting, format!("`{other}` in `{part}` is not `producer`, `consumer` or `request`")))
            }
        }
    }
    Ok(out)
}

/// A request quota in percent of one shard as handler microseconds per second.
fn percent_to_micros(percent: u64) -> u64 {
    if percent >= crate::quota::UNLIMITED / 10_000 {
        crate::quota::UNLIMITED
    } else {
        percent * 10_000
    }
}

pub(super) fn split_host_port<'a>(setting: &'static str, s: &'a str) -> Result<(&'a str, u16), ConfigError> {
    let (host, port) = s.rsplit_once(':').ok_or_else(|| bad(setting, format!("`{s}` is not HOST:PORT")))?;
    let port = port.parse::<u16>().map_err(|_| bad(setting, format!("`{port}` in `{s}` is not a port number")))?;
    Ok((host.trim_start_matches('[').trim_end_matches(']'), port))
}

pub(super) fn resolve_addr(setting: &'static str, s: &str) -> Result<SocketAddr, ConfigError> {
    split_host_port(setting, s)?;
    s.to_socket_addrs()
        .map_err(|e| bad_because(setting, format!("cannot resolve `{s}`: {e}"), e))?
        .next()
        .ok_or_else(|| bad(setting, format!("`{s}` resolves to no address")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogFormat;

    #[test]
    fn connection_limits_parse_and_validate() {
        let c = Config::from_toml(
            "max_connections = 100\nmax_connections_per_ip = 0\n\
             max_connections_per_ip_overrides = \"10.0.0.5:7, [::1]:3,::ffff:1.2.3.4:9\"\n\
             connections_max_idle_ms = 5000\n",
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!((c.max_connections, c.max_connections_per_ip, c.connections_max_idle_ms), (100, 0, 5000));
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(c.connection_ip_overrides().unwrap(), vec![(ip("10.0.0.5"), 7), (ip("::1"), 3), (ip("1.2.3.4"), 9)]);
        assert!(Config::default().connection_ip_overrides().unwrap().is_empty());
        for (bad_value, says) in
            [("broker-1:5", "not an IP address"), ("10.0.0.1", "not IP:COUNT"), ("10.0.0.1:many", "not a connection")]
        {
            let c = Config { max_connections_per_ip_overrides: bad_value.into(), ..Config::default() };
            let e = c.validate().unwrap_err();
            assert_eq!(e.setting, "max_connections_per_ip_overrides");
            assert!(e.problem.contains(says), "{e}");
        }
        let c = Config { max_connections_per_ip: 0, ..Config::default() };
        assert_eq!(c.validate().unwrap_err().setting, "max_connections_per_ip");
        let c = Config { max_connections: 0, ..Config::default() };
        assert_eq!(c.validate().unwrap_err().setting, "max_connections");
        let c = Config { connections_max_idle_ms: 0, ..Config::default() };
        assert_eq!(c.validate().unwrap_err().setting, "connections_max_idle_ms");
    }

    #[test]
    fn socket_buffers_parse_and_validate() {
        let c = Config::default();
        assert_eq!((c.socket_send_buffer_bytes, c.socket_receive_buffer_bytes), (102_400, -1));
        let c = Config::from_toml("socket_send_buffer_bytes = -1\nsocket_receive_buffer_bytes = 65536\n").unwrap();
        assert_eq!((c.socket_send_buffer_bytes, c.socket_receive_buffer_bytes), (-1, 65_536));
        c.validate().unwrap();
        for (send, receive, setting) in [
            (0, -1, "socket_send_buffer_bytes"),
            (-2, -1, "socket_send_buffer_bytes"),
            (1, 0, "socket_receive_buffer_bytes"),
        ] {
            let c =
                Config { socket_send_buffer_bytes: send, socket_receive_buffer_bytes: receive, ..Config::default() };
            assert_eq!(c.validate().unwrap_err().setting, setting);
        }
    }

    #[test]
    fn client_quotas_parse_and_validate() {
        let c = Config::from_toml(
            "quota_producer_byte_rate = 1000\n\
             quota_client_overrides = \"client-a:producer=1048576, client-b:consumer=2097152,a:b:consumer=5,client-a:consumer=7\"\n",
        )
        .unwrap();
        c.validate().unwrap();
        let (default, overrides) = c.client_quotas().unwrap();
        let unlimited = crate::quota::UNLIMITED;
        let q = |producer, consumer| ClientQuota { producer, consumer, request: unlimited };
        assert_eq!(default, q(1000, unlimited));
        assert_eq!(overrides["client-a"], q(1_048_576, 7));
        assert_eq!(overrides["client-b"], q(1000, 2_097_152));
        assert_eq!(overrides["a:b"], q(1000, 5));
        let c = Config::from_toml("quota_client_overrides = \"client-c:request=50\"\n").unwrap();
        let (_, overrides) = c.client_quotas().unwrap();
        assert_eq!(overrides["client-c"].request, 500_000, "50% of a shard: 500 ms of handler time a second");
        let (default, overrides) = Config::default().client_quotas().unwrap();
        assert_eq!(default, ClientQuota::NONE);
        assert!(overrides.is_empty());
        for (bad_value, says) in [
            ("client-a", "is not CLIENT_ID"),
            ("client-a:producer", "is not CLIENT_ID"),
            ("client-a:producer=0", "at least 1 byte/s"),
            ("client-a:producer=fast", "at least 1 byte/s"),
            ("client-a:admin=5", "is not `producer`, `consumer` or `request`"),
        ] {
            let c = Config { quota_client_overrides: bad_value.into(), ..Config::default() };
            let e = c.validate().unwrap_err();
            assert_eq!(e.setting, "quota_client_overrides");
            assert!(e.problem.contains(says), "{bad_value}: {e}");
        }
        let c = Config { quota_consumer_byte_rate: 0, ..Config::default() };
        assert!(c.validate().unwrap_err().setting.contains("quota_consumer_byte_rate"));
    }

    #[test]
    fn user_quotas_leave_the_kinds_they_do_not_name_unlimited() {
        let c = Config::from_toml(
            "quota_producer_byte_rate = 1000\nquota_user_overrides = \"alice:producer=500,bob:request=20\"\n",
        )
        .unwrap();
        let users = c.user_quotas().unwrap();
        assert_eq!(users["alice"], ClientQuota { producer: 500, ..ClientQuota::NONE });
        assert_eq!(users["bob"], ClientQuota { request: 200_000, ..ClientQuota::NONE });
        let c = Config { quota_user_overrides: "alice=5".into(), ..Config::default() };
        assert_eq!(c.validate().unwrap_err().setting, "quota_user_overrides");
    }

    #[test]
    fn admin_listen_can_be_turned_off_and_log_level_is_checked() {
        assert_eq!(Config::default().admin_addr().unwrap(), Some("127.0.0.1:9644".parse().unwrap()));
        for off in ["", "off"] {
            let c = Config { admin_listen: off.into(), ..Config::default() };
            assert_eq!(c.admin_addr().unwrap(), None);
        }
        let c = Config { admin_listen: "nowhere".into(), ..Config::default() };
        assert_eq!(c.validate().unwrap_err().setting, "admin_listen");
        let c = Config { log_level: "info,ringbroker::net=debug".into(), ..Config::default() };
        c.validate().unwrap();
        let c = Config { log_level: "info,=[".into(), ..Config::default() };
        assert_eq!(c.validate().unwrap_err().setting, "log_level");
        let c = Config::from_toml("log_format = \"json\"\nadmin_listen = \"off\"\n").unwrap();
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(c.admin_addr().unwrap(), None);
    }
}
