//! Test certificates, made at test time with the `openssl` command line: a CA, a server
//! certificate for `127.0.0.1` / `localhost`, a client certificate, and a second CA that has
//! nothing to do with the first (for "untrusted peer" tests).
//!
//! Every certificate is X.509 v3 (rustls/webpki reject v1) with an EC P-256 key in unencrypted
//! PKCS#8 PEM (`BEGIN PRIVATE KEY`), which rustls reads and Java's `ssl.keystore.type=PEM` needs.
//! Files, all in [`TestPki::dir`]:
//!
//! | file                  | what                                                               |
//! |-----------------------|--------------------------------------------------------------------|
//! | `ca.crt`, `ca.key`    | self-signed CA: basicConstraints CA:TRUE, keyUsage keyCertSign      |
//! | `server.crt/.key`     | signed by the CA; SAN IP:127.0.0.1, DNS:localhost; EKU serverAuth   |
//! | `client.crt/.key`     | signed by the CA; the subject given to [`generate`]; EKU clientAuth |
//! | `client-keystore.pem` | client key + certificate + CA certificate (Java PEM keystore)       |
//! | `other-ca.crt/.key`   | a second self-signed CA, trusted by no one                          |
//!
//! Missing `openssl` or a failing openssl command panics with the command and its stderr.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The openssl configuration: the extension sections the certificates are made with.
const OPENSSL_CNF: &str = "\
[req]
distinguished_name = req_dn
[req_dn]

