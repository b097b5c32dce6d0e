//! A policy's default is written once, in its key's row of its registry
//! entry's key table; `build` and the config's `Default` read it there
//! through `Params`, and the help text and the knob's default are
//! generated from it. These tests hold every policy to that: the help
//! shows each row's default, and the policy built with no parameters
//! behaves exactly as built with every row's default given. A copy of an
//! entry with a changed default shows, tunes and builds with the new one,
//! and a `build` that keeps a default of its own is caught
//! (`a_changed_default_is_caught` plants one).

use fallow_core::energy::spindown::{self, SpinDown};
use fallow_core::energy::PowerModel;
use fallow_core::policy::{self, Entry, Param, Params, Policy};
use fallow_core::sim::{simulate, BgService, Prepared, SimConfig};
use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
use fallow_core::{Result, ServiceModel};

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

/// What the policy built through `e` from `given` (`k=v,…`) does on
/// `prep`, as comparable text.
fn behaviour(prep: &Prepared, e: &Entry, given: &str) -> Option<String> {
    let (_, params) = Params::parse(&format!("{}:{given}", e.name)).ok()?;
    let mut p = e.build_with(params).ok()?;
    let r = simulate(prep, p.as_mut(), &sim()).unwrap();
    Some(serde_json::to_string(&r).unwrap())
}

/// `k=v,…` giving every row of `keys` that has a default and needs no
/// other key beside it, at its default.
fn every_default(keys: &[Param]) -> String {
    keys.iter()
        .filter(|p| !p.default.is_empty() && p.requires.is_empty())
        .map(|p| format!("{}={}", p.key, p.default))
        .collect::<Vec<_>>()
        .join(",")
}

/// Where `key=TYPE` starts in `help` from `from` on, as a whole key (not
/// the tail of a longer one: `t=` in `idle-wait=`).
fn find_key(help: &str, from: usize, key_type: &str) -> Option<usize> {
    let mut at = from;
    while let Some(i) = help[at..].find(key_type) {
        let start = at + i;
        if help[..start].is_empty() || help[..start].ends_with(' ') {
            return Some(start);
        }
        at = start + 1;
    }
    None
}

/// The rows of `keys` whose default the help text `help` does not show:
/// each row's part of the help, from its `key=TYPE` to the next row's,
/// must say `default VALUE`.
fn unshown(name: &str, keys: &[Param], help: &str) -> Vec<String> {
    let mut bad = Vec::new();
    let mut at = 0;
    let starts: Vec<Option<usize>> = keys
        .iter()
        .map(|p| {
            let found = find_key(help, at, &format!("{}={}", p.key, p.kind.shown()));
            if let Some(i) = found {
                at = i;
            }
            found
        })
        .collect();
    for (k, p) in keys.iter().enumerate() {
        let Some(start) = starts[k] else {
            bad.push(format!("{name}: the help lacks `{}=`", p.key));
            continue;
        };
        let end = starts[k + 1..].iter().flatten().next().copied();
        let part = &help[start..end.unwrap_or(help.len())];
        if !p.default.is_empty() && !part.contains(&format!("default {}", p.default)) {
            bad.push(format!(
                "{name}: the help's `{part}` does not show the default {}",
                p.default
            ));
        }
    }
    bad
}

/// What disagrees with the key table of `e`: the help not showing a
/// default, the knob's default not its key's, or the policy built with no
/// parameters not behaving as built with every default given (each key
/// needing another beside it: with and without its default, beside it).
fn drift(prep: &Prepared, e: &Entry) -> Vec<String> {
    let mut bad = unshown(e.name, e.keys, &e.params_help());
    if let Some(k) = e.knob {
        let row = e.keys.iter().find(|p| p.key == k.name);
        if row.map(|p| p.default) != e.knob_default() || e.knob_default().is_none() {
            bad.push(format!("{}: the knob's default is not its key's", e.name));
        }
    }
    let mut pairs = vec![(String::new(), every_default(e.keys))];
    for p in e.keys.iter().filter(|p| !p.default.is_empty()) {
        if !p.requires.is_empty() {
            let with = format!("{},{}={}", p.requires, p.key, p.default);
            pairs.push((p.requires.to_string(), with));
        }
    }
    for (none, all) in pairs {
        let built = behaviour(prep, e, &none);
        if built.is_none() || built != behaviour(prep, e, &all) {
            bad.push(format!(
                "{}: `{none}` does not behave as `{all}` (its table's defaults)",
                e.name
            ));
        }
    }
    bad
}

