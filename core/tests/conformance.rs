//! Runs every scenario file in `tests/conformance/` against the core, one
//! named test per case. The format is documented in
//! `tests/conformance/README.md`; anything this runner does not understand (an
//! unknown key or op, a file it does not read) is a failure, never a skip.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use halfopen::{
    Breaker, ConcurrencyLimit, Config, ConfigError, ConfigPatch, Duration, Elapsed, Field, Instant, Keyed,
    LatencyHistogram, Metrics, Mode, Outcome, Permit, Problem, Registry, RegistryError, RegistrySnapshot, Snapshot,
    SnapshotError, Transition, Window,
};
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::{Map, Value};

#[path = "support/group_steps.rs"]
mod group_steps;
#[path = "support/retention_steps.rs"]
mod retention_steps;

/// The format version this runner reads.
const FORMAT: u64 = 1;
/// Files in the folder that are not scenario files.
const NOT_SCENARIOS: &[&str] = &["README.md", "schema.json", "group"];

static STEPS: AtomicUsize = AtomicUsize::new(0);

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance");
    let mut trials = Vec::new();
    let mut files = 0;
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(&dir).expect("tests/conformance exists").map(|e| e.expect("readable entry").path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if NOT_SCENARIOS.contains(&name.as_str()) {
            continue;
        }
        files += 1;
        match load(&path) {
            Ok(cases) => trials.extend(cases.into_iter().map(|(description, case)| {
                Trial::test(format!("{}::{description}", name.trim_end_matches(".json")), move || run_case(&case))
            })),
            Err(e) => trials.push(Trial::test(format!("{name}::<file>"), move || Err(e.into()))),
        }
    }
    // The group protocol's cases, in their own folder.
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir.join("group"))
        .expect("tests/conformance/group exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.file_name().is_none_or(|n| n != "schema.json"))
        .collect();
    entries.sort();
    for path in entries {
        let name = format!("group/{}", path.file_name().unwrap().to_string_lossy());
        files += 1;
        match load(&path) {
            Ok(cases) => trials.extend(cases.into_iter().map(|(description, case)| {
                Trial::test(format!("{}::{description}", name.trim_end_matches(".json")), move || run_group_case(&case))
            })),
            Err(e) => trials.push(Trial::test(format!("{name}::<file>"), move || Err(e.into()))),
        }
    }
    let schema = dir.join("schema.json");
    trials.push(Trial::test("schema.json::its problem codes are the core's", move || problem_codes(&schema)));
    let cases = trials.len();
    let conclusion = libtest_mimic::run(&Arguments::from_args(), trials);
    println!("conformance: {files} files, {cases} scenarios, {} steps run", STEPS.load(Ordering::Relaxed));
    conclusion.exit();
}

/// The schema's `problem` enum is `Problem::code` of every problem, in order.
fn problem_codes(schema: &Path) -> Result<(), Failed> {
    let text = std::fs::read_to_string(schema).map_err(|e| e.to_string())?;
    let schema: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let case = &schema["$defs"]["case"]["properties"]["problem"]["enum"];
    let listed: Vec<&str> =
        case.as_array().ok_or("no problem enum in $defs.case")?.iter().filter_map(Value::as_str).collect();
    let codes: Vec<&str> = Problem::ALL.iter().map(|p| p.code()).collect();
    if listed == codes { Ok(()) } else { Err(format!("schema lists {listed:?}, the core has {codes:?}").into()) }
}

/// Reads one scenario file: `(description, case)` for each case.
fn load(path: &Path) -> Result<Vec<(String, Value)>, String> {
    if path.extension().is_none_or(|e| e != "json") {
        return Err(format!("{} is not a scenario file (.json) and not listed as a known file", path.display()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let file: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let file = object(&file, &["format", "description", "cases"])?;
    if file.get("format").and_then(Value::as_u64) != Some(FORMAT) {
        return Err(format!("format must be {FORMAT}"));
    }
    let cases = file.get("cases").and_then(Value::as_array).ok_or("cases must be an array")?;
    let mut seen = std::collections::HashSet::new();
    cases
        .iter()
        .map(|case| {
            let description = case.get("description").and_then(Value::as_str).ok_or("case without description")?;
            if !seen.insert(description) {
                return Err(format!("duplicate description {description:?}"));
            }
            Ok((description.to_owned(), case.clone()))
        })
        .collect()
}

/// The object's fields, or an error naming the first key not in `allowed`.
fn object<'a>(value: &'a Value, allowed: &[&str]) -> Result<&'a Map<String, Value>, String> {
    let map = value.as_object().ok_or_else(|| format!("expected an object, got {value}"))?;
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!("unknown key {k:?} in {value}")),
        None => Ok(map),
    }
}

