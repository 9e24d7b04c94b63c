//! `ringbroker user set|delete|list`: SCRAM credentials over AlterUserScramCredentials and
//! DescribeUserScramCredentials, what Kafka's `kafka-configs --entity-type users` does with
//! `SCRAM-SHA-512=[iterations=...,password=...]`.
//!
//! The password never leaves the CLI: like Kafka's admin client, `set` draws a random salt,
//! computes SaltedPassword = PBKDF2(password, salt, iterations) and sends only that.

use std::collections::BTreeMap;
use std::io::BufRead;

use anyhow::{bail, Context, Result};
use clap::{ArgGroup, Args, Subcommand};
use serde_json::{json, Value};

use super::common::{check, sb, BrokerArgs, KafkaError};
use super::output::{print_json, Format, Table};
use crate::auth::scram::{self, Mechanism, MAX_ITERATIONS, MIN_ITERATIONS};
use crate::client::Conn;
use crate::protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use crate::protocol::messages::describe_user_scram_credentials_request::UserName;
use crate::protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
};

/// Shown under `user --help` and `acl --help`: these commands do not authenticate.
pub(super) const PLAINTEXT_NOTE: &str = "\
Connects without TLS or SASL, so -b must name a PLAINTEXT listener whose anonymous principal
may administer the cluster: e.g. a listener bound to localhost for admin work, with
User:ANONYMOUS in the broker's super_users.";

#[derive(Debug, Args)]
#[command(after_help = PLAINTEXT_NOTE)]
pub struct UserArgs {
    #[command(flatten)]
    broker: BrokerArgs,
    /// Output format
    #[arg(long, value_enum, default_value_t, global = true)]
    format: Format,
    #[command(subcommand)]
    command: UserCommand,
}

#[derive(Debug, Subcommand)]
enum UserCommand {
    /// Create a user, or replace its credential for one mechanism (other mechanisms stay)
    #[command(group(ArgGroup::new("secret").required(true).args(["password", "password_stdin"])))]
    Set {
        /// User name
        name: String,
        /// The password (visible in `ps` and shell history: prefer --password-stdin)
        #[arg(long)]
        password: Option<String>,
        /// Read the password from the first line of stdin
        #[arg(long)]
        password_stdin: bool,
        /// SCRAM-SHA-256 or SCRAM-SHA-512
        #[arg(long, default_value = "SCRAM-SHA-512", value_parser = parse_mechanism)]
        mechanism: Mechanism,
        /// PBKDF2 iterations (Kafka accepts 4096 to 16384)
        #[arg(long, default_value_t = MIN_ITERATIONS,
              value_parser = clap::value_parser!(i32).range(MIN_ITERATIONS as i64..=MAX_ITERATIONS as i64))]
        iterations: i32,
    },
    /// Delete a user's credential for one mechanism, or all of them (then it cannot log in)
    Delete {
        /// User name
        name: String,
        /// Only this mechanism's credential [default: every mechanism the user has]
        #[arg(long, value_parser = parse_mechanism)]
        mechanism: Option<Mechanism>,
    },
    /// List users with their SCRAM mechanisms and iteration counts (never salts or keys)
    List {
        /// Only these users [default: all]
        names: Vec<String>,
    },
}

pub fn run(args: UserArgs) -> Result<()> {
    let mut cluster = args.broker.connect()?;
    let conn = cluster.any();
    match args.command {
        UserCommand::Set { name, password, password_stdin: _, mechanism, iterations } => {
            let password = match password {
                Some(p) => p,
                None => read_password(std::io::stdin().lock())?,
            };
            set(conn, args.format, &name, &password, mechanism, iterations)
        }
        UserCommand::Delete { name, mechanism } => delete(conn, args.format, &name, mechanism),
        UserCommand::List { names } => list(conn, args.format, &names),
    }
}

/// Mechanism names as Kafka spells them, in any case.
fn parse_mechanism(s: &str) -> Result<Mechanism, String> {
    Mechanism::from_name(&s.to_ascii_uppercase()).ok_or_else(|| {
        let names: Vec<&str> = Mechanism::ALL.iter().map(|m| m.name()).collect();
        format!("unknown SCRAM mechanism '{s}'; use {}", names.join(" or "))
    })
}

/// The first line of `input`, without its line ending.
fn read_password(mut input: impl BufRead) -> Result<String> {
    let mut line = String::new();
    input.read_line(&mut line).context("reading the password from stdin")?;
    let password = line.strip_suffix('\n').unwrap_or(&line);
    let password = password.strip_suffix('\r').unwrap_or(password);
    if password.is_empty() {
        bail!("--password-stdin read an empty password; pipe it in, e.g. `ringbroker user set NAME --password-stdin < file`");
    }
    Ok(password.to_string())
}

