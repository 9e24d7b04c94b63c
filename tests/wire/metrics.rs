//! The admin listener's Prometheus endpoint on the real broker: what produce and fetch
//! traffic does to the counters, gauges and histograms, that a scrape returns while shards
//! are busy, that bad HTTP is answered 400 without harm, and the logging options (JSON
//! lines, per-module levels, the shard → CPU → NUMA node placement lines).
//!
//! No timing assertions: only counts, and well-formedness of what is printed.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use ringbroker::protocol::messages::{ApiKey, FetchResponse, ProduceResponse};
use support::client::{batch, fetch_request, now_ms, produce_request, value, wait_until, Client, FETCH_V, PRODUCE_V};
use support::Broker;

type Labels = BTreeMap<String, String>;

/// One sample line: metric name, labels, value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: Labels,
    value: f64,
}

/// A scraped page, parsed.
struct Page {
    text: String,
    samples: Vec<Sample>,
}

impl Page {
    /// Sum of `name` over the series whose labels include every pair in `filter`.
    fn sum(&self, name: &str, filter: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name && filter.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
            .map(|s| s.value)
            .sum()
    }

    fn count(&self, name: &str) -> usize {
        self.samples.iter().filter(|s| s.name == name).count()
    }
}

fn parse_labels(s: &str) -> Labels {
    let mut out = BTreeMap::new();
    let mut rest = s;
    while let Some((key, after)) = rest.split_once("=\"") {
        let end = after.find('"').expect("closing quote of a label value");
        out.insert(key.trim_start_matches(',').to_string(), after[..end].to_string());
        rest = &after[end + 1..];
    }
    out
}

fn parse_page(text: String) -> Page {
    let samples = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap_or_else(|| panic!("no value on line {l:?}"));
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, parse_labels(rest.strip_suffix('}').expect("closing brace"))),
                None => (series, BTreeMap::new()),
            };
            let value = match value {
                "+Inf" => f64::INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("value {v:?} on line {l:?}")),
            };
            Sample { name: name.to_string(), labels, value }
        })
        .collect();
    Page { text, samples }
}

/// Sends `request` to the admin listener and returns (status line, body). The connection is
/// closed by the broker after one response.
fn http(admin: SocketAddr, request: &[u8]) -> (String, String) {
    let mut s = TcpStream::connect_timeout(&admin, Duration::from_secs(10)).expect("connect to the admin listener");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(request).expect("send the HTTP request");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read the HTTP response (a scrape must not hang)");
    let raw = String::from_utf8(raw).expect("utf-8 response");
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no header end in {raw:?}"));
    let status = head.lines().next().unwrap_or_default().to_string();
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap())
        })
        .expect("a Content-Length header");
    assert_eq!(length, body.len(), "Content-Length matches the body");
    (status, body.to_string())
}

fn scrape(b: &Broker) -> Page {
    let admin = b.admin_addr.expect("the test broker runs an admin listener");
    let (status, body) = http(admin, b"GET /metrics HTTP/1.1\r\nHost: ringbroker\r\nAccept: */*\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    let page = parse_page(body);
    check_histograms(&page);
    page
}

/// Every histogram series: cumulative buckets never decrease, the last is +Inf, and +Inf
/// equals `_count`.
fn check_histograms(page: &Page) {
    // (histogram name, labels without `le`) → its buckets as (le, cumulative count)
    let mut series: BTreeMap<(String, Labels), Vec<(String, f64)>> = BTreeMap::new();
    for s in page.samples.iter().filter(|s| s.name.ends_with("_bucket")) {
        let mut labels = s.labels.clone();
        let le = labels.remove("le").unwrap_or_else(|| panic!("a bucket without le: {s:?}"));
        let base = s.name.strip_suffix("_bucket").unwrap().to_string();
        series.entry((base, labels)).or_default().push((le, s.value));
    }
    assert!(!series.is_empty(), "no histogram on the page:\n{}", page.text);
    for ((name, labels), buckets) in &series {
        assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{name}{labels:?}: buckets decrease: {buckets:?}");
        let bounds: Vec<f64> =
            buckets.iter().map(|(le, _)| if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap() }).collect();
        assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{name}: bounds not increasing: {bounds:?}");
        let (last_le, last) = buckets.last().unwrap();
        assert_eq!(last_le, "+Inf", "{name}{labels:?}: the last bucket is +Inf");
        let count = page
            .samples
            .iter()
            .find(|s| s.name == format!("{name}_count") && &s.labels == labels)
            .unwrap_or_else(|| panic!("{name}{labels:?} has no _count"));
        assert_eq!(*last, count.value, "{name}{labels:?}: +Inf bucket equals _count");
        assert!(
            page.samples.iter().any(|s| s.name == format!("{name}_sum") && &s.labels == labels),
            "{name}{labels:?} has no _sum"
        );
    }
}

