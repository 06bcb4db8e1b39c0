//! The upstream: one WhatsApp-gateway instance (or an API), modelled from
//! seed 000's story. Every parameter is in [`GatewayModel`]; `sim/README.md`
//! says why each has its value.

use crate::rng::Rng;

/// Microseconds.
pub type Micros = u64;

pub const SECOND: Micros = 1_000_000;

/// How an instance behaves under load.
#[derive(Debug, Clone, Copy)]
pub struct GatewayModel {
    /// Requests per second it serves without complaint.
    pub capacity_per_s: f64,
    /// Latency of a request at or below capacity.
    pub base_latency: Micros,
    /// Latency at its worst (seed 000: 2 s grows to 30 s).
    pub max_latency: Micros,
    /// How steeply latency grows with overload: `base × (1 + steepness × excess²)`,
    /// `excess` = load above capacity, as a fraction of it.
    pub latency_steepness: f64,
    /// Latency of a 429 answer.
    pub throttle_latency: Micros,
    /// 429s within the last minute that get the instance flagged (suspended).
    /// `None`: never suspended (an API that just gets slow).
    pub abuse_limit: Option<u32>,
    /// How long a flagged instance stays flagged (seed 000: 3 hours).
    pub suspension: Micros,
}

/// What one request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Delivered to the customer.
    Delivered,
    /// 429: rate limited.
    Throttled,
    /// Taken (200) while the instance is flagged, and never delivered.
    Swallowed,
}

/// One instance's state.
#[derive(Debug, Clone)]
pub struct Gateway {
    model: GatewayModel,
    /// Requests per second over the last 5 s (ring of 1 s buckets).
    arrivals: [u32; 5],
    /// 429s per second over the last 60 s.
    throttles: [u32; 60],
    /// The second the rings were last moved to.
    second: u64,
    suspended_until: Micros,
    /// Total time spent suspended, once over.
    pub suspended_for: Micros,
}

impl Gateway {
    pub fn new(model: GatewayModel) -> Self {
        Gateway { model, arrivals: [0; 5], throttles: [0; 60], second: 0, suspended_until: 0, suspended_for: 0 }
    }

    fn advance(&mut self, now: Micros) {
        let second = now / SECOND;
        for s in self.second + 1..=second.min(self.second + 60) {
            self.arrivals[(s % 5) as usize] = 0;
            self.throttles[(s % 60) as usize] = 0;
        }
        self.second = self.second.max(second);
    }

    /// Whether the instance is flagged at `now`.
    pub fn is_suspended(&self, now: Micros) -> bool {
        now < self.suspended_until
    }

    /// Serves a request that arrives at `now`: the answer and how long it takes.
    pub fn request(&mut self, now: Micros, rng: &mut Rng) -> (Answer, Micros) {
        self.advance(now);
        self.arrivals[(self.second % 5) as usize] += 1;
        if self.is_suspended(now) {
            return (Answer::Swallowed, self.model.base_latency);
        }
        let rate = f64::from(self.arrivals.iter().sum::<u32>()) / 5.0;
        let load = rate / self.model.capacity_per_s;
        if load > 1.0 && rng.chance(1.0 - 1.0 / load) {
            self.throttles[(self.second % 60) as usize] += 1;
            if let Some(limit) = self.model.abuse_limit
                && self.throttles.iter().sum::<u32>() > limit
            {
                self.suspended_until = now + self.model.suspension;
                self.suspended_for += self.model.suspension;
                self.throttles = [0; 60];
            }
            return (Answer::Throttled, self.model.throttle_latency);
        }
        let excess = (load - 1.0).max(0.0);
        let latency = self.model.base_latency as f64 * (1.0 + self.model.latency_steepness * excess * excess);
        (Answer::Delivered, (latency as Micros).min(self.model.max_latency))
    }
}
