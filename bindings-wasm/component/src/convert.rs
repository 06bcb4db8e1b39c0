//! Values between the core's types and the interface's.

use alloc::string::ToString;
use alloc::vec::Vec;
use halfopen as ho;
use halfopen::{Duration, Instant};

use crate::wit;

pub(crate) fn instant(us: u64) -> Instant {
    Instant::from_micros(us)
}

pub(crate) fn duration(us: u64) -> Duration {
    Duration::from_micros(us)
}

/// The interface's configuration as the core's (which validates it).
pub(crate) fn config_in(c: &wit::Config) -> ho::Config {
    ho::Config {
        failure_threshold: c.failure_threshold,
        window: window_in(&c.window),
        consecutive_failures: c.consecutive_failures,
        failure_rate_threshold: c.failure_rate_threshold,
        minimum_calls: c.minimum_calls,
        slow_call_duration: c.slow_call_duration.map(duration),
        slow_call_rate_threshold: c.slow_call_rate_threshold,
        open_timeout: duration(c.open_timeout),
        backoff_factor: c.backoff_factor,
        max_open_timeout: c.max_open_timeout.map(duration),
        jitter: c.jitter,
        jitter_seed: c.jitter_seed,
        half_open_max_attempts: c.half_open_max_attempts,
        half_open_successes: c.half_open_successes,
        probe_timeout: duration(c.probe_timeout),
        concurrency_limit: c.concurrency_limit.as_ref().map(limit_in),
    }
}

/// The changes as the core's patch (a later change to a field wins).
pub(crate) fn patch_in(changes: &[wit::ConfigChange]) -> ho::ConfigPatch {
    use wit::ConfigChange as C;
    let mut p = ho::ConfigPatch::default();
    for change in changes {
        match change {
            C::Preset(c) => p.preset = Some(config_in(c)),
            C::FailureThreshold(v) => p.failure_threshold = Some(*v),
            C::Window(w) => p.window = Some(window_in(w)),
            C::ConsecutiveFailures(v) => p.consecutive_failures = Some(*v),
            C::FailureRateThreshold(v) => p.failure_rate_threshold = Some(*v),
            C::MinimumCalls(v) => p.minimum_calls = Some(*v),
            C::SlowCallDuration(v) => p.slow_call_duration = Some(v.map(duration)),
            C::SlowCallRateThreshold(v) => p.slow_call_rate_threshold = Some(*v),
            C::OpenTimeout(v) => p.open_timeout = Some(duration(*v)),
            C::BackoffFactor(v) => p.backoff_factor = Some(*v),
            C::MaxOpenTimeout(v) => p.max_open_timeout = Some(v.map(duration)),
            C::Jitter(v) => p.jitter = Some(*v),
            C::JitterSeed(v) => p.jitter_seed = Some(*v),
            C::HalfOpenMaxAttempts(v) => p.half_open_max_attempts = Some(*v),
            C::HalfOpenSuccesses(v) => p.half_open_successes = Some(*v),
            C::ProbeTimeout(v) => p.probe_timeout = Some(duration(*v)),
            C::ConcurrencyLimit(v) => p.concurrency_limit = Some(v.as_ref().map(limit_in)),
        }
    }
    p
}

fn window_in(w: &wit::Window) -> ho::Window {
    match *w {
        wit::Window::Time(us) => ho::Window::Time(duration(us)),
        wit::Window::Count(n) => ho::Window::Count(n),
    }
}

fn limit_in(l: &wit::ConcurrencyLimit) -> ho::ConcurrencyLimit {
    match *l {
        wit::ConcurrencyLimit::Fixed(n) => ho::ConcurrencyLimit::Fixed(n),
        wit::ConcurrencyLimit::Adaptive(a) => ho::ConcurrencyLimit::Adaptive { min: a.min, max: a.max },
    }
}

/// The core's configuration as the interface's.
pub(crate) fn config_out(c: &ho::Config) -> wit::Config {
    let us = |d: Duration| d.as_micros();
    wit::Config {
        failure_threshold: c.failure_threshold,
        window: match c.window {
            ho::Window::Time(d) => wit::Window::Time(us(d)),
            ho::Window::Count(n) => wit::Window::Count(n),
        },
        consecutive_failures: c.consecutive_failures,
        failure_rate_threshold: c.failure_rate_threshold,
        minimum_calls: c.minimum_calls,
        slow_call_duration: c.slow_call_duration.map(us),
        slow_call_rate_threshold: c.slow_call_rate_threshold,
        open_timeout: us(c.open_timeout),
        backoff_factor: c.backoff_factor,
        max_open_timeout: c.max_open_timeout.map(us),
        jitter: c.jitter,
        jitter_seed: c.jitter_seed,
        half_open_max_attempts: c.half_open_max_attempts,
        half_open_successes: c.half_open_successes,
        probe_timeout: us(c.probe_timeout),
        concurrency_limit: c.concurrency_limit.map(|l| match l {
            ho::ConcurrencyLimit::Fixed(n) => wit::ConcurrencyLimit::Fixed(n),
            ho::ConcurrencyLimit::Adaptive { min, max } => {
                wit::ConcurrencyLimit::Adaptive(wit::AdaptiveLimit { min, max })
            }
        }),
    }
}