/// Scrapes until `cond` holds (a response reaches the client just before the broker
/// records its request), then returns that page.
fn scrape_until(b: &Broker, what: &str, cond: impl Fn(&Page) -> bool) -> Page {
    let mut last = None;
    let held = wait_until(Duration::from_secs(30), || {
        let page = scrape(b);
        let ok = cond(&page);
        last = Some(page);
        ok
    });
    let page = last.expect("scraped at least once");
    assert!(held, "{what}; the page:\n{}", page.text);
    page
}

fn produce(c: &mut Client, topic: &str, partition: i32, records: Vec<u8>) {
    let r: ProduceResponse = c.call(ApiKey::Produce, PRODUCE_V, &produce_request(topic, &[(partition, records)], -1));
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0, "producing to {topic}-{partition}");
}

#[test]
fn produce_and_fetch_traffic_shows_on_the_metrics_page() {
    let b = Broker::start_args(&["--flush", "always"]);
    let before = scrape(&b);
    let shards = before.count("ringbroker_shard_info");
    assert!(shards >= 1, "one shard_info line per shard:\n{}", before.text);
    assert!(before.text.contains("# TYPE ringbroker_fsync_duration_seconds histogram"), "{}", before.text);
    let partitions_before = before.sum("ringbroker_partitions", &[]);
    assert!(partitions_before >= shards as f64, "each shard homes an offsets partition");

    let mut c = Client::connect(b.addr);
    c.create_topic("metered", 4, &[]);
    let (produces, fetches) = (24, 10);
    let mut produced_bytes = 0;
    for i in 0..produces {
        let records = batch(now_ms(), &[value("m", i, 300), value("n", i, 500)]);
        produced_bytes += records.len();
        produce(&mut c, "metered", (i % 4) as i32, records);
    }
    // A delayed fetch parks at the end of the log while the page is scraped.
    let end = c.latest("metered", 0);
    let waiter = std::thread::spawn({
        let addr = b.addr;
        move || {
            let mut w = Client::connect(addr);
            let mut req = fetch_request("metered", 0, end, 1 << 20);
            req.max_wait_ms = 1_500;
            req.min_bytes = 1;
            let r: FetchResponse = w.call(ApiKey::Fetch, FETCH_V, &req);
            assert_eq!(r.responses[0].partitions[0].error_code, 0);
        }
    });
    let requests = |p: &Page, api: &str| p.sum("ringbroker_requests_total", &[("api", api)]);
    let during = scrape_until(&b, "every produce counted", |p| requests(p, "Produce") >= produces as f64);
    for i in 0..fetches {
        let p = c.fetch("metered", i % 4, 0, 1 << 20);
        assert_eq!(p.error_code, 0);
        assert!(p.records.is_some(), "records in partition {}", i % 4);
    }
    waiter.join().expect("the delayed fetch ends");
    let fetched = |p: &Page| requests(p, "Fetch") - requests(&before, "Fetch") >= fetches as f64 + 1.0;
    let after = scrape_until(&b, "every fetch counted", fetched);

    assert_eq!(during.count("ringbroker_shard_info"), shards);
    assert!(requests(&after, "Produce") - requests(&before, "Produce") >= produces as f64);
    assert!(requests(&after, "CreateTopics") >= 1.0);
    // Every phase histogram counts each finished request once.
    for phase in ["queue", "local", "remote", "total"] {
        let name = format!("ringbroker_request_{phase}_time_seconds_count");
        assert_eq!(after.sum(&name, &[("api", "Produce")]), requests(&after, "Produce"), "{name}");
    }
    for name in ["ringbroker_response_queue_time_seconds_count", "ringbroker_response_send_time_seconds_count"] {
        assert_eq!(after.sum(name, &[("api", "Fetch")]), requests(&after, "Fetch"), "{name}");
    }

    let received = after.sum("ringbroker_network_received_bytes_total", &[])
        - before.sum("ringbroker_network_received_bytes_total", &[]);
    assert!(received >= produced_bytes as f64, "received {received} < produced {produced_bytes}");
    assert!(
        after.sum("ringbroker_network_sent_bytes_total", &[]) > before.sum("ringbroker_network_sent_bytes_total", &[])
    );
    assert!(after.sum("ringbroker_log_bytes", &[]) >= produced_bytes as f64, "{}", after.text);
    assert!(after.sum("ringbroker_fsync_duration_seconds_count", &[]) > 0.0, "flush=always syncs");
    assert!(after.sum("ringbroker_delayed_produces_total", &[]) > 0.0, "acks waited for the fdatasync");
    assert!(after.sum("ringbroker_delayed_fetches_total", &[]) >= 1.0, "the parked fetch");
    assert_eq!(after.sum("ringbroker_partitions", &[]) - partitions_before, 4.0, "the topic's partitions");
    if shards > 1 {
        // The controller broadcast the new catalog to every other shard.
        assert!(after.sum("ringbroker_mesh_messages_sent_total", &[]) >= (shards - 1) as f64);
        assert!(after.sum("ringbroker_mesh_messages_received_total", &[]) >= (shards - 1) as f64);
    }

    // A request that does not decode closes its connection and is counted as an error.
    let errors = |p: &Page| p.sum("ringbroker_request_errors_total", &[("api", "Produce"), ("error", "decode")]);
    let closed_on_error = |p: &Page| p.sum("ringbroker_connections_closed_total", &[("reason", "error")]);
    let mut bad = Client::connect(b.addr);
    bad.write_raw(&Client::raw_frame(ApiKey::Produce as i16, PRODUCE_V, 1, 2, &[0xff; 3])).unwrap();
    assert!(bad.wait_closed(Duration::from_secs(30)), "the broker closes a connection sending garbage");
    scrape_until(&b, "the decode failure counted", |p| errors(p) >= 1.0 && closed_on_error(p) >= 1.0);
    // Answers with a Kafka error code count too.
    let r: ProduceResponse =
        c.call(ApiKey::Produce, PRODUCE_V, &produce_request("metered", &[(99, batch(now_ms(), &[vec![1]]))], -1));
    assert_ne!(r.responses[0].partition_responses[0].error_code, 0);
    scrape_until(&b, "the error code counted", |p| {
        p.sum("ringbroker_request_errors_total", &[("api", "Produce"), ("error", "error_code")]) >= 1.0
    });
}

