use clap::Parser;
use ringbroker::cli::Cli;
use ringbroker::config::{Config, LogFormat};

fn main() {
    let mut cli = Cli::parse();
    if let Some(command) = cli.command.take() {
        std::process::exit(ringbroker::cli::run(command));
    }
    // Settings first: they choose the log format and level. Their errors go to stderr as
    // plain text either way.
    let cfg = match Config::load(&cli.flags) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ringbroker: {e}");
            std::process::exit(2);
        }
    };
    init_logging(&cfg);
    if let Err(e) = ringbroker::server::run(cfg) {
        eprintln!("ringbroker: {e}");
        // A setting that only proves wrong against the machine (CPUs) is still a bad setting.
        let code = if matches!(e, ringbroker::error::BrokerError::Config(_)) { 2 } else { 1 };
        std::process::exit(code);
    }
}

/// Logs to stderr as text or JSON lines, filtered by `RUST_LOG` when it is set (as every
/// tracing-based tool does) and by `log_level` otherwise (validated with the config).
fn init_logging(cfg: &Config) {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var(EnvFilter::DEFAULT_ENV) {
        Ok(v) if !v.is_empty() => EnvFilter::try_new(&v).unwrap_or_else(|e| {
            eprintln!("ringbroker: ignoring RUST_LOG=`{v}` ({e}); using log_level `{}`", cfg.log_level);
            EnvFilter::new(&cfg.log_level)
        }),
        _ => EnvFilter::new(&cfg.log_level),
    };
    // Colours only for a person at a terminal, not in files or the journal.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match cfg.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