/// AlterUserScramCredentials answers one result per user.
fn alter(conn: &mut Conn, req: &AlterUserScramCredentialsRequest, name: &str) -> Result<()> {
    let v = conn.version(ApiKey::AlterUserScramCredentials, 0, 0)?;
    let resp: AlterUserScramCredentialsResponse = conn.call(ApiKey::AlterUserScramCredentials, v, req)?;
    let r = resp
        .results
        .iter()
        .find(|r| r.user.as_str() == name)
        .with_context(|| format!("the broker's AlterUserScramCredentials response left out user '{name}'"))?;
    check(r.error_code, r.error_message.as_ref(), format_args!("user '{name}'"))
}

fn set(
    conn: &mut Conn,
    format: Format,
    name: &str,
    password: &str,
    mechanism: Mechanism,
    iterations: i32,
) -> Result<()> {
    // Shaped as the Java admin client shapes salts (see `scram::new_salt`).
    let salt = scram::new_salt();
    let mut u = ScramCredentialUpsertion::default();
    u.name = sb(name);
    u.mechanism = mechanism.code();
    u.iterations = iterations;
    u.salted_password = scram::salted_password(mechanism, password, &salt, iterations).into();
    u.salt = salt.into();
    let mut req = AlterUserScramCredentialsRequest::default();
    req.upsertions.push(u);
    alter(conn, &req, name)?;
    match format {
        Format::Json => print_json(&json!({"user": name, "mechanism": mechanism.name(), "iterations": iterations}))?,
        Format::Text => {
            let mut t = Table::new(&["USER", "MECHANISM", "ITERATIONS", "STATUS"]);
            t.row(vec![name.to_string(), mechanism.name().into(), iterations.to_string(), "set".into()]);
            t.print()?;
        }
    }
    Ok(())
}

fn delete(conn: &mut Conn, format: Format, name: &str, mechanism: Option<Mechanism>) -> Result<()> {
    let mechanisms = match mechanism {
        Some(m) => vec![m],
        None => {
            let users = describe(conn, &[name.to_string()])?;
            match users.into_iter().next() {
                Some(Ok(u)) => u.credentials.iter().filter_map(|&(m, _)| Mechanism::from_code(m)).collect(),
                Some(Err(e)) => return Err(e),
                None => bail!("the broker's DescribeUserScramCredentials response left out user '{name}'"),
            }
        }
    };
    let mut req = AlterUserScramCredentialsRequest::default();
    for &m in &mechanisms {
        let mut d = ScramCredentialDeletion::default();
        d.name = sb(name);
        d.mechanism = m.code();
        req.deletions.push(d);
    }
    alter(conn, &req, name)?;
    let names: Vec<&str> = mechanisms.iter().map(|m| m.name()).collect();
    match format {
        Format::Json => print_json(&json!({"user": name, "deleted": names}))?,
        Format::Text => {
            let mut t = Table::new(&["USER", "MECHANISM", "STATUS"]);
            for m in names {
                t.row(vec![name.to_string(), m.to_string(), "deleted".into()]);
            }
            t.print()?;
        }
    }
    Ok(())
}

/// One user as DescribeUserScramCredentials describes it.
struct User {
    name: String,
    /// (mechanism code, iterations), as answered.
    credentials: Vec<(i8, i32)>,
}

/// Kafka's name of a mechanism code, or the code itself for one this CLI does not know.
fn mechanism_name(code: i8) -> String {
    Mechanism::from_code(code).map_or_else(|| format!("UNKNOWN({code})"), |m| m.name().to_string())
}

/// The users named (all users if none), each described or with its Kafka error.
fn describe(conn: &mut Conn, names: &[String]) -> Result<Vec<Result<User>>> {
    let v = conn.version(ApiKey::DescribeUserScramCredentials, 0, 0)?;
    let mut req = DescribeUserScramCredentialsRequest::default();
    if !names.is_empty() {
        // A name given twice would be answered DUPLICATE_RESOURCE.
        let mut unique: Vec<&String> = Vec::new();
        for n in names {
            if !unique.contains(&n) {
                unique.push(n);
            }
        }
        req.users = Some(
            unique
                .into_iter()
                .map(|n| {
                    let mut u = UserName::default();
                    u.name = sb(n);
                    u
                })
                .collect(),
        );
    }
    let resp: DescribeUserScramCredentialsResponse = conn.call(ApiKey::DescribeUserScramCredentials, v, &req)?;
    check(resp.error_code, resp.error_message.as_ref(), "describing SCRAM credentials")?;
    Ok(resp
        .results
        .into_iter()
        .map(|r| {
            let name = r.user.to_string();
            if r.error_code != 0 {
                return Err(KafkaError {
                    code: r.error_code,
                    what: format!("user '{name}'"),
                    message: r.error_message.map(|m| m.to_string()),
                }
                .into());
            }
            let credentials = r.credential_infos.iter().map(|c| (c.mechanism, c.iterations)).collect();
            Ok(User { name, credentials })
        })
        .collect())
}

