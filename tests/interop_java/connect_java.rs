//! Kafka Connect in distributed mode against the broker (`tests/connect`: connect-runtime and
//! connect-file from Maven Central). The worker creates its three compacted internal topics
//! (configs, offsets, status: it refuses to start if their `cleanup.policy` is not `compact`),
//! a FileStreamSource connector created through its REST API copies a file into a topic, and
//! after a restart of the worker the connector, its config and its source offsets are all
//! still there: lines appended meanwhile are copied once, none of the earlier ones again.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::time::Duration;

use support::client::{wait_until, Client};
use support::{java, Broker};

use crate::machine;

const TOPIC: &str = "connect-lines";
const CONNECTOR: &str = "file-source";

/// One HTTP request to the worker's REST API: (status, body); None if it is not up.
fn http(port: u16, method: &str, path: &str, body: Option<&str>) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let body = body.unwrap_or("");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let status = resp.split(' ').nth(1)?.parse().ok()?;
    let body = resp.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((status, body))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn start_worker(props: &std::path::Path, port: u16) -> Child {
    let child = java::connect_tool("org.apache.kafka.connect.cli.ConnectDistributed", &[&props.display().to_string()])
        .stdout(std::process::Stdio::inherit())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("spawn the Connect worker");
    let up = wait_until(Duration::from_secs(120), || http(port, "GET", "/", None).is_some_and(|(s, _)| s == 200));
    assert!(up, "the Connect worker's REST API answers");
    child
}

fn stop_worker(mut child: Child) {
    let _ = std::process::Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let stopped = wait_until(Duration::from_secs(60), || matches!(child.try_wait(), Ok(Some(_))));
    if !stopped {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The values of every record of the topic's one partition, in order.
fn copied(c: &mut Client) -> Vec<String> {
    c.fetch_all(TOPIC, 0, 0)
        .into_iter()
        .filter_map(|r| r.value)
        .map(|v| String::from_utf8_lossy(&v).into_owned())
        .collect()
}

#[test]
fn kafka_connect_keeps_its_connector_config_and_source_offsets_across_a_restart() {
    let _machine = machine::alone();
    java::connect_classpath();
    let broker = Broker::start_args(&["--flush", "os", "--log-cleaner-backoff-ms", "500"]);
    let mut c = Client::connect(broker.addr);
    assert_eq!(c.create_topic(TOPIC, 1, &[]).error_code, 0);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.txt");
    let lines = |from: usize, to: usize| -> String { (from..to).map(|i| format!("line {i}\n")).collect() };
    std::fs::write(&file, lines(0, 100)).unwrap();
    let port = free_port();
    let props = dir.path().join("worker.properties");
    std::fs::write(
        &props,
        format!(
            "bootstrap.servers={}\n\
             group.id=rb-connect\n\
             key.converter=org.apache.kafka.connect.storage.StringConverter\n\
             value.converter=org.apache.kafka.connect.storage.StringConverter\n\
             config.storage.topic=rb-connect-configs\n\
             offset.storage.topic=rb-connect-offsets\n\
             status.storage.topic=rb-connect-status\n\
             config.storage.replication.factor=1\n\
             offset.storage.replication.factor=1\n\
             status.storage.replication.factor=1\n\
             offset.flush.interval.ms=500\n\
             listeners=http://127.0.0.1:{port}\n",
            broker.bootstrap()
        ),
    )
    .unwrap();

    let worker = start_worker(&props, port);
    let config = format!(
        r#"{{"name":"{CONNECTOR}","config":{{"connector.class":"org.apache.kafka.connect.file.FileStreamSourceConnector","tasks.max":"1","file":"{}","topic":"{TOPIC}"}}}}"#,
        file.display()
    );
    let created = http(port, "POST", "/connectors", Some(&config)).expect("the REST API answers");
    assert_eq!(created.0, 201, "connector created: {}", created.1);
    let want: Vec<String> = (0..100).map(|i| format!("line {i}")).collect();
    let done = wait_until(Duration::from_secs(60), || copied(&mut c).len() >= 100);
    assert!(done, "the file is copied: {} records", copied(&mut c).len());
    assert_eq!(copied(&mut c), want);
    // Its internal topics are compacted, as Connect requires of them.
    for t in ["rb-connect-configs", "rb-connect-offsets", "rb-connect-status"] {
        assert!(c.metadata(Some(&[t]), false).topics[0].error_code == 0, "{t} exists");
    }
    // The source offsets reach the offsets topic before the worker stops.
    std::thread::sleep(Duration::from_secs(2));
    stop_worker(worker);

    std::fs::OpenOptions::new().append(true).open(&file).unwrap().write_all(lines(100, 150).as_bytes()).unwrap();
    let worker = start_worker(&props, port);
    let running = wait_until(Duration::from_secs(60), || {
        http(port, "GET", &format!("/connectors/{CONNECTOR}/status"), None)
            .is_some_and(|(s, b)| s == 200 && b.contains(r#""state":"RUNNING""#) && b.contains(r#""tasks":[{"#))
    });
    assert!(running, "the connector runs again after the restart, from its stored config");
    let (status, stored) = http(port, "GET", &format!("/connectors/{CONNECTOR}/config"), None).unwrap();
    assert!(status == 200 && stored.contains(&file.display().to_string()), "its config: {stored}");
    let all: Vec<String> = (0..150).map(|i| format!("line {i}")).collect();
    let done = wait_until(Duration::from_secs(60), || copied(&mut c).len() >= 150);
    assert!(done, "the appended lines are copied: {} records", copied(&mut c).len());
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(copied(&mut c), all, "each line once: the source offsets survived the restart");
    stop_worker(worker);
}
