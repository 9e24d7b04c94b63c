//! How the admin commands print: aligned tables for people (the default), JSON for scripts
//! (`--format json`). Every command builds its result as data first, then renders it once in
//! the chosen format, so both forms always carry the same facts.

use std::io::{self, Write};

use serde_json::Value;

/// `--format` of the admin commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for reading.
    #[default]
    Text,
    /// One JSON document, for scripts.
    Json,
}

/// Columns separated by two spaces, each as wide as its widest cell (Kafka's tools and rpk
/// print the same shape).
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table { headers: headers.iter().map(|h| h.to_string()).collect(), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len(), "a row has one cell per column");
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let last = row.len().saturating_sub(1);
            for (i, cell) in row.iter().enumerate() {
                out.push_str(cell);
                if i < last {
                    let pad = widths[i] - cell.chars().count() + 2;
                    out.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push('\n');
        }
        out
    }

    pub fn print(&self) -> io::Result<()> {
        io::stdout().lock().write_all(self.render().as_bytes())
    }
}

/// Prints a JSON document on one line: scripts read it with `jq` or a JSON parser.
pub fn print_json(value: &Value) -> io::Result<()> {
    let mut out = io::stdout().lock();
    serde_json::to_writer(&mut out, value)?;
    out.write_all(b"\n")
}

/// A list of numbers as Kafka's tools print replica sets: `1,2,3`.
pub fn id_list(ids: &[i32]) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_the_last_is_not_padded() {
        let mut t = Table::new(&["NAME", "PARTITIONS"]);
        t.row(vec!["orders".into(), "3".into()]);
        t.row(vec!["a".into(), "12".into()]);
        assert_eq!(t.render(), "NAME    PARTITIONS\norders  3\na       12\n");
    }

    #[test]
    fn id_lists_are_comma_separated() {
        assert_eq!(id_list(&[1, 2, 3]), "1,2,3");
        assert_eq!(id_list(&[]), "");
    }
}
