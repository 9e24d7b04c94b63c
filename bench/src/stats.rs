//! Latency bookkeeping: HDR histograms in microseconds, merged across workers, summarised at
//! the percentiles OpenMessaging Benchmark reports.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency tracked: 10 minutes (in µs); larger values are clamped.
const MAX_US: u64 = 600_000_000;

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds")
}

pub fn record_us(h: &mut Histogram<u64>, us: u64) {
    h.saturating_record(us.clamp(1, MAX_US));
}

/// Percentiles in milliseconds.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Percentiles {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p75: f64,
    pub p95: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub p99_99: f64,
    pub max: f64,
}

pub fn summarize(h: &Histogram<u64>) -> Percentiles {
    if h.is_empty() {
        return Percentiles::default();
    }
    let ms = |us: u64| us as f64 / 1000.0;
    Percentiles {
        count: h.len(),
        mean: h.mean() / 1000.0,
        p50: ms(h.value_at_quantile(0.50)),
        p75: ms(h.value_at_quantile(0.75)),
        p95: ms(h.value_at_quantile(0.95)),
        p99: ms(h.value_at_quantile(0.99)),
        p99_9: ms(h.value_at_quantile(0.999)),
        p99_99: ms(h.value_at_quantile(0.9999)),
        max: ms(h.max()),
    }
}

/// The histogram as HdrHistogram's percentile-distribution text (`.hgrm`), values in ms.
pub fn hgrm(h: &Histogram<u64>) -> String {
    let mut out = String::from("       Value     Percentile TotalCount 1/(1-Percentile)\n\n");
    if h.is_empty() {
        return out;
    }
    for v in h.iter_quantiles(2) {
        let q = v.quantile_iterated_to();
        let inv = if q < 1.0 { format!("{:.2}", 1.0 / (1.0 - q)) } else { "inf".into() };
        out.push_str(&format!(
            "{:12.3} {:14.12} {:10} {:>14}\n",
            v.value_iterated_to() as f64 / 1000.0,
            q,
            v.count_since_last_iteration(),
            inv
        ));
    }
    out.push_str(&format!(
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]\n#[Max     = {:12.3}, Total count    = {:12}]\n",
        h.mean() / 1000.0,
        h.stdev() / 1000.0,
        h.max() as f64 / 1000.0,
        h.len()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_recorded_values() {
        let mut h = histogram();
        for us in 1..=1000 {
            record_us(&mut h, us * 1000); // 1..1000 ms
        }
        let p = summarize(&h);
        assert_eq!(p.count, 1000);
        assert!((p.p50 - 500.0).abs() < 1.0, "{p:?}");
        assert!((p.p99 - 990.0).abs() < 1.0, "{p:?}");
        assert!((p.max - 1000.0).abs() < 1.0, "{p:?}");
    }

    #[test]
    fn merged_worker_histograms_count_everything_and_out_of_range_values_are_clamped() {
        let mut a = histogram();
        let mut b = histogram();
        record_us(&mut a, 0);
        record_us(&mut b, u64::MAX);
        a.add(&b).unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a.min(), 1);
        assert!(a.max() >= MAX_US - MAX_US / 1000);
        assert_eq!(summarize(&histogram()), Percentiles::default());
        assert!(hgrm(&a).contains("Total count    =            2"));
    }
}