fn run_case(case: &Value) -> Result<(), Failed> {
    let map = object(case, &["description", "config", "registry", "retention", "steps", "invalid", "problem"])?;
    let config = map.get("config").ok_or("case without config")?;
    if let Some(retention) = map.get("retention") {
        return run_retention_case(map, config, retention);
    }
    let latency = config.get("latency_histogram").map_or(Some(false), Value::as_bool).ok_or("latency_histogram")?;
    let meter = (Metrics::default(), latency.then(LatencyHistogram::default));
    let built = build_config(config).and_then(|c| match map.get("registry") {
        None => Breaker::with_meter(Arc::new(c), meter).map(|b| Breakers::One(Box::new(b))).map_err(describe),
        Some(r) => build_registry(c, r).map(|r| Breakers::Many(Box::new(r))),
    });
    match (map.get("invalid"), map.get("steps")) {
        (Some(field), None) => refused(map, field, built.map(drop)),
        (None, Some(steps)) => {
            let mut run = Run { breakers: built?, clock: Instant::ZERO, permits: HashMap::new() };
            for (i, step) in steps.as_array().ok_or("steps must be an array")?.iter().enumerate() {
                run.step(step).map_err(|e| format!("step {i} {step}: {e}"))?;
                STEPS.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }
        _ => Err("a case has either steps or invalid".into()),
    }
}

/// A group case (`tests/conformance/group/`): processes sharing a store.
fn run_group_case(case: &Value) -> Result<(), Failed> {
    let map = object(case, &["description", "config", "group", "steps", "invalid", "problem"])?;
    let config = map.get("config").ok_or("case without config")?;
    let group = map.get("group").ok_or("a group case needs group")?;
    let built = build_config(config).and_then(|c| group_steps::build(c, group));
    match (map.get("invalid"), map.get("steps")) {
        (Some(field), None) => refused(map, field, built.map(drop)),
        (None, Some(steps)) => {
            let mut run = built?;
            for (i, step) in steps.as_array().ok_or("steps must be an array")?.iter().enumerate() {
                run.step(step).map_err(|e| format!("step {i} {step}: {e}"))?;
                STEPS.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }
        _ => Err("a case has either steps or invalid".into()),
    }
}

/// A case with `retention`: a dispatcher in front of the case's breaker.
fn run_retention_case(map: &Map<String, Value>, config: &Value, retention: &Value) -> Result<(), Failed> {
    if map.contains_key("registry") {
        return Err("a retention case has no registry".into());
    }
    let built = build_config(config)
        .and_then(|c| retention_steps::build(retention).and_then(|r| retention_steps::Run::new(c, r)));
    match (map.get("invalid"), map.get("steps")) {
        (Some(field), None) => refused(map, field, built.map(drop)),
        (None, Some(steps)) => {
            let mut run = built?;
            for (i, step) in steps.as_array().ok_or("steps must be an array")?.iter().enumerate() {
                run.step(step).map_err(|e| format!("step {i} {step}: {e}"))?;
                STEPS.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }
        _ => Err("a case has either steps or invalid".into()),
    }
}

/// Checks an `invalid` case: `built` failed naming `field`, and, with a
/// `problem`, for that problem (`Problem::code`).
fn refused(map: &Map<String, Value>, field: &Value, built: Result<(), String>) -> Result<(), Failed> {
    let field = field.as_str().ok_or("invalid must name a field")?;
    let problem = map.get("problem").map(|p| p.as_str().ok_or("problem must be a code")).transpose()?;
    match built {
        Err(got) if got.starts_with(&format!("{field}:")) => match problem {
            Some(p) if got != format!("{field}: {p}") => Err(format!("expected {field}: {p}, got {got}").into()),
            _ => Ok(()),
        },
        Err(got) => Err(format!("expected an error for {field}, got {got}").into()),
        Ok(()) => Err(format!("expected an error for {field}, the config was accepted").into()),
    }
}

/// A refusal as the runner compares it: `field: problem code`.
fn describe(e: ConfigError) -> String {
    format!("{}: {}", e.field.name(), e.problem.code())
}

/// `{"capacity": n, "configure": {"key": config, ...}}`.
fn build_registry(config: Config, spec: &Value) -> Result<Registry<Gauges>, String> {
    let spec = object(spec, &["capacity", "configure"])?;
    let capacity = spec.get("capacity").and_then(Value::as_u64).ok_or("registry.capacity must be a count")?;
    let mut registry = Registry::new(config, capacity as usize).map_err(|e| e.to_string())?;
    if let Some(own) = spec.get("configure") {
        for (key, c) in own.as_object().ok_or("registry.configure must map keys to configs")? {
            registry.configure_from(key, &build_patch(c)?, Instant::ZERO).map_err(|e| e.to_string())?;
        }
    }
    Ok(registry)
}

/// Translates the suite's flat config (milliseconds; `"NaN"` / `"Infinity"`
/// strings for the non-JSON numbers) into a [`Config`], as a binding would:
/// values no `Config` can hold (negative, fractional, non-numeric) are
/// errors naming the field.
fn build_patch(value: &Value) -> Result<ConfigPatch, String> {
    const KEYS: &[&str] = &[
        "preset",
        "failure_threshold",
        "window_ms",
        "window_calls",
        "consecutive_failures",
        "failure_rate_threshold",
        "minimum_calls",
        "slow_call_duration_ms",
        "slow_call_rate_threshold",
        "open_timeout_ms",
        "backoff_factor",
        "max_open_timeout_ms",
        "jitter",
        "jitter_seed",
        "half_open_max_attempts",
        "half_open_successes",
        "probe_timeout_ms",
        "concurrency_limit",
        "adaptive_limit_min",
        "adaptive_limit_max",
        "latency_histogram",
    ];
    let map = object(value, KEYS)?;
    let preset = match map.get("preset").map(|p| p.as_str()) {
        None => None,
        Some(Some(name)) => Some(Config::preset(name).ok_or_else(|| format!("unknown preset {name:?}"))?),
        Some(None) => return Err("preset must be a name".into()),
    };
    let mut c = ConfigPatch { preset, ..ConfigPatch::default() };
    let invalid = |field: Field| format!("{}: {}", field.name(), Problem::OutOfRange.code());
    for (key, v) in map {
        let field = |f: Field| move |_| invalid(f);
        match key.as_str() {
            "preset" | "latency_histogram" | "adaptive_limit_max" => {}
            "concurrency_limit" => {
                c.concurrency_limit =
                    Some(opt(v, count).map_err(field(Field::ConcurrencyLimit))?.map(ConcurrencyLimit::Fixed))
            }
            "adaptive_limit_min" => {
                let min = count(v).ok_or(invalid(Field::AdaptiveLimitMin))?;
                let max = map.get("adaptive_limit_max").ok_or("adaptive_limit_min needs adaptive_limit_max")?;
                let max = count(max).ok_or(invalid(Field::AdaptiveLimitMax))?;
                c.concurrency_limit = Some(Some(ConcurrencyLimit::Adaptive { min, max }));
            }
            "failure_threshold" => c.failure_threshold = Some(opt(v, count).map_err(field(Field::FailureThreshold))?),
            "window_ms" => c.window = Some(Window::Time(millis(v).map_err(field(Field::Window))?)),
            "window_calls" => {
                c.window = Some(Window::Count(count(v).and_then(|n| n.try_into().ok()).ok_or(invalid(Field::Window))?))
            }
            "consecutive_failures" => {
                c.consecutive_failures = Some(opt(v, count).map_err(field(Field::ConsecutiveFailures))?)
            }
            "failure_rate_threshold" => {
                c.failure_rate_threshold = Some(opt(v, number).map_err(field(Field::FailureRateThreshold))?)
            }
            "minimum_calls" => c.minimum_calls = Some(count(v).ok_or(invalid(Field::MinimumCalls))?),
            "slow_call_duration_ms" => {
                c.slow_call_duration = Some(opt(v, |v| millis(v).ok()).map_err(field(Field::SlowCallDuration))?)
            }
            "slow_call_rate_threshold" => {
                c.slow_call_rate_threshold = Some(opt(v, number).map_err(field(Field::SlowCallRateThreshold))?)
            }
            "open_timeout_ms" => c.open_timeout = Some(millis(v).map_err(field(Field::OpenTimeout))?),
            "backoff_factor" => c.backoff_factor = Some(number(v).ok_or(invalid(Field::BackoffFactor))?),
            "max_open_timeout_ms" => c.max_open_timeout = Some(Some(millis(v).map_err(field(Field::MaxOpenTimeout))?)),
            "jitter" => c.jitter = Some(number(v).ok_or(invalid(Field::Jitter))?),
            "jitter_seed" => c.jitter_seed = Some(v.as_u64().ok_or("jitter_seed must be an unsigned integer")?),
            "half_open_max_attempts" => {
                c.half_open_max_attempts =
                    Some(count(v).and_then(|n| n.try_into().ok()).ok_or(invalid(Field::HalfOpenMaxAttempts))?)
            }
            "half_open_successes" => {
                c.half_open_successes =
                    Some(Some(count(v).and_then(|n| n.try_into().ok()).ok_or(invalid(Field::HalfOpenSuccesses))?))
            }
            "probe_timeout_ms" => c.probe_timeout = Some(millis(v).map_err(field(Field::ProbeTimeout))?),
            _ => unreachable!("keys checked above"),
        }
    }
    if map.contains_key("window_ms") && map.contains_key("window_calls") {
        return Err("window_ms and window_calls are exclusive".into());
    }
    if map.contains_key("adaptive_limit_max") && !map.contains_key("adaptive_limit_min") {
        return Err("adaptive_limit_max needs adaptive_limit_min".into());
    }
    if map.contains_key("concurrency_limit") && map.contains_key("adaptive_limit_min") {
        return Err("concurrency_limit and adaptive_limit_* are exclusive".into());
    }
    Ok(c)
}

/// The suite's config: its patch applied onto the core's defaults.
fn build_config(value: &Value) -> Result<Config, String> {
    Ok(build_patch(value)?.apply(&Config::default()))
}

/// `null` is `None`; anything else goes through `parse`.
fn opt<T>(v: &Value, parse: impl Fn(&Value) -> Option<T>) -> Result<Option<T>, ()> {
    if v.is_null() { Ok(None) } else { parse(v).map(Some).ok_or(()) }
}

/// A non-negative integer that fits a u32.
fn count(v: &Value) -> Option<u32> {
    v.as_u64().and_then(|n| n.try_into().ok())
}

/// A number, with `"NaN"`, `"Infinity"` and `"-Infinity"` for the values JSON lacks.
fn number(v: &Value) -> Option<f64> {
    match v.as_str() {
        Some("NaN") => Some(f64::NAN),
        Some("Infinity") => Some(f64::INFINITY),
        Some("-Infinity") => Some(f64::NEG_INFINITY),
        Some(_) => None,
        None => v.as_f64(),
    }
}

/// Whole non-negative milliseconds.
fn millis(v: &Value) -> Result<Duration, ()> {
    v.as_u64().map(Duration::from_millis).ok_or(())
}

/// What a runner's breakers measure: metrics, and latency when the case's
/// config asks for `latency_histogram`.
type Gauges = (Metrics, Option<LatencyHistogram>);
type Metered = Keyed<Gauges>;

/// One breaker, or a registry of them (steps then name a `key`).
enum Breakers {
    One(Box<Metered>),
    Many(Box<Registry<Gauges>>),
}

struct Run {
    breakers: Breakers,
    clock: Instant,
    permits: HashMap<String, Permit>,
}

/// The breaker a changing step acts on (made on first use in a registry).
fn breaker_of<'a>(
    breakers: &'a mut Breakers,
    now: Instant,
    map: &Map<String, Value>,
) -> Result<Result<&'a mut Metered, RegistryError>, String> {
    let key = key(breakers, map)?;
    Ok(match (breakers, key) {
        (Breakers::One(b), _) => Ok(b),
        (Breakers::Many(r), Some(k)) => r.get(k, now),
        (Breakers::Many(_), None) => unreachable!("key checked"),
    })
}

/// The step's `key`: required with a registry, refused without one.
fn key<'a>(breakers: &Breakers, map: &'a Map<String, Value>) -> Result<Option<&'a str>, String> {
    match (breakers, map.get("key")) {
        (Breakers::One(_), None) => Ok(None),
        (Breakers::Many(_), Some(k)) => k.as_str().map(Some).ok_or_else(|| "key must be a string".into()),
        (Breakers::One(_), Some(_)) => Err("key given, but the case has no registry".into()),
        (Breakers::Many(_), None) => Err("a registry case needs a key on this step".into()),
    }
}

