//! How `consume` prints a record: `text` (the value, as Kafka's console consumer does),
//! `json` (an object per line), or a template in the style of kcat's `-f`: `%k %v` prints
//! key and value. A null key or value prints as `null`, like Kafka's console consumer.

use proto_kafka::records::Record;

#[derive(Debug, Clone)]
pub(super) enum RecordFormat {
    Text,
    Json,
    Template(Vec<Piece>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Piece {
    Literal(Vec<u8>),
    Topic,
    Partition,
    Offset,
    Timestamp,
    Key,
    Value,
    Headers,
}

impl RecordFormat {
    pub(super) fn parse(s: &str) -> Result<RecordFormat, String> {
        match s {
            "text" => return Ok(RecordFormat::Text),
            "json" => return Ok(RecordFormat::Json),
            _ => {}
        }
        if !s.contains('%') {
            return Err(format!("'{s}' is not a format: use text, json, or a template with fields such as '%k %v'"));
        }
        let mut pieces = Vec::new();
        let mut literal = Vec::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            let field = match c {
                '%' => match chars.next() {
                    Some('t') => Piece::Topic,
                    Some('p') => Piece::Partition,
                    Some('o') => Piece::Offset,
                    Some('T') => Piece::Timestamp,
                    Some('k') => Piece::Key,
                    Some('v') => Piece::Value,
                    Some('h') => Piece::Headers,
                    Some('%') => {
                        literal.push(b'%');
                        continue;
                    }
                    other => {
                        return Err(format!(
                            "unknown field %{} in '{s}': use %t %p %o %T %k %v %h or %%",
                            other.map(String::from).unwrap_or_default()
                        ))
                    }
                },
                '\\' => {
                    match chars.next() {
                        Some('n') => literal.push(b'\n'),
                        Some('t') => literal.push(b'\t'),
                        Some('r') => literal.push(b'\r'),
                        Some('\\') | None => literal.push(b'\\'),
                        Some(other) => {
                            literal.push(b'\\');
                            literal.extend_from_slice(other.to_string().as_bytes());
                        }
                    }
                    continue;
                }
                c => {
                    literal.extend_from_slice(c.to_string().as_bytes());
                    continue;
                }
            };
            if !literal.is_empty() {
                pieces.push(Piece::Literal(std::mem::take(&mut literal)));
            }
            pieces.push(field);
        }
        // One record per line unless the template ends its own lines.
        if !literal.ends_with(b"\n") {
            literal.push(b'\n');
        }
        pieces.push(Piece::Literal(literal));
        Ok(RecordFormat::Template(pieces))
    }

    /// The bytes printed for `r` (JSON is rendered by the caller, with serde).
    pub(super) fn render(&self, topic: &str, partition: i32, r: &Record) -> Vec<u8> {
        let mut out = Vec::new();
        let bytes_or_null = |out: &mut Vec<u8>, b: &Option<bytes::Bytes>| match b {
            Some(b) => out.extend_from_slice(b),
            None => out.extend_from_slice(b"null"),
        };
        match self {
            RecordFormat::Text | RecordFormat::Json => {
                bytes_or_null(&mut out, &r.value);
                out.push(b'\n');
            }
            RecordFormat::Template(pieces) => {
                for piece in pieces {
                    match piece {
                        Piece::Literal(l) => out.extend_from_slice(l),
                        Piece::Topic => out.extend_from_slice(topic.as_bytes()),
                        Piece::Partition => out.extend_from_slice(partition.to_string().as_bytes()),
                        Piece::Offset => out.extend_from_slice(r.offset.to_string().as_bytes()),
                        Piece::Timestamp => out.extend_from_slice(r.timestamp.to_string().as_bytes()),
                        Piece::Key => bytes_or_null(&mut out, &r.key),
                        Piece::Value => bytes_or_null(&mut out, &r.value),
                        Piece::Headers => {
                            for (i, (k, v)) in r.headers.iter().enumerate() {
                                if i > 0 {
                                    out.push(b',');
                                }
                                out.extend_from_slice(k.as_bytes());
                                out.push(b'=');
                                bytes_or_null(&mut out, v);
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::StrBytes;
    use bytes::Bytes;
    use proto_kafka::records::TimestampType;

    fn record() -> Record {
        Record {
            transactional: false,
            control: false,
            delete_horizon_ms: None,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: 7,
            sequence: -1,
            timestamp: 1000,
            key: Some(Bytes::from_static(b"k1")),
            value: Some(Bytes::from_static(b"v1")),
            headers: vec![
                (StrBytes::from_static_str("a"), Some(Bytes::from_static(b"1"))),
                (StrBytes::from_static_str("b"), None),
            ],
        }
    }

    fn render(format: &str) -> String {
        String::from_utf8(RecordFormat::parse(format).unwrap().render("t", 2, &record())).unwrap()
    }

    #[test]
    fn templates_fill_every_field() {
        assert_eq!(render("%k %v"), "k1 v1\n");
        assert_eq!(render("%t/%p@%o %T [%h] 100%%\\n"), "t/2@7 1000 [a=1,b=null] 100%\n");
        assert_eq!(render("%k\\t%v"), "k1\tv1\n");
        assert_eq!(render("text"), "v1\n");
    }

    #[test]
    fn bad_templates_say_what_is_allowed() {
        assert!(RecordFormat::parse("%x").unwrap_err().contains("%t %p %o"));
        assert!(RecordFormat::parse("yaml").unwrap_err().contains("text, json"));
    }
}
