//! Order statistics for the benchmark tables.

use std::time::Duration;

/// (median, p95) of `samples` (sorted in place). Empty input gives zeros.
pub fn median_p95(samples: &mut [Duration]) -> (Duration, Duration) {
    if samples.is_empty() {
        return (Duration::ZERO, Duration::ZERO);
    }
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.95))
}
