//! raft-rs logs through slog; this drain forwards its records to tracing, under the target
//! `raft`, so one `RUST_LOG` filter and one subscriber cover the whole broker. The record's and
//! the logger's key-values (`raft_id`, `term`, ...) are appended to the message as `k=v` text:
//! they carry most of what raft-rs says.

use std::fmt::{self, Write as _};

use slog::{Drain, KV};

/// A root slog logger whose records become tracing events with target `raft`.
pub fn logger() -> slog::Logger {
    slog::Logger::root(TracingDrain.fuse(), slog::o!())
}

struct TracingDrain;

impl Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &slog::Record<'_>, values: &slog::OwnedKVList) -> Result<(), slog::Never> {
        // tracing's macros need the level as a constant, hence one arm per level. The
        // `enabled!` check comes first so a filtered-out record costs no formatting.
        macro_rules! forward {
            ($level:expr) => {
                if tracing::enabled!(target: "raft", $level) {
                    let text = format_record(record, values);
                    tracing::event!(target: "raft", $level, "{text}");
                }
            };
        }
        match record.level() {
            slog::Level::Critical | slog::Level::Error => forward!(tracing::Level::ERROR),
            slog::Level::Warning => forward!(tracing::Level::WARN),
            // raft-rs tells every election step of every group at Info: per partition that
            // drowns a broker's log. The group's own "leadership changed" line is at info.
            slog::Level::Info => forward!(tracing::Level::DEBUG),
            slog::Level::Debug => forward!(tracing::Level::DEBUG),
            slog::Level::Trace => forward!(tracing::Level::TRACE),
        }
        Ok(())
    }
}

/// The message followed by ` k=v` for the record's key-values, then the logger's, each in
/// the order they were written (slog hands them over last first).
fn format_record(record: &slog::Record<'_>, values: &slog::OwnedKVList) -> String {
    let mut text = record.msg().to_string();
    for kv in [&record.kv() as &dyn KV, values as &dyn KV] {
        let mut pairs = KvPairs(Vec::new());
        // KvPairs's serializer never fails.
        let _ = kv.serialize(record, &mut pairs);
        for pair in pairs.0.iter().rev() {
            text.push_str(pair);
        }
    }
    text
}

struct KvPairs(Vec<String>);

impl slog::Serializer for KvPairs {
    fn emit_arguments(&mut self, key: slog::Key, value: &fmt::Arguments<'_>) -> slog::Result {
        let mut pair = String::new();
        // Writing to a String cannot fail.
        let _ = write!(pair, " {key}={value}");
        self.0.push(pair);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_and_logger_key_values_follow_the_message_as_k_eq_v() {
        let logger_values = slog::OwnedKVList::from(slog::o!("raft_id" => 3));
        let record_values = slog::b!("term" => 7, "to" => "2");
        let args = format_args!("sent vote request");
        let location = slog::record_static!(slog::Level::Info, "");
        let record = slog::Record::new(&location, &args, record_values);
        assert_eq!(format_record(&record, &logger_values), "sent vote request term=7 to=2 raft_id=3");
    }
}