fn list(conn: &mut Conn, format: Format, names: &[String]) -> Result<()> {
    let mut users = BTreeMap::new();
    let mut failures = Vec::new();
    for r in describe(conn, names)? {
        match r {
            Ok(mut u) => {
                u.credentials.sort();
                users.insert(u.name.clone(), u);
            }
            Err(e) => failures.push(e),
        }
    }
    match format {
        Format::Json => print_json(&Value::Array(
            users
                .values()
                .map(|u| {
                    json!({
                        "user": u.name,
                        "credentials": u.credentials.iter().map(|&(m, i)| json!({
                            "mechanism": mechanism_name(m),
                            "iterations": i,
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect(),
        ))?,
        Format::Text => {
            let mut t = Table::new(&["USER", "MECHANISM", "ITERATIONS"]);
            for u in users.values() {
                for &(m, i) in &u.credentials {
                    t.row(vec![u.name.clone(), mechanism_name(m), i.to_string()]);
                }
            }
            // A lone header over nothing but errors says nothing.
            if !t.is_empty() || failures.is_empty() {
                t.print()?;
            }
        }
    }
    let Some(last) = failures.pop() else {
        return Ok(());
    };
    for f in failures {
        eprintln!("error: {f:#}");
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: UserCommand,
    }

    fn parse(args: &[&str]) -> Result<UserCommand, clap::Error> {
        Cli::try_parse_from(std::iter::once("user").chain(args.iter().copied())).map(|c| c.command)
    }

    #[test]
    fn the_arguments_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn set_takes_exactly_one_password_source_and_kafkas_iteration_bounds() {
        let ok = parse(&["set", "alice", "--password", "p"]).unwrap();
        let UserCommand::Set { mechanism, iterations, .. } = ok else { panic!("{ok:?}") };
        assert_eq!((mechanism, iterations), (Mechanism::Sha512, 4096));
        assert!(parse(&["set", "alice", "--password-stdin", "--mechanism", "scram-sha-256"]).is_ok());
        assert!(parse(&["set", "alice"]).is_err(), "no password");
        assert!(parse(&["set", "alice", "--password", "p", "--password-stdin"]).is_err(), "two passwords");
        assert!(parse(&["set", "alice", "--password", "p", "--iterations", "4095"]).is_err());
        assert!(parse(&["set", "alice", "--password", "p", "--iterations", "16384"]).is_ok());
        assert!(parse(&["set", "alice", "--password", "p", "--iterations", "16385"]).is_err());
    }

    #[test]
    fn mechanisms_are_named_as_kafka_names_them_in_any_case() {
        assert_eq!(parse_mechanism("SCRAM-SHA-256"), Ok(Mechanism::Sha256));
        assert_eq!(parse_mechanism("scram-sha-512"), Ok(Mechanism::Sha512));
        let e = parse_mechanism("SHA-1").unwrap_err();
        assert!(e.contains("SCRAM-SHA-256 or SCRAM-SHA-512"), "{e}");
    }

    #[test]
    fn the_password_is_the_first_line_without_its_ending() {
        assert_eq!(read_password(&b"s3cret\nignored\n"[..]).unwrap(), "s3cret");
        assert_eq!(read_password(&b"pass word\r\n"[..]).unwrap(), "pass word");
        assert_eq!(read_password(&b"no-newline"[..]).unwrap(), "no-newline");
        assert!(read_password(&b"\n"[..]).is_err());
        assert!(read_password(&b""[..]).is_err());
    }

    #[test]
    fn unknown_mechanism_codes_are_shown_not_dropped() {
        assert_eq!(mechanism_name(1), "SCRAM-SHA-256");
        assert_eq!(mechanism_name(2), "SCRAM-SHA-512");
        assert_eq!(mechanism_name(0), "UNKNOWN(0)");
    }
}
