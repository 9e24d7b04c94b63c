//! TLS for SSL and SASL_SSL listeners: rustls, configured from PEM files, and the principal
//! of a client certificate (mTLS).
//!
//! The handshake runs on the shard that accepted the connection, like everything else about
//! it. Over TLS the fetch path cannot hand file pages to the socket (the bytes must be
//! encrypted), so those connections read file regions and write them through the TLS
//! stream; plaintext listeners keep sendfile.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use crate::config::{bad, bad_because, ClientAuth, Config, ConfigError};

fn read_certs(setting: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| bad_because(setting, format!("cannot read certificates from {}: {e}", path.display()), e))?;
    if certs.is_empty() {
        return Err(bad(setting, format!("{} holds no PEM certificate (BEGIN CERTIFICATE)", path.display())));
    }
    Ok(certs)
}

/// The rustls server configuration of this broker's TLS listeners (one for all of them).
pub fn server_config(cfg: &Config) -> Result<Arc<ServerConfig>, ConfigError> {
    let (Some(cert_file), Some(key_file)) = (&cfg.ssl_certificate_file, &cfg.ssl_key_file) else {
        return Err(bad("ssl_certificate_file", "TLS listeners need ssl_certificate_file and ssl_key_file"));
    };
    let chain = read_certs("ssl_certificate_file", cert_file)?;
    let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| {
        bad_because("ssl_key_file", format!("cannot read a PEM private key from {}: {e}", key_file.display()), e)
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| bad_because("ssl_certificate_file", format!("TLS setup: {e}"), e))?;
    let builder = match (cfg.ssl_client_auth, &cfg.ssl_ca_file) {
        (ClientAuth::None, _) | (_, None) => builder.with_no_client_auth(),
        (auth, Some(ca_file)) => {
            let mut roots = RootCertStore::empty();
            for c in read_certs("ssl_ca_file", ca_file)? {
                roots.add(c).map_err(|e| bad_because("ssl_ca_file", format!("{}: {e}", ca_file.display()), e))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = match auth {
                ClientAuth::Requested => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            let verifier =
                verifier.build().map_err(|e| bad_because("ssl_ca_file", format!("client verifier: {e}"), e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(chain, key).map_err(|e| {
        let problem =
            format!("the key in {} does not fit the certificate in {}: {e}", key_file.display(), cert_file.display());
        bad_because("ssl_key_file", problem, e)
    })?;
    Ok(Arc::new(config))
}

/// Kafka's default principal for a client certificate: `User:` and the subject as an RFC
/// 2253 distinguished name (most specific attribute first: `CN=alice,OU=ops,O=example`), the
/// form Java's `X500Principal.getName()` gives, so ACLs written for Kafka apply unchanged.
pub fn certificate_principal(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let registry = x509_parser::objects::oid_registry();
    let mut rdns = Vec::new();
    for rdn in parsed.subject().iter_rdn() {
        let mut parts = Vec::new();
        for attr in rdn.iter() {
            let key = match x509_parser::objects::oid2abbrev(attr.attr_type(), registry) {
                Ok(k) => k.to_ascii_uppercase(),
                Err(_) => attr.attr_type().to_id_string(),
            };
            let value = attr.as_str().map(escape_rfc2253).unwrap_or_else(|_| hex(attr.as_slice()));
            parts.push(format!("{key}={value}"));
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Some(format!("User:{}", rdns.join(",")))
}

fn escape_rfc2253(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for (i, c) in v.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i + 1 == v.chars().count() && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn hex(b: &[u8]) -> String {
    let mut s = String::from("#");
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc2253_escapes_specials() {
        assert_eq!(escape_rfc2253("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape_rfc2253(" x "), "\\ x\\ ");
        assert_eq!(escape_rfc2253("plain"), "plain");
    }
}