[ext_ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash

[ext_server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer

[ext_client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
";

const DAYS: &str = "3650";

/// A CA, a server and a client certificate, and an unrelated CA, in a temporary directory that
/// lives as long as this value.
pub struct TestPki {
    pub dir: PathBuf,
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// Key, certificate and CA certificate in one PEM file, for Java's `ssl.keystore.type=PEM`.
    pub client_pem_keystore: PathBuf,
    /// The client certificate's subject as Kafka names an SSL principal by default: the RFC 2253
    /// form, which lists the RDNs last to first, so `/CN=alice/OU=test/O=ringbroker` becomes
    /// `O=ringbroker,OU=test,CN=alice` (and `/O=ringbroker/OU=test/CN=alice` becomes
    /// `CN=alice,OU=test,O=ringbroker`). The Kafka principal is `User:` + this.
    pub client_principal: String,
    pub other_ca_cert: PathBuf,
    pub other_ca_key: PathBuf,
    _tmp: tempfile::TempDir,
}

/// A client certificate made by [`TestPki::issue_client`] or [`TestPki::issue_untrusted_client`].
pub struct ClientCert {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Key, certificate and its CA's certificate in one PEM file (Java's PEM keystore).
    pub pem_keystore: PathBuf,
    /// As [`TestPki::client_principal`].
    pub principal: String,
}

/// Makes a fresh PKI; `client_subject` is the client certificate's subject in openssl's
/// `-subj` form, e.g. `/CN=alice/OU=test/O=ringbroker` (see [`TestPki::client_principal`] for
/// the principal name it gives).
pub fn generate(client_subject: &str) -> TestPki {
    let tmp = tempfile::Builder::new().prefix("ringbroker-pki-").tempdir().expect("temp dir for test certificates");
    let dir = tmp.path().to_path_buf();
    std::fs::write(dir.join("openssl.cnf"), OPENSSL_CNF).expect("write openssl.cnf");

    self_signed_ca(&dir, "ca", "/O=ringbroker/CN=Ringbroker Test CA");
    self_signed_ca(&dir, "other-ca", "/O=ringbroker/CN=Ringbroker Other Test CA");
    issue(&dir, "server", "/O=ringbroker/CN=localhost", "ca", "ext_server");
    let client = issue_client_in(&dir, "client", client_subject, "ca");

    TestPki {
        ca_cert: dir.join("ca.crt"),
        ca_key: dir.join("ca.key"),
        server_cert: dir.join("server.crt"),
        server_key: dir.join("server.key"),
        client_cert: client.cert,
        client_key: client.key,
        client_pem_keystore: client.pem_keystore,
        client_principal: client.principal,
        other_ca_cert: dir.join("other-ca.crt"),
        other_ca_key: dir.join("other-ca.key"),
        dir,
        _tmp: tmp,
    }
}

impl TestPki {
    /// Another client certificate signed by the CA, in files `<name>.crt`, `<name>.key` and
    /// `<name>-keystore.pem`.
    pub fn issue_client(&self, name: &str, subject: &str) -> ClientCert {
        issue_client_in(&self.dir, name, subject, "ca")
    }

    /// A client certificate signed by the other CA, which the broker must not trust.
    pub fn issue_untrusted_client(&self, name: &str, subject: &str) -> ClientCert {
        issue_client_in(&self.dir, name, subject, "other-ca")
    }

    /// Java client settings that trust the CA (`ssl.truststore.type=PEM`) and, given a PEM
    /// keystore ([`TestPki::client_pem_keystore`], [`ClientCert::pem_keystore`]), present that
    /// client certificate. `security.protocol` (SSL or SASL_SSL) is the caller's to add. The
    /// server's certificate is checked against `127.0.0.1`/`localhost` (the client's default
    /// `ssl.endpoint.identification.algorithm=https`).
    pub fn java_ssl_props(&self, keystore: Option<&Path>) -> Vec<(String, String)> {
        let mut p = vec![
            ("ssl.truststore.type".to_string(), "PEM".to_string()),
            ("ssl.truststore.location".to_string(), self.ca_cert.display().to_string()),
        ];
        if let Some(ks) = keystore {
            p.push(("ssl.keystore.type".to_string(), "PEM".to_string()));
            p.push(("ssl.keystore.location".to_string(), ks.display().to_string()));
        }
        p
    }
}

fn self_signed_ca(dir: &Path, stem: &str, subject: &str) {
    gen_key(dir, stem);
    let req = format!("req -x509 -new -config openssl.cnf -extensions ext_ca -key {stem}.key -sha256 -days {DAYS}");
    openssl(dir, &req, &["-subj", subject, "-out", &format!("{stem}.crt")]);
}

/// `<stem>.key` and `<stem>.crt`, the certificate signed by CA `<ca>` with extension section `ext`.
fn issue(dir: &Path, stem: &str, subject: &str, ca: &str, ext: &str) {
    assert!(subject.starts_with('/'), "a certificate subject in openssl's -subj form starts with '/': {subject:?}");
    assert!(
        !stem.is_empty() && stem.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        "a certificate's file name stem is letters, digits, '-' and '_': {stem:?}"
    );
    gen_key(dir, stem);
    openssl(dir, &format!("req -new -config openssl.cnf -key {stem}.key -out {stem}.csr"), &["-subj", subject]);
    let sign = format!(
        "x509 -req -in {stem}.csr -CA {ca}.crt -CAkey {ca}.key -CAserial {ca}.srl -CAcreateserial \
         -days {DAYS} -sha256 -extfile openssl.cnf -extensions {ext} -out {stem}.crt"
    );
    openssl(dir, &sign, &[]);
}

fn issue_client_in(dir: &Path, stem: &str, subject: &str, ca: &str) -> ClientCert {
    issue(dir, stem, subject, ca, "ext_client");
    let cert = dir.join(format!("{stem}.crt"));
    let key = dir.join(format!("{stem}.key"));
    let pem_keystore = dir.join(format!("{stem}-keystore.pem"));
    let mut chain = Vec::new();
    for part in [&key, &cert, &dir.join(format!("{ca}.crt"))] {
        chain.extend(std::fs::read(part).unwrap_or_else(|e| panic!("read {}: {e}", part.display())));
    }
    std::fs::write(&pem_keystore, chain).unwrap_or_else(|e| panic!("write {}: {e}", pem_keystore.display()));
    let principal = openssl(dir, &format!("x509 -in {stem}.crt -noout -subject -nameopt RFC2253"), &[]);
    let principal = principal.trim().trim_start_matches("subject=").trim().to_string();
    ClientCert { cert, key, pem_keystore, principal }
}

/// `<stem>.key`: an EC P-256 key, as unencrypted PKCS#8 (what `genpkey` writes).
fn gen_key(dir: &Path, stem: &str) {
    openssl(dir, &format!("genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out {stem}.key"), &[]);
}

/// Runs `openssl <words> <args>` in `dir` (`words` split at whitespace, `args` as they are) and
/// returns its stdout; panics with the command and its stderr if it fails.
fn openssl(dir: &Path, words: &str, args: &[&str]) -> String {
    let mut cmd = Command::new("openssl");
    cmd.args(words.split_whitespace()).args(args).current_dir(dir).stdin(Stdio::null());
    let out = cmd.output().unwrap_or_else(|e| {
        panic!(
            "the TLS tests make their certificates with the openssl command line, but `{cmd:?}` could not \
             run: {e}; install it (e.g. `apt-get install openssl`)"
        )
    });
    if !out.status.success() {
        panic!(
            "making test certificates failed: `{cmd:?}` (in {}) exited with {}\n--- stderr ---\n{}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}
