//! The librdkafka setup the tests share: a client config for a test broker, one client
//! context that keeps what librdkafka reports (log lines, errors, delivery reports,
//! rebalances) for assertions and failure messages, producing against the client's queue
//! limit, and a way to wait for the admin client's futures without an async runtime.
//!
//! Set `RDKAFKA_DEBUG=protocol,msg,fetch` (any librdkafka `debug` contexts) to turn those
//! contexts on in every client and see the log live on stderr.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message, ToBytes};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::{ClientContext, TopicPartitionList};

/// Log lines kept per client: the oldest half goes when there are more.
const LOG_LINES: usize = 20_000;

/// A client config for the broker at `bootstrap`: IPv4 (test brokers listen on 127.0.0.1),
/// librdkafka's log from NOTICE up, and the debug contexts of `$RDKAFKA_DEBUG`.
pub(crate) fn config(bootstrap: &str) -> ClientConfig {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", bootstrap).set("broker.address.family", "v4");
    cfg.set_log_level(RDKafkaLogLevel::Notice);
    debug(&mut cfg, "");
    cfg
}

/// Turns on the librdkafka `debug` contexts `contexts` (comma-separated, may be empty) and
/// those in `$RDKAFKA_DEBUG`, with the log level that lets their lines through.
pub(crate) fn debug(cfg: &mut ClientConfig, contexts: &str) {
    let env = std::env::var("RDKAFKA_DEBUG").unwrap_or_default();
    let mut all: Vec<&str> =
        contexts.split(',').chain(env.split(',')).map(str::trim).filter(|c| !c.is_empty()).collect();
    all.dedup();
    if !all.is_empty() {
        cfg.set("debug", all.join(","));
        cfg.set_log_level(RDKafkaLogLevel::Debug);
    }
}

/// How a record's delivery ended: where it was appended, or librdkafka's error.
pub(crate) type Ack = Result<(i32, i64), String>;

/// One context for admin clients, producers and consumers. Records are sent with their index
/// as the delivery opaque (`BaseRecord::with_opaque_to(topic, i)`), so reports say which
/// record they are about.
pub(crate) struct Ctx {
    /// Prefixes the live log lines (`RDKAFKA_DEBUG`).
    name: String,
    live: bool,
    logs: Mutex<Vec<String>>,
    errors: Mutex<Vec<String>>,
    /// Every delivery report in arrival order: (record index, outcome).
    deliveries: Mutex<Vec<(usize, Ack)>>,
    rebalances: Mutex<Vec<String>>,
    /// Log lines containing `watch`, counted as they arrive (the kept log is bounded).
    watch: Option<&'static str>,
    watched: AtomicU64,
}