#[test]
fn every_policy_builds_shows_and_tunes_its_tables_defaults() {
    let prep = bursty();
    let mut bad = Vec::new();
    let mut checked = 0;
    for e in policy::registry() {
        bad.extend(drift(&prep, e));
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

/// `entry` with `key`'s default changed to `default` (the table leaked:
/// an entry's table lives as long as the program, as the registry's do).
fn with_default(e: &Entry, key: &str, default: &'static str) -> Entry {
    let mut keys = e.keys.to_vec();
    keys.iter_mut().find(|p| p.key == key).unwrap().default = default;
    Entry {
        keys: keys.leak(),
        ..*e
    }
}

#[test]
fn a_copy_with_a_changed_default_follows_it() {
    let prep = bursty();
    let e = policy::entry("fixed-wait").unwrap();
    let changed = with_default(e, "t", "200ms");
    // the help and the knob read the copy's table
    assert!(changed
        .params_help()
        .starts_with("t=DURATION (default 200ms)"));
    assert!(e.params_help().starts_with("t=DURATION (default 100ms)"));
    assert_eq!(changed.knob_default(), Some("200ms"));
    // built with no parameters, the copy is the original given t=200ms
    let built = behaviour(&prep, &changed, "");
    assert_eq!(built, behaviour(&prep, e, "t=200ms"));
    assert_ne!(built, behaviour(&prep, e, ""), "200ms changes nothing here");
    assert!(drift(&prep, &changed).is_empty());
}

/// A fixed-wait that keeps a default of its own: built through any entry,
/// it reads the registry's fixed-wait table (which `build_with` puts in
/// place of the one it is built through).
fn stale_build(p: Params) -> Result<Box<dyn Policy>> {
    policy::entry("fixed-wait")?.build_with(p)
}

/// A table that says 200ms where the build takes 100 ms is caught.
#[test]
fn a_changed_default_is_caught() {
    let prep = bursty();
    let e = policy::entry("fixed-wait").unwrap();
    assert!(drift(&prep, e).is_empty());
    let stale = Entry {
        build: stale_build,
        ..with_default(e, "t", "200ms")
    };
    assert_eq!(
        drift(&prep, &stale),
        ["fixed-wait: `` does not behave as `t=200ms` (its table's defaults)"]
    );
}

/// What the spin-down policy built through `e` from `given` decides over a
/// fixed run of idle intervals (1 ms to 100 s): its timeouts, as text.
fn spindown_behaviour(e: &spindown::Entry, given: &str) -> Option<String> {
    let (_, params) = Params::parse(&format!("{}:{given}", e.name)).ok()?;
    let mut p: Box<dyn SpinDown> = e.build_with(params).ok()?;
    let power = PowerModel::default();
    let mut x: u64 = 11;
    let mut out = Vec::new();
    for k in 0..400u64 {
        // a fixed pseudo-random spread over five decades
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let idle_ns = 1_000_000 * 10u64.pow((x >> 61) as u32 % 6) * (1 + (x >> 40) % 9);
        let timeout = p.on_idle(&spindown::IdleCtx {
            now_ns: k * 1_000_000_000_000,
            power: &power,
        });
        p.on_idle_end(idle_ns, timeout.is_some_and(|t| idle_ns > t));
        out.push(timeout);
    }
    Some(format!("{out:?}"))
}

#[test]
fn every_spindown_policy_shows_and_builds_its_tables_defaults() {
    let mut bad = Vec::new();
    for e in spindown::registry() {
        bad.extend(unshown(e.name, e.keys, &e.params_help()));
        let none = spindown_behaviour(e, "");
        if none.is_none() || none != spindown_behaviour(e, &every_default(e.keys)) {
            bad.push(format!(
                "{}: its table's defaults are not its built ones",
                e.name
            ));
        }
    }
    assert!(bad.is_empty(), "defaults drifted:\n{}", bad.join("\n"));
    // a changed default is followed
    let e = spindown::entry("timeout").unwrap();
    let changed = spindown::Entry {
        keys: vec![Param {
            default: "3s",
            ..e.keys[0]
        }]
        .leak(),
        ..*e
    };
    assert_eq!(changed.params_help(), "t=DURATION (default 3s)");
    let built = spindown_behaviour(&changed, "");
    assert_eq!(built, spindown_behaviour(e, "t=3s"));
    assert_ne!(built, spindown_behaviour(e, ""), "3s changes nothing here");
}

#[test]
fn the_help_is_read_as_written() {
    let keys = policy::entry("ar-waiting").unwrap().keys;
    let h = "t=DURATION (default 100ms), c=DURATION (default 100ms), history=N (intervals fitted, default 2000), max-order=N (default 8), refit=N (intervals between fits, default 100), size=BYTES";
    assert!(unshown("ar-waiting", keys, h).is_empty());
    let h = h.replace("default 2000", "default 200");
    assert_eq!(
        unshown("ar-waiting", keys, &h),
        ["ar-waiting: the help's `history=N (intervals fitted, default 200), ` does not show the default 2000"]
    );
    assert_eq!(
        unshown("ar-waiting", keys, "t=DURATION (default 100ms)")[0],
        "ar-waiting: the help lacks `c=`"
    );
}
