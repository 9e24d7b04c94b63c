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
/// tracing-based tool does) and by `log_level` otherwise (validated with the config). The
/// filter can be changed while the broker runs (`loggers`, Kafka's BROKER_LOGGER resource).
fn init_logging(cfg: &Config) {
    use tracing_subscriber::EnvFilter;
    let directives = match std::env::var(EnvFilter::DEFAULT_ENV) {
        Ok(v) if !v.is_empty() => match EnvFilter::try_new(&v) {
            Ok(_) => v,
            Err(e) => {
                eprintln!("ringbroker: ignoring RUST_LOG=`{v}` ({e}); using log_level `{}`", cfg.log_level);
                cfg.log_level.clone()
            }
        },
        _ => cfg.log_level.clone(),
    };
    // Colours only for a person at a terminal, not in files or the journal.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(&directives))
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    // The reload handle's type names the formatter, so each format installs its own hook.
    macro_rules! install {
        ($builder:expr) => {{
            let builder = $builder.with_filter_reloading();
            let handle = builder.reload_handle();
            ringbroker::loggers::Loggers::install(
                &directives,
                Box::new(move |f| {
                    let filter = EnvFilter::try_new(f).map_err(|e| e.to_string())?;
                    handle.reload(filter).map_err(|e| e.to_string())
                }),
            );
            builder.init();
        }};
    }
    match cfg.log_format {
        LogFormat::Text => install!(builder),
        LogFormat::Json => install!(builder.json()),
    }
}