pub(crate) fn config_error(e: ho::ConfigError) -> wit::ConfigError {
    use ho::Field as F;
    let field = match e.field {
        F::FailureThreshold => wit::Field::FailureThreshold,
        F::Window => wit::Field::Window,
        F::ConsecutiveFailures => wit::Field::ConsecutiveFailures,
        F::FailureRateThreshold => wit::Field::FailureRateThreshold,
        F::MinimumCalls => wit::Field::MinimumCalls,
        F::SlowCallDuration => wit::Field::SlowCallDuration,
        F::SlowCallRateThreshold => wit::Field::SlowCallRateThreshold,
        F::OpenTimeout => wit::Field::OpenTimeout,
        F::BackoffFactor => wit::Field::BackoffFactor,
        F::MaxOpenTimeout => wit::Field::MaxOpenTimeout,
        F::Jitter => wit::Field::Jitter,
        F::HalfOpenMaxAttempts => wit::Field::HalfOpenMaxAttempts,
        F::HalfOpenSuccesses => wit::Field::HalfOpenSuccesses,
        F::ProbeTimeout => wit::Field::ProbeTimeout,
        F::ConcurrencyLimit => wit::Field::ConcurrencyLimit,
        F::AdaptiveLimitMin => wit::Field::AdaptiveLimitMin,
        F::AdaptiveLimitMax => wit::Field::AdaptiveLimitMax,
    };
    wit::ConfigError { field, problem: problem(e.problem), message: e.to_string() }
}

/// The core's problem with a field, in the interface's words.
pub(crate) fn problem(p: ho::Problem) -> wit::Problem {
    use ho::Problem as P;
    match p {
        P::NoTripPolicy => wit::Problem::NoTripPolicy,
        P::Zero => wit::Problem::Zero,
        P::TooSmall => wit::Problem::TooSmall,
        P::TooLarge => wit::Problem::TooLarge,
        P::NotFinite => wit::Problem::NotFinite,
        P::OutOfRange => wit::Problem::OutOfRange,
        P::ExceedsWindow => wit::Problem::ExceedsWindow,
        P::Missing => wit::Problem::Missing,
        P::BelowOpenTimeout => wit::Problem::BelowOpenTimeout,
        P::ExceedsHalfOpenMaxAttempts => wit::Problem::ExceedsHalfOpenMaxAttempts,
        P::ExceedsMax => wit::Problem::ExceedsMax,
    }
}

pub(crate) fn registry_error(e: ho::RegistryError) -> wit::RegistryError {
    match e {
        ho::RegistryError::Full { .. } => wit::RegistryError::Full,
        ho::RegistryError::Config(c) => wit::RegistryError::Config(config_error(c)),
        ho::RegistryError::Capacity => wit::RegistryError::Capacity,
        ho::RegistryError::TooManyConfigured { .. } => wit::RegistryError::TooManyConfigured,
        ho::RegistryError::NameTooLong { bytes } => wit::RegistryError::NameTooLong(bytes as u64),
    }
}

pub(crate) fn output_error(_: ho::OutOfMemory) -> wit::OutputError {
    wit::OutputError::OutOfMemory
}

pub(crate) fn snapshot_error(e: ho::SnapshotError) -> wit::SnapshotError {
    match e {
        ho::SnapshotError::Malformed(why) => wit::SnapshotError::Malformed(why),
        ho::SnapshotError::NewerVersion { found, .. } => wit::SnapshotError::NewerVersion(found),
        ho::SnapshotError::ConfigMismatch => wit::SnapshotError::ConfigMismatch,
        ho::SnapshotError::Corrupt(what) => wit::SnapshotError::Corrupt(what.into()),
    }
}

pub(crate) fn elapsed(e: wit::Elapsed) -> ho::Elapsed {
    match e {
        wit::Elapsed::Ignored => ho::Elapsed::Ignored,
        wit::Elapsed::Counted => ho::Elapsed::Counted,
    }
}

