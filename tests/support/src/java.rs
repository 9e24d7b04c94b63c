//! The Java interop harness (tests/java: the Apache Kafka Java client, `ringbroker.interop.Main`).
//!
//! [`command`] builds the Maven project once per test binary (and, through a lock file, once at a
//! time across test binaries running in parallel), then returns a `java` command for a subcommand
//! of the harness. Missing `mvn` or `java` is a test failure with a message, never a skip.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The Maven project: `tests/java`, beside this crate (`tests/support`).
pub fn project_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/support is in tests/").join("java")
}

/// The harness's runtime classpath (compiled classes + dependencies copied to target/lib by
/// `mvn package`). `lib/*` is expanded by the `java` launcher itself.
pub fn classpath() -> String {
    static BUILT: OnceLock<Result<String, String>> = OnceLock::new();
    match BUILT.get_or_init(build) {
        Ok(cp) => cp.clone(),
        Err(e) => panic!("{e}"),
    }
}

/// The classpath of a Kafka Connect worker with the file connectors (`tests/connect`, built by
/// Maven on first use): `tests/connect/target/lib/*`.
pub fn connect_classpath() -> String {
    static BUILT: OnceLock<Result<String, String>> = OnceLock::new();
    match BUILT.get_or_init(build_connect) {
        Ok(cp) => cp.clone(),
        Err(e) => panic!("{e}"),
    }
}

/// `java -cp <Connect's classpath> <class> <args>`, with Connect's logging at WARN.
pub fn connect_tool(class: &str, args: &[&str]) -> Command {
    let mut c = Command::new(java_bin());
    c.arg("-Xmx512m")
        .arg("-XX:+UseSerialGC")
        .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
        .arg("-cp")
        .arg(connect_classpath())
        .arg(class)
        .args(args)
        .stdin(Stdio::null());
    c
}

fn build_connect() -> Result<String, String> {
    require_tool(Command::new(java_bin()).arg("-version"), "java (JDK 17+)")?;
    require_tool(Command::new("mvn").arg("-v"), "Maven (mvn)")?;
    let dir = project_dir().parent().expect("tests/").join("connect");
    maven_package(&dir, &[])?;
    let lib = dir.join("target").join("lib");
    let has_runtime = std::fs::read_dir(&lib)
        .map_err(|e| format!("Maven succeeded but {} is unreadable: {e}", lib.display()))?
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().starts_with("connect-runtime-"));
    if !has_runtime {
        return Err(format!("Maven succeeded but {} holds no connect-runtime jar", lib.display()));
    }
    Ok(format!("{}/*", lib.display()))
}

