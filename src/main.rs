use clap::Parser;
use ringbroker::config::{Cli, Config};

fn main() {
    let mut cli = Cli::parse();
    if let Some(command) = cli.command.take() {
        std::process::exit(ringbroker::cli::run(command));
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cfg = match Config::load(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ringbroker: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = ringbroker::server::run(cfg) {
        eprintln!("ringbroker: {e}");
        // A setting that only proves wrong against the machine (CPUs) is still a bad setting.
        let code = if matches!(e, ringbroker::error::BrokerError::Config(_)) { 2 } else { 1 };
        std::process::exit(code);
    }
}
