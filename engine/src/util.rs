//! Small helpers every layer shares: locking runtime state, the wall clock, and the retry backoff
//! of flows and views.

use std::sync::Mutex;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Locks a mutex of runtime state (a panicked holder left nothing half-updated that matters).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The first wait before a failed flow or view is retried; it doubles with each failure in a row.
const RETRY_DELAY_MS_MIN: i64 = 500;
/// The longest wait between retries.
const RETRY_DELAY_MS_MAX: i64 = 60_000;

/// How long to wait before retrying after `failures` failures in a row (at least one).
pub fn retry_delay_ms(failures: u32) -> i64 {
    (RETRY_DELAY_MS_MIN << (failures.clamp(1, 10) - 1)).min(RETRY_DELAY_MS_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_exponentially_up_to_a_minute() {
        assert_eq!(retry_delay_ms(1), 500);
        assert_eq!(retry_delay_ms(2), 1000);
        assert_eq!(retry_delay_ms(7), 32_000);
        assert_eq!(retry_delay_ms(8), 60_000);
        assert_eq!(retry_delay_ms(1000), 60_000);
        assert_eq!(retry_delay_ms(0), 500);
    }
}