/// `mvn package` of the Maven project in `dir` (with `args`), one build at a time across
/// processes (test binaries may run concurrently, e.g. under nextest; threads of one binary
/// are serialized by their OnceLock already). The lock file lives in the build output
/// (`target/`), like everything else the build makes.
fn maven_package(dir: &Path, args: &[&str]) -> Result<(), String> {
    let pom = dir.join("pom.xml");
    let target = dir.join("target");
    std::fs::create_dir_all(&target).map_err(|e| format!("create {}: {e}", target.display()))?;
    let lock_path = target.join(".ringbroker-build.lock");
    let lock: File = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("open {}: {e}", lock_path.display()))?;
    lock.lock().map_err(|e| format!("lock {}: {e}", lock_path.display()))?;
    let mut mvn = Command::new("mvn");
    mvn.arg("-q").arg("-B").arg("-f").arg(&pom).arg("package").args(args);
    if let Ok(extra) = std::env::var("RINGBROKER_MVN_ARGS") {
        // e.g. RINGBROKER_MVN_ARGS=-o to build offline from ~/.m2.
        mvn.args(extra.split_whitespace());
    }
    let out =
        mvn.stdin(Stdio::null()).output().map_err(|e| format!("could not run Maven for {}: {e}", pom.display()))?;
    let _ = lock.unlock();
    if !out.status.success() {
        return Err(format!(
            "building {} failed: `{mvn:?}` exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// `java -cp … ringbroker.interop.Main <args>`, with client logging at WARN.
/// Builds the harness first if this test binary has not yet.
pub fn command(args: &[&str]) -> Command {
    tool("ringbroker.interop.Main", args)
}

/// `java -cp … <class> <args>`: the `main` of any class on the harness's classpath (kafka-clients
/// and kafka-tools), with the same JVM and logging settings as [`command`]. Kafka's `bin/*.sh`
/// scripts are thin wrappers around such classes.
///
/// `bin/kafka-acls.sh` is `org.apache.kafka.tools.AclCommand`, e.g.
///
/// ```ignore
/// let out = java::tool(
///     "org.apache.kafka.tools.AclCommand",
///     &["--bootstrap-server", &addr, "--command-config", props, // props: security settings (see write_props)
///       "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t"],
/// )
/// .output()
/// .unwrap();
/// ```
///
/// `--list [--topic T | --group G | --cluster | --transactional-id X]` prints the bindings;
/// `--remove` needs `--force` (without it the tool asks on the console, finds none, and fails
/// with a NullPointerException, removing nothing). `--producer` / `--consumer
/// --group G` add the usual sets of operations; `--resource-pattern-type prefixed` makes prefixed
/// bindings. `--add` and `--list` print the bindings on stdout. When the broker rejects a request
/// the tool exits 1 and prints `Error while executing ACL command: <exception>` and the stack
/// trace on stdout (not stderr); `--help` also exits 1.
pub fn tool(class: &str, args: &[&str]) -> Command {
    let cp = classpath();
    let mut c = Command::new(java_bin());
    // 1 GiB: history-verify holds the history of a cluster test's millions of sends.
    c.arg("-Xmx1g")
        .arg("-XX:+UseSerialGC")
        .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
        .arg("-cp")
        .arg(cp)
        .arg(class)
        .args(args)
        .stdin(Stdio::null());
    c
}

/// Writes a Java properties file (`--props` of the harness's security subcommands,
/// `--command-config` of Kafka's tools) and returns its path.
pub fn write_props<K: AsRef<str>, V: AsRef<str>>(path: &Path, entries: &[(K, V)]) -> PathBuf {
    let escape = |s: &str, key: bool| {
        let mut out = String::with_capacity(s.len());
        for ch in s.chars() {
            match ch {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '=' | ':' | ' ' | '#' | '!' if key => {
                    out.push('\\');
                    out.push(ch);
                }
                // Kafka's tools load the file as ISO 8859-1: anything else as \uXXXX.
                _ if !ch.is_ascii() => {
                    for unit in ch.encode_utf16(&mut [0; 2]) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
                _ => out.push(ch),
            }
        }
        out
    };
    let mut text = String::new();
    for (k, v) in entries {
        text.push_str(&format!("{}={}\n", escape(k.as_ref(), true), escape(v.as_ref(), false)));
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path.to_path_buf()
}

/// Runs the command to completion, echoing its stdout/stderr into the test's captured output.
pub fn run(args: &[&str]) -> Output {
    let out = command(args).output().expect("spawn java for the interop harness");
    print_output(args.first().copied().unwrap_or("java"), &out);
    out
}

/// Prints a finished harness run (captured by the test harness, shown when a test fails).
pub fn print_output(what: &str, out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("---- java {what}: {} ----", out.status);
    for l in stdout.lines() {
        println!("[java {what} stdout] {l}");
    }
    for l in stderr.lines() {
        println!("[java {what} stderr] {l}");
    }
}

/// The last `n` lines of a run's stderr and stdout, for assertion messages.
pub fn tail(out: &Output, n: usize) -> String {
    let mut s = String::new();
    for (name, bytes) in [("stderr", &out.stderr), ("stdout", &out.stdout)] {
        let text = String::from_utf8_lossy(bytes);
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(n);
        s.push_str(&format!("--- {name} (last {} lines) ---\n", lines.len() - from));
        for l in &lines[from..] {
            s.push_str(l);
            s.push('\n');
        }
    }
    s
}

fn java_bin() -> PathBuf {
    match std::env::var_os("JAVA_HOME") {
        Some(h) if Path::new(&h).join("bin/java").exists() => Path::new(&h).join("bin/java"),
        _ => PathBuf::from("java"),
    }
}

fn require_tool(cmd: &mut Command, what: &str) -> Result<(), String> {
    match cmd.stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(st) if st.success() => Ok(()),
        Ok(st) => Err(format!(
            "the Java interop tests need {what}, but `{cmd:?}` exited with {st}; \
             install a JDK 17+ and Maven 3.8+ (e.g. `apt-get install openjdk-17-jdk-headless maven`)"
        )),
        Err(e) => Err(format!(
            "the Java interop tests need {what}, but `{cmd:?}` could not run: {e}; \
             install a JDK 17+ and Maven 3.8+ (e.g. `apt-get install openjdk-17-jdk-headless maven`)"
        )),
    }
}

fn build() -> Result<String, String> {
    require_tool(Command::new(java_bin()).arg("-version"), "java (JDK 17+)")?;
    require_tool(Command::new("mvn").arg("-v"), "Maven (mvn)")?;

    let dir = project_dir();
    maven_package(&dir, &["-DskipTests"])?;
    let target = dir.join("target");

    let classes = target.join("classes");
    let lib = target.join("lib");
    if !classes.join("ringbroker/interop/Main.class").exists() {
        return Err(format!("Maven succeeded but {} has no ringbroker/interop/Main.class", classes.display()));
    }
    let has_client = std::fs::read_dir(&lib)
        .map_err(|e| format!("Maven succeeded but {} is unreadable: {e}", lib.display()))?
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().starts_with("kafka-clients-"));
    if !has_client {
        return Err(format!("Maven succeeded but {} holds no kafka-clients jar", lib.display()));
    }
    Ok(format!("{}:{}/*", classes.display(), lib.display()))
}
