//! Seed 000's stories (the headline and its three cases) as scenarios. `sim/README.md` explains each number.

use crate::engine::Scenario;
use crate::gateway::{GatewayModel, SECOND};

const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;
const CASE_2_CAPACITY: f64 = 4.0;
const CASE_2_ABUSE: u32 = 600;

/// A WhatsApp-gateway instance as seed 000 describes it: 2 s answers, up to
/// 30 s when saturated, 429s beyond its rate, flagged for 3 hours after
/// sustained abuse.
fn whatsapp_instance(capacity_per_s: f64, abuse_limit: u32) -> GatewayModel {
    GatewayModel {
        capacity_per_s,
        base_latency: 2 * SECOND,
        max_latency: 30 * SECOND,
        latency_steepness: 3.5,
        throttle_latency: SECOND / 5,
        abuse_limit: Some(abuse_limit),
        suspension: 3 * HOUR,
    }
}

/// Black Friday: 10,000 messages in 2 minutes to one instance.
pub fn black_friday() -> Scenario {
    Scenario {
        name: "Black Friday: 10,000 messages in 2 minutes to one instance",
        slug: "black-friday",
        instances: 1,
        messages: 10_000,
        arrival_span: 2 * MINUTE,
        model: whatsapp_instance(70.0, 3_000),
        workers: 1_000,
        sender_timeout: 10 * SECOND,
        max_attempts: 5,
        incident: None,
        weak: None,
        horizon: 4 * HOUR,
    }
}

/// Case 1, billing SaaS: 50,000 reminders over 5 instances in an hour; the
/// fifth is a newer number with lower limits.
pub fn billing_saas() -> Scenario {
    Scenario {
        name: "Billing SaaS: 50,000 reminders over 5 instances, one of them a newer number",
        slug: "billing-saas",
        instances: 5,
        messages: 50_000,
        arrival_span: HOUR,
        model: whatsapp_instance(20.0, 3_000),
        workers: 1_000,
        sender_timeout: 10 * SECOND,
        max_attempts: 5,
        incident: None,
        weak: Some(whatsapp_instance(1.5, 120)),
        horizon: 12 * HOUR,
    }
}

/// Case 2, e-commerce: 8,000 order confirmations in 30 minutes to one
/// instance that takes a little less than they come in.
pub fn order_confirmations() -> Scenario {
    Scenario {
        name: "Order confirmations: 8,000 in 30 minutes to one instance",
        slug: "order-confirmations",
        instances: 1,
        messages: 8_000,
        arrival_span: 30 * MINUTE,
        model: GatewayModel { suspension: 4 * HOUR, ..whatsapp_instance(CASE_2_CAPACITY, CASE_2_ABUSE) },
        workers: 1_000,
        sender_timeout: 10 * SECOND,
        max_attempts: 5,
        incident: None,
        weak: None,
        horizon: 8 * HOUR,
    }
}

/// Case 3, a health-insurance bot whose every message calls an AI API that
/// turns slow for 10 minutes (no suspension: it just gets slow).
pub fn slow_upstream() -> Scenario {
    Scenario {
        name: "Slow upstream: 200 messages/min to an AI API slow for 10 minutes",
        slug: "slow-upstream",
        instances: 1,
        messages: 6_000,
        arrival_span: 30 * MINUTE,
        model: GatewayModel {
            capacity_per_s: 20.0,
            base_latency: 1_500_000,
            max_latency: 60 * SECOND,
            latency_steepness: 3.5,
            throttle_latency: SECOND / 5,
            abuse_limit: None,
            suspension: 0,
        },
        workers: 50,
        sender_timeout: 10 * SECOND,
        max_attempts: 5,
        incident: Some((5 * MINUTE, 15 * MINUTE, 12.0)),
        weak: None,
        horizon: 3 * HOUR,
    }
}

pub fn all() -> Vec<Scenario> {
    vec![black_friday(), billing_saas(), order_confirmations(), slow_upstream()]
}
