//! One connection's security state: the listener it came in on, who it is (`Session`), and
//! for SASL listeners where it stands in the SASL exchange.
//!
//! Kafka's order on a SASL listener: ApiVersions (optional), SaslHandshake naming a
//! mechanism, then the mechanism's tokens — inside SaslAuthenticate requests (handshake v1),
//! or, after a v0 handshake, as bare size-prefixed frames with no Kafka header (the legacy
//! form). No other request is served before the exchange succeeds; one that arrives closes
//! the connection. A failure is answered after `connection_failed_authentication_delay_ms`
//! (KIP-306; the caller waits it out), and then the connection is closed.
//!
//! Re-authentication (KIP-368): with `connections_max_reauth_ms` set, a session lasts that
//! long (SaslAuthenticate tells the client). The client starts a new SaslHandshake on the
//! same connection before then; it must authenticate as the same principal. A request that
//! arrives after the session has ended closes the connection.
//!
//! Every SCRAM step runs to completion without awaiting, so requests of one connection,
//! whose handler tasks start in arrival order, see each other's state changes in order even
//! when a client pipelines them. A PLAIN check awaits a blocking thread (it is a PBKDF2 run);
//! meanwhile the connection is `Checking` and refuses anything else, so a pipelined request
//! can only be refused early, never served early.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::scram::{AuthFailure, Mechanism, ScramCredential, ScramServer};
use super::{plain, Session};
use crate::listener::Listener;

/// Where a SASL exchange stands.
enum State {
    /// Authenticated, or a listener without SASL.
    Done,
    /// A SASL listener before its SaslHandshake.
    AwaitHandshake,
    /// A mechanism was chosen; its tokens come next.
    Exchange { exchange: Exchange, legacy: bool },
    /// A PLAIN password is being checked off the shard's thread: nothing else is served.
    Checking,
    /// Authentication failed: nothing more is served.
    Failed,
}

enum Exchange {
    Plain,
    /// Boxed: the SCRAM state is much larger than the other variants.
    Scram(Box<ScramServer>),
}

/// A SaslHandshake named a mechanism that is not enabled.
#[derive(Debug, thiserror::Error)]
#[error("SASL mechanism {0} is not enabled")]
pub struct UnsupportedMechanism(pub String);

/// What the dispatcher may do with the next frame.
pub enum Gate {
    /// Parse it as a Kafka request (the caller then checks `admits`).
    Request,
    /// It is a bare SASL token (after a v0 SaslHandshake).
    LegacyToken,
}

/// What a token step produced.
pub enum Step {
    /// The mechanism has more to say: send this challenge and wait for the next token.
    Continue(Vec<u8>),
    /// Authenticated; the last server message (empty for PLAIN) and the session lifetime in ms
    /// (0: forever).
    Done(Vec<u8>, i64),
}

/// Credentials and secrets a step needs from the broker.
pub struct Verifier<'a> {
    /// The user's stored SCRAM credentials (all mechanisms).
    pub lookup: &'a dyn Fn(&str) -> Vec<ScramCredential>,
    /// The broker's key for fake salts of unknown users (see `scram`).
    pub secret: [u8; 32],
    /// `connections_max_reauth_ms` (0: sessions never end).
    pub reauth_ms: u64,
}

pub struct ConnSecurity {
    pub listener: Rc<Listener>,
    pub peer: SocketAddr,
    session: RefCell<Rc<Session>>,
    state: RefCell<State>,
    /// When the session ends (connections_max_reauth_ms), if it does.
    expires: Cell<Option<Instant>>,
    /// Set while a re-authentication is under way: the principal must stay the same.
    reauthenticating: Cell<bool>,
    /// The mechanism of the last successful authentication: a re-authentication must use
    /// the same one, through SaslAuthenticate (as Kafka requires).
    mechanism: RefCell<Option<String>>,
}

