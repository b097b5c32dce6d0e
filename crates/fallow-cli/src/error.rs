//! Failures and exit codes, in one place. Errors are `anyhow` in the CLI;
//! the exit code says whose fault a failure was: 2 for bad input or usage
//! (a malformed trace, an unknown format, a device that is not in the
//! trace, a bad flag value), 130 for a stop the user asked for, 1 for
//! anything else (a report that cannot be written, an I/O failure). The
//! message names the flag to change where the core names a parameter.

/// A failure caused by the user's input or flags: exit code 2.
#[derive(Debug)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// Exit code for an error chain: 2 when the input or usage is at fault.
pub(crate) fn exit_code_of(err: &anyhow::Error) -> u8 {
    use fallow_core::Error as E;
    for cause in err.chain() {
        if cause.is::<BadInput>() {
            return 2;
        }
        if let Some(e) = cause.downcast_ref::<E>() {
            return match e {
                E::Io { source, .. } => match source.kind() {
                    // a path that does not exist or cannot be read, or a
                    // corrupt (gzip) stream: the input is at fault
                    std::io::ErrorKind::NotFound
                    | std::io::ErrorKind::PermissionDenied
                    | std::io::ErrorKind::IsADirectory
                    | std::io::ErrorKind::InvalidData
                    | std::io::ErrorKind::InvalidInput
                    | std::io::ErrorKind::UnexpectedEof => 2,
                    _ => 1,
                },
                E::Record { .. }
                | E::Empty { .. }
                | E::UnknownFormat { .. }
                | E::NoSuchDevice { .. }
                | E::InvalidParameter { .. }
                | E::Unsupported(_) => 2,
                // a stop the caller asked for (130: as for SIGINT)
                E::Interrupted => 130,
            };
        }
    }
    1
}

/// The error and its causes on one line, without repeating a cause that
/// the message before it already quotes (the core's I/O errors include
/// their OS error in their own message).
pub(crate) fn message(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = match cause.downcast_ref::<fallow_core::Error>() {
            Some(fallow_core::Error::InvalidParameter { name, message }) => {
                format!("invalid {}: {message}", flag_of(name))
            }
            _ => cause.to_string(),
        };
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    // Echoed input must not move the cursor or overwrite the line (a CR
    // can make a bad value look valid): escape control characters, keeping
    // the line breaks and tabs messages use themselves.
    out.chars()
        .flat_map(|c| {
            let keep = !c.is_control() || c == '\n' || c == '\t';
            let escaped: Vec<char> = if keep {
                vec![c]
            } else {
                c.escape_default().collect()
            };
            escaped
        })
        .collect()
}

/// The flag of a parameter the core names (the core validates, the CLI
/// says which flag to change): the parameters of `fallow_core::sim::Request`,
/// `fallow_core::energy::Request` and `fallow_core::scrubplan::PlanRequest`
/// by their names there (Python's keyword spelling), and a few older names
/// in words; other names are shown as they are.
fn flag_of(name: &str) -> &str {
    match name {
        "requests" => "--requests",
        "arrival_rate" | "arrival rate" => "--arrival-rate",
        "utilization" => "--utilization",
        "bg_work" | "bg work" => "--bg-work",
        "bg_size" | "bg size" => "--bg-size",
        "request_size" | "request size" => "--request-size",
        "write_fraction" => "--write-fraction",
        "switch_penalty" => "--switch-penalty",
        // fallow_core::scrubplan::PlanRequest
        "check" => "--check",
        "segments" => "--segment",
        "regions" => "--regions",
        "rpm" => "--rpm",
        other => other,
    }
}

/// A library error as an anyhow error with the right exit code.
pub(crate) fn live_err(e: fallow_live::Error) -> anyhow::Error {
    if e.is_bad_input() {
        BadInput(e.to_string()).into()
    } else {
        anyhow::Error::new(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_escape_control_characters() {
        let err = anyhow::anyhow!("bad value `12\r34\x1b[2K`\nsecond line");
        assert_eq!(message(&err), "bad value `12\\r34\\u{1b}[2K`\nsecond line");
    }

    #[test]
    fn messages_do_not_repeat_causes() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let err = anyhow::Error::from(fallow_core::Error::Io {
            path: "/x".into(),
            source: io,
        })
        .context("reading the trace");
        assert_eq!(message(&err), "reading the trace: /x: No such file");
    }

    #[test]
    fn exit_codes() {
        let bad: anyhow::Error = BadInput("x".into()).into();
        assert_eq!(exit_code_of(&bad), 2);
        let rec = anyhow::Error::from(fallow_core::Error::invalid("format", "nope"));
        assert_eq!(exit_code_of(&rec.context("reading")), 2);
        let other = anyhow::anyhow!("disk full");
        assert_eq!(exit_code_of(&other), 1);
    }
}
