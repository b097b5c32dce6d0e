//! `fallow.live.scrub`: a block scrub of a device or file in the idle
//! time a policy picks, or under an FG budget learned live with no tune
//! result (docs/live.md, "From Python"). The keyword arguments convert into
//! fallow-live's [`Flags`]; [`Settings::resolve`] settles them with a
//! config file, the environment and the defaults exactly as for
//! `fallow scrub`, [`ScrubPlan::from_settings`] makes the plan and the session
//! is the CLI's. Returns what `fallow scrub --json` prints.

use crate::errors::{interruptible, parameter, FallowError, ParameterError, PyFallowError, Result};
use crate::json::to_python;
use crate::sim::Kwargs;
use fallow_core::outpath::OutputGuard;
use fallow_live::native::NativeTarget;
use fallow_live::scrub::{Resume, ScrubPlan, ScrubSession, VerifyMode};
use fallow_live::settings::{Command, Flags, Front, OrderChoice, Settings};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A fallow-live error as the Python exception the rest of the package
/// raises for its kind: a core error as the core's, an unreadable file
/// as `OSError` (errno, message, file name), a wrong setting or input
/// as `ParameterError` (with `.name` where the setting is known), the
/// rest as `FallowError`.
fn live_error(e: fallow_live::Error) -> PyFallowError {
    use fallow_live::Error as E;
    match e {
        E::Core(c) => PyFallowError::Core(c),
        E::Invalid { name, message } => {
            PyFallowError::Core(fallow_core::Error::invalid(&name, message))
        }
        E::Io {
            ref path,
            ref source,
            ..
        } => {
            let msg = e.to_string();
            PyFallowError::Python(match source.raw_os_error() {
                Some(code) => PyOSError::new_err((code, msg, path.display().to_string())),
                None => PyOSError::new_err(msg),
            })
        }
        other if other.is_bad_input() => {
            let msg = other.to_string();
            PyFallowError::Python(Python::with_gil(|py| {
                let err = ParameterError::new_err(msg);
                // every ParameterError has `.name`; None: no single one
                let _ = err.value(py).setattr("name", py.None());
                err
            }))
        }
        other => PyFallowError::Python(FallowError::new_err(other.to_string())),
    }
}

/// One of `choices` for the argument `name`.
fn choice<T: Copy>(kw: &Kwargs<'_>, name: &str, choices: &[(&str, T)]) -> Result<Option<T>> {
    let Some(text) = kw.get::<String>(name)? else {
        return Ok(None);
    };
    match choices.iter().find(|(c, _)| *c == text) {
        Some((_, v)) => Ok(Some(*v)),
        None => Err(parameter(
            name,
            format!(
                "{text:?}: expected one of {}",
                choices
                    .iter()
                    .map(|(c, _)| format!("{c:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// Scrub a block device or file (see `fallow.live.scrub`); returns the
/// JSON document of `fallow scrub --json` as plain data.
#[pyfunction]
#[pyo3(signature = (target, **options))]
pub fn scrub<'py>(
    py: Python<'py>,
    target: PathBuf,
    options: Option<&Bound<'py, PyDict>>,
) -> Result<Bound<'py, PyAny>> {
    let text = target.to_string_lossy();
    if NativeTarget::parse(&text).map_err(live_error)?.is_some() {
        return Err(parameter(
            "target",
            format!(
                "{text}: btrfs:, zfs:, md: and fstrim: targets run from the command line only \
                 (`fallow scrub {text} --budget 5%`); fallow.live.scrub takes a block device or a file"
            ),
        ));
    }
    let kw = Kwargs::new(options)?;
    // `windows="01:00-06:00"` or a list of them
    let windows = match kw.raw("windows")? {
        None => Vec::new(),
        Some(w) if w.is_instance_of::<PyString>() => vec![w.extract::<String>()?],
        Some(w) => w.extract::<Vec<String>>().map_err(|_| {
            parameter(
                "windows",
                "a daily window (\"01:00-06:00\") or a list of them",
            )
        })?,
    };
    let flags = Flags {
        front: Front::Python,
        config: kw.get::<PathBuf>("config")?,
        policy: kw.get::<String>("policy")?,
        tuned: kw.get::<PathBuf>("tuned")?,
        budget: kw.get::<String>("budget")?,
        interval_ns: kw.duration_ns("interval")?,
        seed: kw.get::<u64>("seed")?,
        monitor: kw.get::<String>("monitor")?,
        size: kw.size("size")?,
        order: choice(
            &kw,
            "order",
            &[
                ("sequential", OrderChoice::Sequential),
                ("staggered", OrderChoice::Staggered),
            ],
        )?,
        regions: kw.get::<u64>("regions")?,
        max_rate: kw.get::<String>("max_rate")?,
        windows,
        max_bytes: kw.size("max_bytes")?,
        checkpoint: kw.get::<PathBuf>("checkpoint")?,
        checkpoint_interval_ns: kw.duration_ns("checkpoint_interval")?,
        log: kw.get::<PathBuf>("log")?,
        retries: kw.get::<u32>("retries")?,
        verify: choice(
            &kw,
            "verify",
            &[
                ("off", VerifyMode::Off),
                ("auto", VerifyMode::Auto),
                ("required", VerifyMode::Required),
            ],
        )?,
        buffered: kw.get::<bool>("buffered")?.unwrap_or(false),
        ..Flags::default()
    };
    let resume = match (
        kw.get::<bool>("resume")?.unwrap_or(false),
        kw.get::<bool>("restart")?.unwrap_or(false),
    ) {
        (true, true) => {
            return Err(parameter(
                "resume",
                "resume=True and restart=True together: give one of them",
            ))
        }
        (true, false) => Resume::Yes,
        (false, true) => Resume::Restart,
        (false, false) => Resume::No,
    };
    let mut outputs = OutputGuard::new(kw.get::<bool>("overwrite")?.unwrap_or(false));
    kw.finish()?;
    let s = Settings::resolve(Command::Scrub, &flags).map_err(live_error)?;
    if let Some(config) = &flags.config {
        outputs.add_input(config);
    }
    let plan = ScrubPlan::from_settings(&s, target, resume, outputs);
    let session = ScrubSession::open(&plan).map_err(|e| live_error(s.provenance.rename(e)))?;
    let warnings = session.warnings().to_vec();
    // Ctrl-C sets it: the session stops at its next step, writes its
    // checkpoint (resume=True continues), and KeyboardInterrupt is raised
    let cancel = Arc::new(AtomicBool::new(false));
    let out =
        interruptible(py, cancel.clone(), || Ok(session.run(&cancel)))?.map_err(live_error)?;
    to_python(py, &out.doc(&s.policy, s.policy_from(), &warnings))
}