/// A restore step's `elapsed`: `"ignored"` (the default) or `"counted"`.
fn elapsed(map: &Map<String, Value>) -> Result<Elapsed, String> {
    match map.get("elapsed").map(|v| v.as_str()) {
        None | Some(Some("ignored")) => Ok(Elapsed::Ignored),
        Some(Some("counted")) => Ok(Elapsed::Counted),
        other => Err(format!("elapsed must be \"ignored\" or \"counted\", got {other:?}")),
    }
}

impl Run {
    /// Takes a snapshot at the current time, encodes and decodes it, and
    /// replaces the breaker (or the registry's breakers) with its restoration
    /// at `restore_at` (the clock moves there), counting the time between
    /// as `elapsed` says.
    fn snapshot_restore(&mut self, map: &Map<String, Value>) -> Result<(), String> {
        let json = match map.get("encoding").and_then(Value::as_str) {
            Some("json") => true,
            Some("compact") => false,
            other => return Err(format!("encoding must be \"json\" or \"compact\", got {other:?}")),
        };
        let elapsed = elapsed(map)?;
        let taken = self.clock;
        if let Some(at) = map.get("restore_at") {
            self.clock = Instant::from_millis(at.as_u64().ok_or("restore_at must be whole ms")?);
        }
        let now = self.clock;
        match &mut self.breakers {
            Breakers::One(b) => {
                let saved = b.snapshot(taken);
                let decoded =
                    if json { Snapshot::from_json(&saved.to_json()) } else { Snapshot::from_bytes(&saved.to_bytes()) };
                let restored =
                    Breaker::restore(Arc::new(*b.config()), &decoded.map_err(|e| e.to_string())?, now, elapsed);
                **b = restored.map_err(|e| e.to_string())?;
            }
            Breakers::Many(r) => {
                let saved = r.snapshot(taken);
                let decoded = if json {
                    RegistrySnapshot::from_json(&saved.to_json())
                } else {
                    RegistrySnapshot::from_bytes(&saved.to_bytes())
                };
                r.restore(&decoded.map_err(|e| e.to_string())?, now, elapsed).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    /// Restores the breaker from the step's JSON snapshot, or expects the
    /// named error.
    fn restore(&mut self, map: &Map<String, Value>) -> Result<(), String> {
        let Breakers::One(b) = &mut self.breakers else { return Err("restore needs a single-breaker case".into()) };
        let text = map.get("snapshot").ok_or("restore needs a snapshot")?.to_string();
        let elapsed = elapsed(map)?;
        let restored = Snapshot::from_json(&text)
            .and_then(|s| Breaker::restore(Arc::new(*b.config()), &s, self.clock, elapsed).map(Box::new));
        let kind = |e: &SnapshotError| match e {
            SnapshotError::Malformed(_) => "malformed",
            SnapshotError::NewerVersion { .. } => "newer_version",
            SnapshotError::ConfigMismatch => "config_mismatch",
            SnapshotError::Corrupt(_) => "corrupt",
        };
        match (restored, map.get("error")) {
            (Ok(restored), None) => {
                *b = restored;
                Ok(())
            }
            (Err(e), Some(want)) if want.as_str() == Some(kind(&e)) => Ok(()),
            (Err(e), want) => Err(format!("expected {want:?}, got the error {e}")),
            (Ok(_), Some(want)) => Err(format!("expected the error {want}, the snapshot was restored")),
        }
    }

    /// The breaker a reading step looks at, without making or touching it.
    fn view(&self, map: &Map<String, Value>) -> Result<&Metered, String> {
        match (&self.breakers, key(&self.breakers, map)?) {
            (Breakers::One(b), _) => Ok(b),
            (Breakers::Many(r), Some(k)) => r.peek(k).ok_or_else(|| format!("the registry holds no {k:?}")),
            (Breakers::Many(_), None) => unreachable!("key checked"),
        }
    }

    fn step(&mut self, step: &Value) -> Result<(), String> {
        let op = step.get("op").and_then(Value::as_str).ok_or("step without op")?;
        let common = ["op", "at", "key"];
        let keys: &[&str] = match op {
            "acquire" => &["permit", "rejected", "refused", "transition"],
            "record" => &["permit", "outcome", "transition"],
            "call" => &["outcome", "duration_ms", "repeat", "transition", "transitions"],
            "expect" => &["state", "retry_after_ms", "mode", "counts", "poll_timeout_ms", "metrics", "registry"],
            "force_open" => &["for_ms", "transition", "transitions"],
            "force_open_at_least" => &["for_ms", "transition", "transitions"],
            "force_close" | "disable" | "release" | "reset" => &["transition", "transitions"],
            "handle_timeout" => &["transition"],
            "snapshot_restore" => &["encoding", "restore_at", "elapsed"],
            "restore" => &["snapshot", "error", "elapsed"],
            other => return Err(format!("unknown op {other:?}")),
        };
        let allowed: Vec<&str> = common.iter().chain(keys).copied().collect();
        let map = object(step, &allowed)?;
        if let Some(at) = map.get("at") {
            self.clock = Instant::from_millis(at.as_u64().ok_or("at must be whole milliseconds")?);
        }
        let now = self.clock;
        let mut seen = Vec::new();
        match op {
            "expect" => return self.expect(map),
            "snapshot_restore" => return self.snapshot_restore(map),
            "restore" => return self.restore(map),
            _ => {}
        }
        let refused = map.get("refused").map(|r| r.as_str());
        if refused.is_some_and(|r| r != Some("full") && r != Some("name_too_long")) {
            return Err("refused must be \"full\" or \"name_too_long\"".into());
        }
        let breaker = match (breaker_of(&mut self.breakers, now, map)?, refused.flatten()) {
            (Ok(b), None) => b,
            (Err(RegistryError::Full { .. }), Some("full")) if op == "acquire" => return Ok(()),
            (Err(RegistryError::NameTooLong { .. }), Some("name_too_long")) if op == "acquire" => return Ok(()),
            (Ok(_), Some(_)) => return Err("expected the registry to refuse a new key".into()),
            (Err(e), _) => return Err(format!("registry: {e}")),
        };
        match op {
            "acquire" => acquire(breaker, now, map, &mut seen, &mut self.permits)?,
            "record" => {
                let name = map.get("permit").and_then(Value::as_str).ok_or("record needs a permit name")?;
                let permit = self.permits.remove(name).ok_or_else(|| format!("no permit named {name:?}"))?;
                seen.extend(breaker.record(permit, outcome(map)?, now));
            }
            "call" => self.clock = call(breaker, now, map, &mut seen)?,
            "force_open" => {
                let duration = map.get("for_ms").map(millis).transpose().map_err(|_| "for_ms: whole ms")?;
                seen.extend(breaker.force_open(now, duration));
            }
            "force_open_at_least" => {
                let duration = map.get("for_ms").ok_or("force_open_at_least needs for_ms")?;
                seen.extend(breaker.force_open_at_least(now, millis(duration).map_err(|_| "for_ms: whole ms")?));
            }
            "force_close" => seen.extend(breaker.force_close(now)),
            "disable" => seen.extend(breaker.disable(now)),
            "release" => seen.extend(breaker.release(now)),
            "reset" => seen.extend(breaker.reset(now)),
            "handle_timeout" => seen.extend(breaker.handle_timeout(now)),
            _ => unreachable!("ops checked above"),
        }
        let expected: Vec<&Value> = match (map.get("transition"), map.get("transitions")) {
            (Some(t), None) => vec![t],
            (None, Some(list)) => list.as_array().ok_or("transitions must be an array")?.iter().collect(),
            (None, None) => vec![],
            (Some(_), Some(_)) => return Err("transition and transitions are exclusive".into()),
        };
        if seen.len() != expected.len() {
            return Err(format!("expected transitions {expected:?}, got {seen:?}"));
        }
        seen.iter().zip(expected).try_for_each(|(got, want)| check_transition(got, want))
    }

    fn expect(&self, map: &Map<String, Value>) -> Result<(), String> {
        if let Some(want) = map.get("registry") {
            let Breakers::Many(registry) = &self.breakers else { return Err("no registry in this case".into()) };
            check_registry(registry, want)?;
            if !map.contains_key("key") {
                return Ok(());
            }
        }
        expect_breaker(self.view(map)?, self.clock, map)
    }
}

/// Checks an `expect` step's readings of `breaker` at `now` (its `state`,
/// `retry_after_ms`, `mode`, `poll_timeout_ms`, `metrics`, `counts`).
fn expect_breaker(breaker: &Metered, now: Instant, map: &Map<String, Value>) -> Result<(), String> {
    if let Some(state) = map.get("state") {
        equal("state", breaker.state(now).name(), state)?;
    }
    if let Some(want) = map.get("retry_after_ms") {
        check_retry_after(breaker.retry_after(now), want)?;
        let admitted = breaker.check(now).is_ok();
        if admitted != (breaker.retry_after(now) == Some(Duration::ZERO)) {
            return Err("check() disagrees with retry_after()".into());
        }
    }
    if let Some(mode) = map.get("mode") {
        let got = match breaker.mode(now) {
            Mode::Normal => "normal",
            Mode::ForcedOpen { .. } => "forced_open",
            Mode::Disabled => "disabled",
        };
        equal("mode", got, mode)?;
    }
    if let Some(want) = map.get("poll_timeout_ms") {
        let got = breaker.poll_timeout().map(|t| t.as_micros());
        let want = if want.is_null() { None } else { Some(want.as_u64().ok_or("poll_timeout_ms")? * 1_000) };
        if got != want {
            return Err(format!("poll_timeout: expected {want:?} µs, got {got:?} µs"));
        }
    }
    if let Some(metrics) = map.get("metrics") {
        check_metrics(breaker, now, metrics)?;
    }
    if let Some(counts) = map.get("counts") {
        let c = breaker.counts(now);
        let actual = [
            ("consecutive_failures", u64::from(c.consecutive_failures)),
            ("window_calls", u64::from(c.window.calls)),
            ("window_failures", u64::from(c.window.failures)),
            ("window_slow", u64::from(c.window.slow)),
            ("probes_in_flight", u64::from(c.probes_in_flight)),
            ("probe_successes", u64::from(c.probe_successes)),
            ("in_flight", u64::from(c.in_flight)),
            ("concurrency_limit", c.concurrency_limit.map_or(u64::MAX, u64::from)),
        ];
        let names: Vec<&str> = actual.iter().map(|(n, _)| *n).collect();
        for (key, want) in object(counts, &names)? {
            let got = actual.iter().find(|(n, _)| n == key).map(|(_, v)| *v);
            if got != want.as_u64() {
                return Err(format!("counts.{key}: expected {want}, got {got:?}"));
            }
        }
    }
    Ok(())
}

fn acquire(
    breaker: &mut Metered,
    now: Instant,
    map: &Map<String, Value>,
    seen: &mut Vec<Transition>,
    permits: &mut HashMap<String, Permit>,
) -> Result<(), String> {
    let admission = breaker.try_acquire(now);
    seen.extend(admission.transition);
    match (admission.decision, map.get("permit"), map.get("rejected")) {
        (Ok(permit), Some(name), None) => {
            let name = name.as_str().ok_or("permit must be a name")?;
            if permits.insert(name.to_owned(), permit).is_some() {
                return Err(format!("permit name {name:?} already in use"));
            }
            Ok(())
        }
        (Err(rejection), None, Some(want)) => {
            let want = object(want, &["state", "reason", "retry_after_ms"])?;
            if let Some(state) = want.get("state") {
                equal("rejection state", rejection.state.name(), state)?;
            }
            if let Some(reason) = want.get("reason") {
                equal("rejection reason", rejection.wait.reason(), reason)?;
            }
            match want.get("retry_after_ms") {
                Some(expected) => check_retry_after(rejection.retry_after(), expected),
                None => Ok(()),
            }
        }
        (Ok(_), _, _) => Err("expected a rejection, the call was admitted".into()),
        (Err(r), _, _) => Err(format!("expected admission, got {r:?}")),
    }
}

/// Runs a `call` step from `start`; returns where the clock ends.
fn call(
    breaker: &mut Metered,
    start: Instant,
    map: &Map<String, Value>,
    seen: &mut Vec<Transition>,
) -> Result<Instant, String> {
    let outcome = outcome(map)?;
    let duration = map.get("duration_ms").map(millis).transpose().map_err(|_| "duration_ms: whole ms")?;
    let repeat = map.get("repeat").map_or(Some(1), Value::as_u64).ok_or("repeat must be a count")?;
    let end = start + duration.unwrap_or_default();
    // The calls run side by side: all are admitted, then all report.
    let mut permits = Vec::new();
    for i in 0..repeat {
        let admission = breaker.try_acquire(start);
        seen.extend(admission.transition);
        permits.push(admission.decision.map_err(|r| format!("call {i} of {repeat} was rejected: {r:?}"))?);
    }
    for permit in permits {
        seen.extend(breaker.record(permit, outcome, end));
    }
    Ok(end)
}

fn outcome(map: &Map<String, Value>) -> Result<Outcome, String> {
    match map.get("outcome").and_then(Value::as_str) {
        Some("success") => Ok(Outcome::Success),
        Some("failure") => Ok(Outcome::Failure),
        Some("ignored") => Ok(Outcome::Ignored),
        Some("cancelled") => Ok(Outcome::Cancelled),
        other => Err(format!("unknown outcome {other:?}")),
    }
}

fn equal(what: &str, got: &str, want: &Value) -> Result<(), String> {
    if want.as_str() == Some(got) { Ok(()) } else { Err(format!("{what}: expected {want}, got {got:?}")) }
}

/// `want`: whole ms, `null` (no known time), or `{"min": ms, "max": ms}`.
fn check_retry_after(got: Option<Duration>, want: &Value) -> Result<(), String> {
    let got_us = got.map(Duration::as_micros);
    let ok = match want {
        Value::Null => got_us.is_none(),
        Value::Number(n) => got_us.is_some() && got_us == n.as_u64().map(|ms| ms * 1_000),
        range => {
            let range = object(range, &["min", "max"])?;
            let bound = |k| range.get(k).and_then(Value::as_u64).map(|ms| ms * 1_000).ok_or("min and max");
            got_us.is_some_and(|g| g >= bound("min").unwrap_or(u64::MAX) && g <= bound("max").unwrap_or(0))
        }
    };
    if ok { Ok(()) } else { Err(format!("retry_after: expected {want} ms, got {got_us:?} µs")) }
}

fn check_transition(got: &Transition, want: &Value) -> Result<(), String> {
    let want = object(want, &["from", "to", "reason", "at"])?;
    let mismatch = || format!("expected transition {want:?}, got {got:?}");
    for (key, actual) in [("from", got.from.name()), ("to", got.to.name()), ("reason", got.reason.name())] {
        if want.get(key).and_then(Value::as_str) != Some(actual) {
            return Err(mismatch());
        }
    }
    match want.get("at") {
        Some(at) if at.as_u64().map(|ms| ms * 1_000) != Some(got.at.as_micros()) => Err(mismatch()),
        _ => Ok(()),
    }
}

/// `want`: any of the metric names below; times in whole ms (exact),
/// `error_rate` a percentage (within 1e-9), latencies `{"min", "max"}` in ms
/// or `null` (not kept), counts exact.
fn check_metrics(breaker: &Metered, now: Instant, want: &Value) -> Result<(), String> {
    let m = breaker.metrics(now);
    let c = m.counters;
    let ms = |d: Duration| Value::from(d.as_micros() as f64 / 1000.0);
    let latency = |f: fn(&halfopen::LatencySummary) -> Value| m.latency.as_ref().map_or(Value::Null, f);
    let actual: Vec<(&str, Value)> = vec![
        ("admitted", c.admitted.into()),
        ("successes", c.successes.into()),
        ("failures", c.failures.into()),
        ("slow", c.slow.into()),
        ("rejections", c.rejections.into()),
        ("ignored", c.ignored.into()),
        ("cancelled", c.cancelled.into()),
        ("stale", c.stale.into()),
        ("opens", c.opens.into()),
        ("opens_last_24h", m.opens_last_24h.into()),
        ("time_closed_ms", ms(m.time_closed)),
        ("time_open_ms", ms(m.time_open)),
        ("time_half_open_ms", ms(m.time_half_open)),
        ("mean_time_open_ms", m.mean_time_open.map_or(Value::Null, ms)),
        ("error_rate", m.error_rate.map_or(Value::Null, Value::from)),
        ("latency_count", latency(|l| l.count.into())),
        ("latency_p50_ms", latency(|l| Value::from(l.p50.as_micros() as f64 / 1000.0))),
        ("latency_p95_ms", latency(|l| Value::from(l.p95.as_micros() as f64 / 1000.0))),
        ("latency_p99_ms", latency(|l| Value::from(l.p99.as_micros() as f64 / 1000.0))),
        ("latency_max_ms", latency(|l| Value::from(l.max.as_micros() as f64 / 1000.0))),
    ];
    let names: Vec<&str> = actual.iter().map(|(n, _)| *n).collect();
    for (key, expected) in object(want, &names)? {
        let got = &actual.iter().find(|(n, _)| n == key).expect("key checked").1;
        let ok = match (expected, got.as_f64()) {
            (Value::Null, _) => got.is_null(),
            (Value::Number(e), Some(g)) => (e.as_f64().expect("a number") - g).abs() <= 1e-9,
            (Value::Object(_), Some(g)) => {
                let range = object(expected, &["min", "max"])?;
                let bound = |k| range.get(k).and_then(Value::as_f64).ok_or("min and max must be numbers");
                g >= bound("min")? && g <= bound("max")?
            }
            _ => false,
        };
        if !ok {
            return Err(format!("metrics.{key}: expected {expected}, got {got}"));
        }
    }
    Ok(())
}

/// `want`: any of `len`, `evictions`, `holds` (keys that must be present),
/// `lacks` (keys that must not be).
fn check_registry(registry: &Registry<Gauges>, want: &Value) -> Result<(), String> {
    let want = object(want, &["len", "evictions", "holds", "lacks"])?;
    if let Some(len) = want.get("len")
        && len.as_u64() != Some(registry.len() as u64)
    {
        return Err(format!("registry.len: expected {len}, got {}", registry.len()));
    }
    if let Some(n) = want.get("evictions")
        && n.as_u64() != Some(registry.evictions())
    {
        return Err(format!("registry.evictions: expected {n}, got {}", registry.evictions()));
    }
    for (list, present) in [("holds", true), ("lacks", false)] {
        for key in want.get(list).and_then(Value::as_array).into_iter().flatten() {
            let key = key.as_str().ok_or("keys are strings")?;
            if registry.peek(key).is_some() != present {
                return Err(format!("registry.{list}: {key:?}"));
            }
        }
    }
    Ok(())
}