pub(crate) fn state(s: ho::State) -> wit::State {
    match s {
        ho::State::Closed => wit::State::Closed,
        ho::State::HalfOpen => wit::State::HalfOpen,
        ho::State::Open => wit::State::Open,
    }
}

pub(crate) fn outcome(o: wit::Outcome) -> ho::Outcome {
    match o {
        wit::Outcome::Success => ho::Outcome::Success,
        wit::Outcome::Failure => ho::Outcome::Failure,
        wit::Outcome::Ignored => ho::Outcome::Ignored,
        wit::Outcome::Cancelled => ho::Outcome::Cancelled,
    }
}

pub(crate) fn transition(t: ho::Transition) -> wit::Transition {
    use ho::Reason as R;
    let reason = match t.reason {
        R::ConsecutiveFailures => wit::Reason::ConsecutiveFailures,
        R::FailureThreshold => wit::Reason::FailureThreshold,
        R::FailureRate => wit::Reason::FailureRate,
        R::SlowCallRate => wit::Reason::SlowCallRate,
        R::OpenTimeout => wit::Reason::OpenTimeout,
        R::ProbeFailed => wit::Reason::ProbeFailed,
        R::ProbesSucceeded => wit::Reason::ProbesSucceeded,
        R::ForcedOpen => wit::Reason::ForcedOpen,
        R::ForcedOpenEnded => wit::Reason::ForcedOpenEnded,
        R::Released => wit::Reason::Released,
        R::ForcedClose => wit::Reason::ForcedClose,
        R::Disabled => wit::Reason::Disabled,
        R::Reset => wit::Reason::Reset,
        R::Reconfigured => wit::Reason::Reconfigured,
        R::Restored => wit::Reason::Restored,
    };
    wit::Transition { from: state(t.from), to: state(t.to), reason, at: t.at.as_micros() }
}

pub(crate) fn transitions(t: ho::Transitions) -> Vec<wit::Transition> {
    t.iter().map(transition).collect()
}

pub(crate) fn named(name: &str, t: ho::Transition) -> wit::NamedTransition {
    wit::NamedTransition { name: name.into(), transition: transition(t) }
}

pub(crate) fn rejection(r: &ho::Rejection) -> wit::Rejection {
    let reason = match r.wait {
        ho::Wait::UntilHalfOpen { .. } => wit::WaitReason::Open,
        ho::Wait::ProbesBusy { .. } => wit::WaitReason::ProbesBusy,
        ho::Wait::LimitFull { .. } => wit::WaitReason::LimitFull,
        ho::Wait::Held => wit::WaitReason::Held,
    };
    wit::Rejection { state: state(r.state), reason, retry_after: r.retry_after().map(|d| d.as_micros()) }
}

pub(crate) fn mode(m: ho::Mode) -> wit::Mode {
    match m {
        ho::Mode::Normal => wit::Mode::Normal,
        ho::Mode::ForcedOpen { until } => wit::Mode::ForcedOpen(until.map(|t| t.as_micros())),
        ho::Mode::Disabled => wit::Mode::Disabled,
    }
}

pub(crate) fn counts(c: ho::Counts) -> wit::Counts {
    wit::Counts {
        consecutive_failures: c.consecutive_failures,
        window_calls: c.window.calls,
        window_failures: c.window.failures,
        window_slow: c.window.slow,
        in_flight: c.in_flight,
        concurrency_limit: c.concurrency_limit,
        probes_in_flight: c.probes_in_flight,
        probe_successes: c.probe_successes,
        generation: c.generation,
    }
}

pub(crate) fn metrics(m: ho::MetricsReading) -> wit::Metrics {
    let c = m.counters;
    let us = |d: Duration| d.as_micros();
    wit::Metrics {
        state: state(m.state),
        admitted: c.admitted,
        successes: c.successes,
        failures: c.failures,
        slow: c.slow,
        rejections: c.rejections,
        ignored: c.ignored,
        cancelled: c.cancelled,
        stale: c.stale,
        opens: c.opens,
        opens_last24h: m.opens_last_24h,
        time_closed: us(m.time_closed),
        time_open: us(m.time_open),
        time_half_open: us(m.time_half_open),
        mean_time_open: m.mean_time_open.map(us),
        error_rate: m.error_rate,
        latency: m.latency.map(|l| wit::Latency {
            count: l.count,
            sum: us(l.sum),
            p50: us(l.p50),
            p95: us(l.p95),
            p99: us(l.p99),
            max: us(l.max),
        }),
    }
}
