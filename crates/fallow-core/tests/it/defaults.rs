//! A policy's default is written in three places — its `Config::default()`
//! (what `build` takes when a key is not given), the `params` help text of
//! its registry entry, and its knob's `default` (where `tune` starts and
//! what `fallow policies` shows) — and these tests hold them to one value:
//! for every policy of the registry, building it with the value the help
//! text or the knob states must behave exactly as building it with none.
//! Changing any one place alone fails here
//! (`a_changed_default_is_caught` plants such a change).

use fallow_core::policy::{self, Entry};
use fallow_core::sim::{simulate, BgService, Prepared, SimConfig};
use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
use fallow_core::ServiceModel;

/// Idle intervals from microseconds to seconds (hyperexponential, CV 4),
/// so a changed wait, threshold or size changes what a policy does.
fn bursty() -> Prepared {
    let service = ServiceModel::Exponential { mean_ns: 5_000_000 };
    let t = SyntheticWorkload {
        arrivals: ArrivalProcess::from_spec("hyperexp:cv=4", None, Some(0.2), &service, 4096)
            .unwrap(),
        requests: 3000,
        service,
        request_size_bytes: 4096,
        capacity_bytes: 1 << 30,
        write_fraction: 0.5,
        seed: 11,
    }
    .generate()
    .unwrap();
    Prepared::new(&t, None, 11).unwrap()
}

fn sim() -> SimConfig {
    SimConfig {
        bg_service: "size:base=8ms,knee=64KiB,rate=100MB"
            .parse::<BgService>()
            .unwrap(),
        switch_penalty_ns: 1_000_000,
        ..SimConfig::default()
    }
}

/// What the policy built from `spec` does on `prep`, as comparable text.
fn behaviour(prep: &Prepared, spec: &str) -> Option<String> {
    let mut p = policy::build(spec).ok()?;
    let r = simulate(prep, p.as_mut(), &sim()).unwrap();
    Some(serde_json::to_string(&r).unwrap())
}

/// The default the help text (`params`) states for `key`: the
/// parenthesis right after `key=TYPE`; its `default X` if it says so, else
/// its comma-separated items' first words in order (`(2000 intervals)`,
/// `(bucket size, 100)`), each a candidate the caller tries.
fn stated_defaults(params: &str, key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = params[from..].find(&format!("{key}=")) {
        let at = from + i;
        from = at + key.len() + 1;
        let before = params[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_') {
            continue; // the tail of a longer key (`max-order=` for `order=`)
        }
        let after = &params[from..];
        let Some(ty_end) = after.find(' ') else { break };
        let rest = &after[ty_end + 1..];
        // `p=, variant=` (no type, no parenthesis): nothing stated
        if after[..ty_end].contains(',') || !rest.starts_with('(') {
            break;
        }
        let Some(close) = rest.find(')') else { break };
        let inner = &rest[1..close];
        if let Some(d) = inner.split("default ").nth(1) {
            out.push(d.split([',', ';', ' ']).next().unwrap_or("").to_string());
        } else {
            for item in inner.split(',') {
                if let Some(w) = item.split_whitespace().next() {
                    out.push(w.to_string());
                }
            }
        }
        break;
    }
    out.retain(|s| !s.is_empty());
    out
}

/// The places of one entry whose default disagrees with `Config::default()`.
fn drift(prep: &Prepared, e: &Entry, params_help: &str) -> Vec<String> {
    drift_and_checked(prep, e, params_help).0
}

/// [`drift`], and the `name:key=value` the help text stated and was tried.
fn drift_and_checked(prep: &Prepared, e: &Entry, params_help: &str) -> (Vec<String>, Vec<String>) {
    let mut checked = Vec::new();
    let base = behaviour(prep, e.name).expect("every policy builds with its defaults");
    let mut bad = Vec::new();
    if let Some(k) = e.knob {
        let spec = format!("{}:{}={}", e.name, k.name, k.default);
        if behaviour(prep, &spec).as_ref() != Some(&base) {
            bad.push(format!(
                "{}: knob default `{spec}` is not the built default",
                e.name
            ));
        }
    }
    for p in e.keys.iter().filter(|p| p.requires.is_empty()) {
        // the first stated value the policy accepts is the help's default
        let stated = stated_defaults(params_help, p.key)
            .into_iter()
            .find_map(|v| {
                let spec = format!("{}:{}={v}", e.name, p.key);
                behaviour(prep, &spec).map(|b| (spec, b))
            });
        if let Some((spec, b)) = stated {
            checked.push(spec.clone());
            if b != base {
                bad.push(format!(
                    "{}: the help's `{spec}` is not the built default",
                    e.name
                ));
            }
        }
    }
    (bad, checked)
}

#[test]
fn every_policys_help_and_knob_state_its_built_defaults() {
    let prep = bursty();
    let mut bad = Vec::new();
    let mut checked = 0;
    for e in policy::registry() {
        bad.extend(drift(&prep, e, e.params));
        checked += usize::from(e.knob.is_some());
    }
    assert!(bad.is_empty(), "defaults drifted:\n{}", bad.join("\n"));
    // every knob was compared (the registry's own count, not a hand count)
    assert_eq!(
        checked,
        policy::registry()
            .iter()
            .filter(|e| e.knob.is_some())
            .count()
    );
}

#[test]
fn the_help_text_is_read_as_written() {
    let h = "t=DURATION (default 100ms), c=DURATION (wait, default 5ms), history=N (2000 intervals), cap=N (bucket size, 100), size=BYTES";
    assert_eq!(stated_defaults(h, "t"), ["100ms"]);
    assert_eq!(stated_defaults(h, "c"), ["5ms"]);
    assert_eq!(stated_defaults(h, "history"), ["2000"]);
    assert_eq!(stated_defaults(h, "cap"), ["bucket", "100"]);
    assert!(stated_defaults(h, "size").is_empty());
    assert!(stated_defaults("max-order=N (8)", "order").is_empty());
}

/// A help text that says 200ms where fixed-wait's `Config::default()` is
/// 100 ms, and a knob that does the same, are both caught.
#[test]
fn a_changed_default_is_caught() {
    let prep = bursty();
    let e = policy::registry()
        .iter()
        .find(|e| e.name == "fixed-wait")
        .unwrap();
    assert!(drift(&prep, e, e.params).is_empty());
    let bad = drift(&prep, e, "t=DURATION (default 200ms), size=BYTES");
    assert_eq!(
        bad,
        ["fixed-wait: the help's `fixed-wait:t=200ms` is not the built default"]
    );
    let mut knob = e.knob.unwrap();
    knob.default = "1s";
    let changed = Entry {
        knob: Some(knob),
        ..*e
    };
    let bad = drift(&prep, &changed, e.params);
    assert_eq!(
        bad,
        ["fixed-wait: knob default `fixed-wait:t=1s` is not the built default"]
    );
}
