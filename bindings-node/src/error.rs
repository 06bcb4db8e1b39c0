//! The one error adapter: every error crosses to JavaScript as a napi
//! `Error` whose message is a JSON object `{kind, field?, problem?, message}`,
//! decoded in one place (`lib/errors.js`).
//!
//! `kind`: `"config"` (an invalid option: `field` is the core's field name,
//! `problem` its problem), `"snapshot"` (`problem`: the core's
//! `SnapshotError::kind`), `"registry_full"`, `"too_many_configured"`,
//! `"capacity"`.

use halfopen::{ConfigError, RegistryError, SnapshotError};
use napi::bindgen_prelude::Error;

/// An error of `kind`, naming `field` and `problem` where they apply.
pub(crate) fn structured(kind: &str, field: Option<&str>, problem: Option<&str>, message: &str) -> Error {
    let text = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n"));
    let mut json = format!("{{\"kind\":{}", text(kind));
    if let Some(f) = field {
        json += &format!(",\"field\":{}", text(f));
    }
    if let Some(p) = problem {
        json += &format!(",\"problem\":{}", text(p));
    }
    json += &format!(",\"message\":{}}}", text(message));
    Error::from_reason(json)
}

/// An option that no configuration can hold, or that the core refused.
pub(crate) fn config(field: &str, problem: &str) -> Error {
    structured("config", Some(field), Some(problem), problem)
}

impl From<Refusal> for Error {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Config(e) => config(e.field.name(), e.problem.describe()),
            Refusal::Registry(RegistryError::Config(e)) => config(e.field.name(), e.problem.describe()),
            Refusal::Registry(e @ RegistryError::Full { .. }) => {
                structured("registry_full", None, None, &e.to_string())
            }
            Refusal::Registry(e @ RegistryError::TooManyConfigured { .. }) => {
                structured("too_many_configured", None, None, &e.to_string())
            }
            Refusal::Registry(e @ RegistryError::Capacity) => structured("capacity", None, None, &e.to_string()),
            Refusal::Snapshot(e) => structured("snapshot", None, Some(e.kind()), &e.to_string()),
        }
    }
}

/// Whatever the core refused.
pub(crate) enum Refusal {
    Config(ConfigError),
    Registry(RegistryError),
    Snapshot(SnapshotError),
}

impl From<ConfigError> for Refusal {
    fn from(e: ConfigError) -> Self {
        Refusal::Config(e)
    }
}

impl From<RegistryError> for Refusal {
    fn from(e: RegistryError) -> Self {
        Refusal::Registry(e)
    }
}

impl From<SnapshotError> for Refusal {
    fn from(e: SnapshotError) -> Self {
        Refusal::Snapshot(e)
    }
}