/// Locks ignoring poison: librdkafka calls back into the context while a client is dropped,
/// also while a failed assertion unwinds, and a second panic there would abort the test process
/// (leaving its broker running).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Ctx {
    pub(crate) fn new(name: &str) -> Ctx {
        Ctx {
            name: name.to_string(),
            live: std::env::var("RDKAFKA_DEBUG").is_ok_and(|d| !d.is_empty()),
            logs: Mutex::default(),
            errors: Mutex::default(),
            deliveries: Mutex::default(),
            rebalances: Mutex::default(),
            watch: None,
            watched: AtomicU64::new(0),
        }
    }

    /// Also counts the log lines that contain `pattern` (see [`Ctx::watched`]).
    pub(crate) fn counting(self, pattern: &'static str) -> Ctx {
        Ctx { watch: Some(pattern), ..self }
    }

    fn push_log(&self, line: String) {
        if self.live {
            eprintln!("[{}] {line}", self.name);
        }
        if self.watch.is_some_and(|w| line.contains(w)) {
            self.watched.fetch_add(1, Ordering::Relaxed);
        }
        let mut logs = lock(&self.logs);
        if logs.len() >= LOG_LINES {
            logs.drain(..LOG_LINES / 2);
        }
        logs.push(line);
    }

    /// The log lines kept so far.
    pub(crate) fn logs(&self) -> Vec<String> {
        lock(&self.logs).clone()
    }

    /// The last `n` log lines, indented, for failure messages.
    pub(crate) fn log_tail(&self, n: usize) -> String {
        let logs = lock(&self.logs);
        if logs.is_empty() {
            return "  (no librdkafka log lines)".into();
        }
        logs[logs.len().saturating_sub(n)..].iter().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
    }

    /// The errors librdkafka reported (failed logins, lost connections...).
    pub(crate) fn errors(&self) -> Vec<String> {
        lock(&self.errors).clone()
    }

    /// Every delivery report so far, in arrival order.
    pub(crate) fn deliveries(&self) -> Vec<(usize, Ack)> {
        lock(&self.deliveries).clone()
    }

    /// The first delivery report of each of records `0..n` (`None`: none yet).
    pub(crate) fn acks(&self, n: usize) -> Vec<Option<Ack>> {
        let mut acks = vec![None; n];
        for (i, ack) in lock(&self.deliveries).iter() {
            if let Some(slot @ None) = acks.get_mut(*i) {
                *slot = Some(ack.clone());
            }
        }
        acks
    }

    /// The records of `0..n` reported more than once, and any reported index past `n`.
    pub(crate) fn duplicate_reports(&self, n: usize) -> Vec<usize> {
        let mut seen = vec![false; n];
        let mut dups = Vec::new();
        for (i, _) in lock(&self.deliveries).iter() {
            match seen.get_mut(*i) {
                Some(s @ false) => *s = true,
                _ => dups.push(*i),
            }
        }
        dups
    }

    /// The consumer's rebalances so far: `assign P:OFFSET,...`, `revoke ...` or `error ...`.
    pub(crate) fn rebalances(&self) -> Vec<String> {
        lock(&self.rebalances).clone()
    }

    /// How many log lines contained the pattern given to [`Ctx::counting`].
    pub(crate) fn watched(&self) -> u64 {
        self.watched.load(Ordering::Relaxed)
    }
}

impl ClientContext for Ctx {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        self.push_log(format!("{level:?} {fac}: {log_message}"));
    }

    fn error(&self, error: KafkaError, reason: &str) {
        lock(&self.errors).push(format!("{error}: {reason}"));
        self.push_log(format!("ERROR {error}: {reason}"));
    }
}

impl ProducerContext for Ctx {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, i: usize) {
        let ack = match result {
            Ok(m) => Ok((m.partition(), m.offset())),
            Err((e, m)) => Err(format!("{e} (partition {})", m.partition())),
        };
        lock(&self.deliveries).push((i, ack));
    }
}

fn describe_tpl(tpl: &TopicPartitionList) -> String {
    tpl.elements().iter().map(|e| format!("{}:{:?}", e.partition(), e.offset())).collect::<Vec<_>>().join(",")
}

impl ConsumerContext for Ctx {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let what = match rebalance {
            Rebalance::Assign(tpl) => format!("assign {}", describe_tpl(tpl)),
            Rebalance::Revoke(tpl) => format!("revoke {}", describe_tpl(tpl)),
            Rebalance::Error(e) => format!("error {e}"),
        };
        lock(&self.rebalances).push(what);
    }
}

/// Queues `record`, serving delivery reports while librdkafka's queue is full; panics, with
/// `what` and the log tail, if it stays full until `deadline` or the send fails otherwise.
pub(crate) fn send<K, P>(
    producer: &BaseProducer<Ctx>,
    mut record: BaseRecord<'_, K, P, usize>,
    deadline: Instant,
    what: &str,
) where
    K: ToBytes + ?Sized,
    P: ToBytes + ?Sized,
{
    loop {
        match producer.send(record) {
            Ok(()) => return,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                assert!(
                    Instant::now() < deadline,
                    "{what}: the producer queue stayed full until the deadline: the broker is not \
                     acknowledging\nlog tail:\n{}",
                    producer.context().log_tail(30)
                );
                record = back;
                producer.poll(Duration::from_millis(20));
            }
            Err((e, _)) => panic!("{what}: the send failed at once: {e}"),
        }
    }
}

/// Drives a future on this thread: rdkafka's AdminClient completes its futures from its own
/// polling thread, so no async runtime is needed. `None` on timeout.
pub(crate) fn block_on<F: std::future::Future>(fut: F, timeout: Duration) -> Option<F::Output> {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    let deadline = Instant::now() + timeout;
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Some(v);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::park_timeout((deadline - now).min(Duration::from_millis(50)));
    }
}