#[test]
fn the_connections_gauge_follows_open_connections() {
    let b = Broker::start();
    let open = |b: &Broker| scrape(b).sum("ringbroker_connections_open", &[]);
    let accepted = |b: &Broker| scrape(b).sum("ringbroker_connections_accepted_total", &[]);
    assert!(wait_until(Duration::from_secs(30), || open(&b) == 0.0), "{}", scrape(&b).text);
    let accepted_before = accepted(&b);
    let mut clients: Vec<Client> = (0..5).map(|_| Client::connect(b.addr)).collect();
    // A round trip on each: the broker has accepted them all.
    for c in &mut clients {
        assert_eq!(c.api_versions().error_code, 0);
    }
    assert_eq!(open(&b), 5.0, "{}", scrape(&b).text);
    assert_eq!(accepted(&b) - accepted_before, 5.0);
    clients.truncate(2);
    scrape_until(&b, "three clients closed", |p| p.sum("ringbroker_connections_open", &[]) == 2.0);
    drop(clients);
    scrape_until(&b, "all clients closed", |p| {
        p.sum("ringbroker_connections_open", &[]) == 0.0
            && p.sum("ringbroker_connections_closed_total", &[("reason", "client")]) == 5.0
    });
}

#[test]
fn connections_spread_evenly_over_the_shards() {
    // SO_REUSEPORT alone spreads by a hash of the peer's port, so 12 connections rarely split
    // 6/6 over two shards (about one time in five); handing them over always does.
    let b = Broker::start_args(&["--cpus", "0,1"]);
    let on_shard = |p: &Page, shard: &str| p.sum("ringbroker_connections_open", &[("shard", shard)]);
    for round in 0..2 {
        let mut clients: Vec<Client> = (0..12).map(|_| Client::connect(b.addr)).collect();
        for c in &mut clients {
            assert_eq!(c.api_versions().error_code, 0, "every connection is served");
        }
        let p = scrape(&b);
        assert_eq!((on_shard(&p, "0"), on_shard(&p, "1")), (6.0, 6.0), "round {round}: {}", p.text);
        drop(clients);
        scrape_until(&b, "all clients closed", |p| p.sum("ringbroker_connections_open", &[]) == 0.0);
    }
}