impl ConnSecurity {
    /// A connection's state on arrival. `principal` is the client certificate's, if any:
    /// SSL connections are that principal (or ANONYMOUS); SASL connections start
    /// unauthenticated whatever the certificate says.
    pub fn new(listener: Rc<Listener>, peer: SocketAddr, principal: Option<String>) -> ConnSecurity {
        let session = Session {
            principal: principal.unwrap_or_else(|| super::ANONYMOUS.to_string()),
            host: peer.ip().to_canonical(),
        };
        let state = if listener.protocol.sasl() { State::AwaitHandshake } else { State::Done };
        ConnSecurity {
            listener,
            peer,
            session: RefCell::new(Rc::new(session)),
            state: RefCell::new(state),
            expires: Cell::new(None),
            reauthenticating: Cell::new(false),
            mechanism: RefCell::new(None),
        }
    }

    pub fn session(&self) -> Rc<Session> {
        self.session.borrow().clone()
    }

    /// Whether the connection may make requests other than the SASL ones.
    pub fn authenticated(&self) -> bool {
        matches!(*self.state.borrow(), State::Done) && !self.reauthenticating.get()
    }

    /// Whether authentication has failed (the connection is closing).
    pub fn failed(&self) -> bool {
        matches!(*self.state.borrow(), State::Failed)
    }

    pub fn gate(&self) -> Gate {
        match &*self.state.borrow() {
            State::Exchange { legacy: true, .. } => Gate::LegacyToken,
            _ => Gate::Request,
        }
    }

    /// Why a request of this API may not be served now, if it may not: requests other than
    /// ApiVersions and the SASL ones before authentication, and any request but a new
    /// SaslHandshake once the session has expired.
    pub fn refuses(&self, api: proto_kafka::messages::ApiKey, now: Instant) -> Option<String> {
        use proto_kafka::messages::ApiKey;
        let state = self.state.borrow();
        match (&*state, api) {
            (State::Failed, _) => Some("request after a failed authentication".into()),
            (_, ApiKey::ApiVersions) => None,
            (State::AwaitHandshake, ApiKey::SaslHandshake) => None,
            (State::AwaitHandshake, other) => {
                Some(format!("{other:?} before SASL authentication (send SaslHandshake first)"))
            }
            (State::Exchange { legacy: false, .. }, ApiKey::SaslAuthenticate) => None,
            (State::Exchange { .. } | State::Checking, other) => Some(format!("{other:?} during the SASL exchange")),
            // Re-authentication on a SASL listener; elsewhere the handlers answer
            // ILLEGAL_SASL_STATE and the connection stays, as Kafka's (a client set up for
            // SASL against a listener without it learns why it cannot log in).
            (State::Done, ApiKey::SaslHandshake | ApiKey::SaslAuthenticate) => None,
            (State::Done, other) => match self.expires.get() {
                Some(end) if now >= end => Some(format!(
                    "{other:?} after the SASL session expired (connections_max_reauth_ms) without re-authentication"
                )),
                _ => None,
            },
        }
    }

    /// Whether a SASL exchange is under way (SaslAuthenticate carries its next token).
    pub fn exchanging(&self) -> bool {
        matches!(*self.state.borrow(), State::Exchange { .. })
    }

    /// SaslHandshake: starts an exchange with `mechanism` if it is enabled; otherwise the
    /// connection has failed (the caller answers UNSUPPORTED_SASL_MECHANISM with the list).
    pub fn handshake(
        &self,
        mechanism: &str,
        version: i16,
        enabled: &[String],
        secret: [u8; 32],
    ) -> Result<(), UnsupportedMechanism> {
        let name = mechanism.to_ascii_uppercase();
        let reauthenticating = matches!(*self.state.borrow(), State::Done);
        let switching =
            reauthenticating && (version == 0 || self.mechanism.borrow().as_deref().is_some_and(|m| m != name));
        if !enabled.contains(&name) || switching {
            *self.state.borrow_mut() = State::Failed;
            return Err(UnsupportedMechanism(name));
        }
        let exchange = match Mechanism::from_name(&name) {
            Some(m) => Exchange::Scram(Box::new(ScramServer::new(m, secret))),
            None => Exchange::Plain,
        };
        if reauthenticating {
            self.reauthenticating.set(true);
        }
        *self.mechanism.borrow_mut() = Some(name);
        // Handshake v0 means the tokens follow as bare frames (Kafka before 1.0).
        *self.state.borrow_mut() = State::Exchange { exchange, legacy: version == 0 };
        Ok(())
    }

