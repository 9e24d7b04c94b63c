//! The layering src/lib.rs declares holds: every `crate::` import in src/ points to a module
//! on a lower line of that list (see its doc), never to its own line or one above.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Each listed module's line number in lib.rs's layering list (0 is the top).
fn layers(lib: &str) -> HashMap<String, usize> {
    let mut rank = HashMap::new();
    let bullets = lib.lines().skip_while(|l| !l.starts_with("//! Layering")).filter_map(|l| l.strip_prefix("//! - "));
    for (line, bullet) in bullets.enumerate() {
        let names = bullet.split(':').next().unwrap_or_default();
        for name in names.split(',') {
            let name = name.trim().trim_matches('`');
            assert!(!name.is_empty(), "a layering line without a module: {bullet}");
            assert!(rank.insert(name.to_string(), line).is_none(), "`{name}` is listed twice");
        }
    }
    rank
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable src dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level modules a source file imports with `crate::` (comments left out).
fn imports(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in source.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let names = match rest.strip_prefix('{') {
                Some(group) => group.split('}').next().unwrap_or_default().split(',').collect(),
                None => vec![rest],
            };
            for n in names {
                let n: String = n.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if !n.is_empty() {
                    out.push(n);
                }
            }
        }
    }
    out
}

#[test]
fn every_import_points_down_the_layering_lib_rs_declares() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let rank = layers(&lib);
    let declared: Vec<&str> =
        lib.lines().filter_map(|l| l.strip_prefix("pub mod")).map(|m| m.trim().trim_end_matches(';')).collect();
    for m in &declared {
        assert!(rank.contains_key(*m), "module `{m}` is missing from lib.rs's layering list");
    }
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&src).expect("under src");
        let first = relative.iter().next().expect("a path").to_string_lossy();
        let module = first.trim_end_matches(".rs");
        if module == "lib" {
            continue;
        }
        let own = rank[module];
        let source = std::fs::read_to_string(&file).expect("readable source");
        for target in imports(&source) {
            if target == module {
                continue;
            }
            let to = *rank
                .get(&target)
                .unwrap_or_else(|| panic!("{}: `crate::{target}` is not a module", relative.display()));
            if to <= own {
                wrong.push(format!("{} imports `{target}`", relative.display()));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(wrong.is_empty(), "imports that do not point down the layering in lib.rs:\n{}", wrong.join("\n"));
}

#[test]
fn the_layering_reader_sees_grouped_imports_and_skips_comments() {
    let source = "use crate::{api, sys::x};\n// crate::server\nlet a = crate::log::now();";
    assert_eq!(imports(source), vec!["api", "sys", "log"]);
    let lib = "//! Layering:\n//! - `a`: top.\n//! - `b`, `c`: below, naming `a` after the colon.";
    let rank = layers(lib);
    assert_eq!((rank["a"], rank["b"], rank["c"], rank.len()), (0, 1, 1, 3));
}
