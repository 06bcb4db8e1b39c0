//! The one error adapter: every error crosses to JavaScript as an `Error`
//! whose message is a JSON object `{kind, field?, problem?, message}`,
//! decoded in one place (`lib/errors.js`). With the `node` feature it is
//! napi's `Error`; without it, [`PlainError`], which the wasm binding throws
//! as a JavaScript `Error` with the same message.
//!
//! `kind`: `"config"` (an invalid option: `field` is the core's field name,
//! `problem` the core's `Problem::code`), `"snapshot"` (`problem`: the core's
//! `SnapshotError::kind`), `"registry_full"`, `"too_many_configured"`,
//! `"capacity"`, `"out_of_memory"` (an output did not fit the memory).

use halfopen::{ConfigError, Problem, RegistryError, SnapshotError};
#[cfg(feature = "node")]
pub use napi::bindgen_prelude::{Buffer, Error, Result};

/// Snapshot bytes (napi's `Buffer` with the `node` feature).
#[cfg(not(feature = "node"))]
pub type Buffer = Vec<u8>;
#[cfg(not(feature = "node"))]
pub use PlainError as Error;
#[cfg(not(feature = "node"))]
pub type Result<T> = core::result::Result<T, PlainError>;

/// An error to throw to JavaScript: its message is the structured JSON.
#[cfg(not(feature = "node"))]
#[derive(Debug)]
pub struct PlainError {
    pub message: String,
}

#[cfg(not(feature = "node"))]
impl PlainError {
    pub fn from_reason(message: String) -> Self {
        PlainError { message }
    }
}

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

/// An output (an exposition, a snapshot) that did not fit the memory.
pub(crate) fn out_of_memory(what: &str) -> Error {
    structured("out_of_memory", None, None, &format!("out of memory: {what} did not fit"))
}

/// An option that no configuration can hold, or that the core refused:
/// `problem` crosses as its code, `message` says it in words.
pub(crate) fn config(field: &str, problem: Problem, message: &str) -> Error {
    structured("config", Some(field), Some(problem.code()), message)
}

impl From<Refusal> for Error {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Config(e) | Refusal::Registry(RegistryError::Config(e)) => {
                config(e.field.name(), e.problem, e.problem.describe())
            }
            Refusal::Registry(e @ RegistryError::Full { .. }) => {
                structured("registry_full", None, None, &e.to_string())
            }
            Refusal::Registry(e @ RegistryError::TooManyConfigured { .. }) => {
                structured("too_many_configured", None, None, &e.to_string())
            }
            Refusal::Registry(e @ RegistryError::Capacity) => structured("capacity", None, None, &e.to_string()),
            Refusal::Registry(e @ RegistryError::NameTooLong { .. }) => structured("name", None, None, &e.to_string()),
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
