//! The kernel's CPU list notation, as in `/sys/devices/system/cpu/online` and the `cpus`
//! setting: `0-3,6`.

/// Why a CPU list cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    #[error("`{item}` in `{list}` is not a CPU number")]
    NotANumber { item: String, list: String },
    #[error("range `{0}` runs backwards")]
    Backwards(String),
    #[error("range `{0}` is too large")]
    TooLarge(String),
    #[error("`{0}` names no CPU")]
    Empty(String),
}

/// Parses a CPU list such as "0-3,6" into sorted, distinct CPU numbers.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, CpuListError> {
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |t: &str| {
            t.trim().parse::<usize>().map_err(|_| CpuListError::NotANumber { item: t.to_string(), list: s.to_string() })
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(CpuListError::Backwards(part.to_string()));
                }
                if b - a > 4096 {
                    return Err(CpuListError::TooLarge(part.to_string()));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(num(part)?),
        }
    }
    if cpus.is_empty() {
        return Err(CpuListError::Empty(s.to_string()));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Writes CPU numbers compactly, as the kernel does: `0-3,6`.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(&match j > i {
            true => format!("{}-{}", cpus[i], cpus[j]),
            false => cpus[i].to_string(),
        });
        i = j + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_ranges_and_singles() {
        assert_eq!(parse_cpu_list("0-3,6").unwrap(), vec![0, 1, 2, 3, 6]);
        assert_eq!(parse_cpu_list("5,1,1").unwrap(), vec![1, 5]);
        assert_eq!(parse_cpu_list("3-1"), Err(CpuListError::Backwards("3-1".into())));
        assert_eq!(parse_cpu_list("0-9999"), Err(CpuListError::TooLarge("0-9999".into())));
        assert_eq!(
            parse_cpu_list("0,x").unwrap_err().to_string(),
            "`x` in `0,x` is not a CPU number",
            "the message the `cpus` setting's error shows"
        );
        assert_eq!(parse_cpu_list(""), Err(CpuListError::Empty(String::new())));
    }

    #[test]
    fn cpu_lists_format_as_ranges() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(format_cpu_list(&[]), "");
    }
}