#[test]
fn a_scrape_returns_while_shards_are_busy() {
    let b = Broker::start();
    let mut c = Client::connect(b.addr);
    c.create_topic("busy", 4, &[]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut load = Vec::new();
    for t in 0..3 {
        let (addr, stop) = (b.addr, stop.clone());
        load.push(std::thread::spawn(move || {
            let mut c = Client::connect(addr);
            let big = value("busy", t, 64 * 1024);
            // Bounded: at most 50 rounds of 8 pipelined produces of 4 × 64 KiB.
            for round in 0..50 {
                if stop.load(std::sync::atomic::Ordering::Relaxed) && round > 0 {
                    break;
                }
                for p in 0..8 {
                    let records = batch(now_ms(), &[big.clone(), big.clone(), big.clone(), big.clone()]);
                    c.send(ApiKey::Produce, PRODUCE_V, &produce_request("busy", &[(p % 4, records)], -1));
                }
                for _ in 0..8 {
                    let r: ProduceResponse = c.recv();
                    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
                }
            }
        }));
    }
    // Fetches parked on every partition at the same time.
    let parked: Vec<_> = (0..4)
        .map(|p| {
            let addr = b.addr;
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                // More than will ever be there: parked until max_wait, woken by every append.
                let mut req = fetch_request("busy", p, 0, 1 << 20);
                req.max_wait_ms = 2_000;
                req.min_bytes = 1 << 30;
                let _: FetchResponse = c.call(ApiKey::Fetch, FETCH_V, &req);
            })
        })
        .collect();
    for _ in 0..20 {
        let page = scrape(&b);
        assert!(page.count("ringbroker_shard_info") >= 1);
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in load.into_iter().chain(parked) {
        t.join().expect("client thread");
    }
    scrape_until(&b, "every thread's first round counted", |p| {
        p.sum("ringbroker_requests_total", &[("api", "Produce")]) >= 3.0 * 8.0
    });
    assert_eq!(c.api_versions().error_code, 0, "the broker still serves");
}

