//! The kernel's CPU list notation, as in `/sys/devices/system/cpu/online` and the `cpus`
//! setting: `0-3,6`.

/// Parses a CPU list such as "0-3,6" into sorted, distinct CPU numbers.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |t: &str| t.trim().parse::<usize>().map_err(|_| format!("`{t}` in `{s}` is not a CPU number"));
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("range `{part}` runs backwards"));
                }
                if b - a > 4096 {
                    return Err(format!("range `{part}` is too large"));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(num(part)?),
        }
    }
    if cpus.is_empty() {
        return Err(format!("`{s}` names no CPU"));
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
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpu_list("").is_err());
    }

    #[test]
    fn cpu_lists_format_as_ranges() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(format_cpu_list(&[]), "");
    }
}
