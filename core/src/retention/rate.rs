//! The release rate: a token bucket on the caller's clock.

use super::config::Rate;
use crate::time::{Duration, Instant};

/// Millionths of a token, so that a microsecond's refill is whole.
const SCALE: u64 = 1_000_000;

#[derive(Debug, Clone)]
pub(crate) struct TokenBucket {
    rate: Rate,
    /// Tokens in the bucket, in millionths.
    tokens: u64,
    /// When `tokens` was last brought up to date.
    at: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub(crate) fn new(rate: Rate, now: Instant) -> Self {
        TokenBucket { rate, tokens: Self::full(rate), at: now }
    }

    /// The most millionths of a token a bucket of `rate` holds.
    pub(crate) fn full(rate: Rate) -> u64 {
        u64::from(rate.burst) * SCALE
    }

    /// The millionths of a token in the bucket at `now`, for a snapshot.
    #[cfg(feature = "snapshot")]
    pub(crate) fn tokens(&self, now: Instant) -> u64 {
        let mut bucket = self.clone();
        bucket.refill(now);
        bucket.tokens
    }

    /// A bucket with `tokens` millionths at `now` (at most full).
    #[cfg(feature = "snapshot")]
    pub(crate) fn with(rate: Rate, tokens: u64, now: Instant) -> Self {
        TokenBucket { rate, tokens: tokens.min(Self::full(rate)), at: now }
    }

    fn refill(&mut self, now: Instant) {
        if now > self.at {
            let gained = (now - self.at).as_micros().saturating_mul(u64::from(self.rate.per_second));
            self.tokens = self.tokens.saturating_add(gained).min(Self::full(self.rate));
            self.at = now;
        }
    }

    /// Whether a token is there at `now`.
    pub(crate) fn ready(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= SCALE
    }

    /// Whether a token is there at `now`, changing nothing.
    pub(crate) fn ready_at(&self, now: Instant) -> bool {
        let mut bucket = self.clone();
        bucket.ready(now)
    }

    /// Spends a token ([`ready`](Self::ready) said there is one).
    pub(crate) fn spend(&mut self) {
        self.tokens = self.tokens.saturating_sub(SCALE);
    }

    /// When the next token is there (`now` if it is).
    pub(crate) fn next_token(&self, now: Instant) -> Instant {
        let mut bucket = self.clone();
        bucket.refill(now);
        let missing = SCALE.saturating_sub(bucket.tokens);
        let per_second = u64::from(self.rate.per_second);
        now + Duration::from_micros(missing.div_ceil(per_second))
    }
}