#[test]
fn bad_http_gets_an_error_status_and_the_broker_lives_on() {
    let b = Broker::start();
    let admin = b.admin_addr.expect("admin listener");
    let (status, _) = http(admin, b"GARBAGE\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 400 Bad Request");
    let (status, _) = http(admin, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 400 Bad Request", "a TLS hello");
    let mut huge = b"GET /metrics HTTP/1.1\r\nX-Filler: ".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 64 * 1024));
    let (status, _) = http(admin, &huge);
    assert_eq!(status, "HTTP/1.1 400 Bad Request", "an endless head");
    let (status, _) = http(admin, b"GET /nothing-here HTTP/1.1\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, _) = http(admin, b"DELETE /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
    // A client that connects and leaves without a word.
    drop(TcpStream::connect(admin).unwrap());
    // Still up, both sides.
    assert!(scrape(&b).count("ringbroker_shard_info") >= 1);
    let mut c = Client::connect(b.addr);
    assert_eq!(c.api_versions().error_code, 0);
}

#[test]
fn the_admin_listener_can_be_turned_off() {
    let b = Broker::start_args(&["--admin-listen", "off"]);
    assert_eq!(b.admin_addr, None);
    let mut c = Client::connect(b.addr);
    assert_eq!(c.api_versions().error_code, 0);
}

/// The broker in `data` with `args`, its stdout and stderr piped, and no RUST_LOG, so that
/// `--log-level` rules its log.
pub(crate) fn logging_broker(data: &std::path::Path, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_ringbroker"))
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ringbroker")
}

/// Runs the broker with `args` until it is ready, stops it, and returns its stderr lines.
fn log_lines(args: &[&str]) -> Vec<String> {
    let data = tempfile::tempdir().expect("temp dir");
    let mut full = vec!["--admin-listen", "127.0.0.1:0"];
    full.extend_from_slice(args);
    let mut child = logging_broker(data.path(), &full);
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let stderr = child.stderr.take().unwrap();
    let err_reader =
        std::thread::spawn(move || BufReader::new(stderr).lines().map_while(Result::ok).collect::<Vec<_>>());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if line.starts_with("ringbroker listening on ") {
                let _ = tx.send(());
            }
        }
    });
    let ready = rx.recv_timeout(Duration::from_secs(60)).is_ok();
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let _ = child.wait();
    let lines = err_reader.join().expect("stderr reader");
    assert!(ready, "ringbroker {args:?} did not start; stderr:\n{}", lines.join("\n"));
    lines
}

#[test]
fn json_logs_carry_one_placement_line_per_shard() {
    let lines = log_lines(&["--log-format", "json"]);
    let shards = ringbroker::sys::allowed_cpus().expect("allowed CPUs").len();
    let mut placements = 0;
    for line in &lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
        assert!(v.get("level").is_some() && v.get("timestamp").is_some(), "{line}");
        let message = v["fields"]["message"].as_str().unwrap_or_default();
        if message.starts_with("shard ") && message.contains(" → CPU ") && message.contains(" → NUMA node ") {
            placements += 1;
        }
    }
    assert_eq!(placements, shards, "one placement line per shard in:\n{}", lines.join("\n"));
}

#[test]
fn log_level_takes_per_module_directives() {
    let placement = |lines: &[String]| lines.iter().filter(|l| l.contains(" → NUMA node ")).count();
    let quiet = log_lines(&["--log-level", "warn"]);
    assert_eq!(placement(&quiet), 0, "warn hides info lines:\n{}", quiet.join("\n"));
    let server = log_lines(&["--log-level", "warn,ringbroker::server=info"]);
    assert!(placement(&server) >= 1, "the server module logs at info:\n{}", server.join("\n"));
    assert!(
        server.iter().all(|l| !l.contains("INFO") || l.contains("ringbroker::server")),
        "only ringbroker::server logs at info:\n{}",
        server.join("\n")
    );
}
