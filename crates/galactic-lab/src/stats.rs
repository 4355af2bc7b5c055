//! Order statistics for the benchmark and campaign tables: one definition of median and p95
//! for every figure the harness prints.

use std::time::Duration;

/// Median, p95 and count of a sample.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    /// The median (the sample at rank round(0.5 · (n − 1)) of the sorted samples).
    pub median: Duration,
    /// The 95th percentile (rank round(0.95 · (n − 1))).
    pub p95: Duration,
    /// How many samples.
    pub n: usize,
}

impl Summary {
    /// The summary of `samples` (sorted in place). Empty input gives zeros.
    pub fn of(samples: &mut [Duration]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort();
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        Self {
            median: at(0.5),
            p95: at(0.95),
            n: samples.len(),
        }
    }

    /// The median in milliseconds.
    pub fn median_ms(&self) -> f64 {
        self.median.as_secs_f64() * 1e3
    }

    /// The p95 in milliseconds.
    pub fn p95_ms(&self) -> f64 {
        self.p95.as_secs_f64() * 1e3
    }
}

/// (median, p95) of `samples` (sorted in place). Empty input gives zeros.
pub fn median_p95(samples: &mut [Duration]) -> (Duration, Duration) {
    let summary = Summary::of(samples);
    (summary.median, summary.p95)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_rounded() {
        let mut samples: Vec<Duration> = (1..=20).rev().map(Duration::from_millis).collect();
        let s = Summary::of(&mut samples);
        // n = 20: median rank round(9.5) = 10 (the 11th sample), p95 rank round(18.05) = 18.
        assert_eq!(
            (s.median, s.p95, s.n),
            (Duration::from_millis(11), Duration::from_millis(19), 20)
        );
        assert_eq!(Summary::of(&mut []), Summary::default());
        let mut one = [Duration::from_millis(3)];
        assert_eq!(
            median_p95(&mut one),
            (Duration::from_millis(3), Duration::from_millis(3))
        );
    }
}