    /// One token of the exchange (from SaslAuthenticate or a bare legacy frame). On a
    /// failure the connection is done for: the caller answers, waits the failed-auth delay
    /// and closes.
    pub async fn step(&self, token: &[u8], verifier: &Verifier<'_>) -> Result<Step, AuthFailure> {
        let plain = matches!(&*self.state.borrow(), State::Exchange { exchange: Exchange::Plain, .. });
        let outcome = match plain {
            true => self.plain(token, verifier).await,
            false => self.advance(token, verifier),
        };
        if outcome.is_err() {
            *self.state.borrow_mut() = State::Failed;
            self.reauthenticating.set(false);
        }
        outcome
    }

    /// PLAIN's token: the password check runs PBKDF2 (milliseconds of CPU), so it runs on a
    /// blocking thread rather than holding up every other connection of the shard; the
    /// connection serves nothing meanwhile (`State::Checking`).
    async fn plain(&self, token: &[u8], verifier: &Verifier<'_>) -> Result<Step, AuthFailure> {
        let (user, _) = plain::parse(token)?;
        let credentials = (verifier.lookup)(&user);
        let (token, secret) = (token.to_vec(), verifier.secret);
        *self.state.borrow_mut() = State::Checking;
        let checked = glommio::executor()
            .spawn_blocking(move || plain::authenticate(&token, |_| credentials.clone(), secret))
            .await;
        self.complete(checked?, Vec::new(), verifier)
    }

    fn advance(&self, token: &[u8], verifier: &Verifier<'_>) -> Result<Step, AuthFailure> {
        let mut state = self.state.borrow_mut();
        let State::Exchange { exchange, .. } = &mut *state else {
            return Err(AuthFailure { message: "no SASL exchange is under way".into() });
        };
        let (user, last) = match exchange {
            Exchange::Plain => unreachable!("PLAIN tokens go through `plain`"),
            Exchange::Scram(server) => {
                if server.awaiting_first() {
                    let lookup = verifier.lookup;
                    let mech = server.mechanism();
                    let first = server.client_first(token, |u| lookup(u).into_iter().find(|c| c.mechanism == mech))?;
                    return Ok(Step::Continue(first));
                }
                let last = server.client_final(token)?;
                let user = server.username().unwrap_or_default().to_string();
                (user, last)
            }
        };
        drop(state);
        self.complete(user, last, verifier)
    }

    /// `user` has proven who it is: the connection is theirs (a re-authentication must be the
    /// same principal), until the session lifetime ends.
    fn complete(&self, user: String, last: Vec<u8>, verifier: &Verifier<'_>) -> Result<Step, AuthFailure> {
        let principal = format!("User:{user}");
        if self.reauthenticating.get() && self.session.borrow().principal != principal {
            return Err(AuthFailure {
                message: format!(
                    "re-authentication as {principal} on a connection of {}: a connection keeps its principal",
                    self.session.borrow().principal
                ),
            });
        }
        *self.state.borrow_mut() = State::Done;
        self.reauthenticating.set(false);
        let host = self.peer.ip().to_canonical();
        *self.session.borrow_mut() = Rc::new(Session { principal, host });
        let lifetime = match verifier.reauth_ms {
            0 => {
                self.expires.set(None);
                0
            }
            ms => {
                self.expires.set(Some(Instant::now() + Duration::from_millis(ms)));
                ms.min(i64::MAX as u64) as i64
            }
        };
        Ok(Step::Done(last, lifetime))
    }
}
