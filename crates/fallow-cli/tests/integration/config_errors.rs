//! A bad value in the TOML config is reported as `FILE: [table] key: …`,
//! also when the check that finds it runs later, in
//! fallow-live, which names parameters by their flags. A flag's bad value
//! still names the flag.

use crate::common;

use common::{bad_input, fallow};
use std::path::{Path, PathBuf};

/// A 1 MiB scrub target and a config of `text` beside it.
fn setup(text: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("data.img");
    std::fs::write(&target, vec![0u8; 1 << 20]).unwrap();
    let cfg = d.path().join("fallow.toml");
    std::fs::write(&cfg, text).unwrap();
    (d, target, cfg)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `fallow scrub TARGET --config CFG` with a checkpoint in the scratch dir.
fn scrub_with(text: &str, extra: &[&str], needles: &[&str]) {
    let (d, target, cfg) = setup(text);
    let ck = d.path().join("ck.json");
    let mut args = vec![
        "scrub",
        s(&target),
        "--config",
        s(&cfg),
        "--checkpoint",
        s(&ck),
    ];
    // no monitor of this machine's disks unless the case is about it
    if !text.contains("monitor =") {
        args.extend_from_slice(&["--monitor", "none"]);
    }
    args.extend_from_slice(extra);
    let key = |k: &str| format!("{}: {k}", cfg.display());
    let needles: Vec<String> = needles
        .iter()
        .map(|n| match n.strip_prefix('@') {
            Some(k) => key(k),
            None => n.to_string(),
        })
        .collect();
    let refs: Vec<&str> = needles.iter().map(String::as_str).collect();
    bad_input(&args, &refs);
    // nothing was written: neither the checkpoint nor its lock (the
    // monitor starts after the scrubber has set up its checkpoint)
    if !text.contains("monitor =") {
        assert!(!ck.exists() && !d.path().join("ck.json.lock").exists());
    }
}

#[test]
fn values_checked_in_fallow_live_name_the_file_table_and_key() {
    // a request larger than the 1 GiB bound (checked by the scrubber)
    scrub_with(
        "[scrub]\nsize = \"2GiB\"\n",
        &[],
        &["@[scrub] size:", "1 GiB"],
    );
    // a staggered order of 0 regions
    scrub_with(
        "[scrub]\norder = \"staggered\"\nregions = 0\n",
        &[],
        &["@[scrub] regions:", "at least 1"],
    );
    // regions with a sequential order, whichever of the two the file gave
    scrub_with(
        "[scrub]\norder = \"sequential\"\nregions = 8\n",
        &[],
        &["@[scrub] regions:", "staggered"],
    );
    scrub_with(
        "[scrub]\norder = \"sequential\"\n",
        &["--regions", "8"],
        &["@[scrub] order:", "--regions"],
    );
    // a policy that does not exist, from either table
    scrub_with(
        "[scrub]\npolicy = \"no-such-policy\"\n",
        &[],
        &["@[scrub] policy", "no-such-policy"],
    );
    scrub_with(
        "[live]\npolicy = \"no-such-policy\"\n",
        &[],
        &["@[live] policy", "no-such-policy"],
    );
    // a disk to watch that does not exist, from either table
    scrub_with(
        "[live]\nmonitor = \"nosuchdev\"\n",
        &[],
        &["@[live] monitor:", "no block device `nosuchdev`"],
    );
    scrub_with(
        "[live]\nmonitor = \"sda\"\n[scrub]\nmonitor = \"nosuchdev\"\n",
        &[],
        &["@[scrub] monitor:", "nosuchdev"],
    );
    // already checked where the file is read: the rate
    scrub_with(
        "[scrub]\nmax_rate = \"fast\"\n",
        &[],
        &["@[scrub] max_rate:", "fast"],
    );
}

#[test]
fn the_same_values_as_flags_name_the_flag() {
    let (d, target, _) = setup("");
    let ck = d.path().join("ck.json");
    bad_input(
        &[
            "scrub",
            s(&target),
            "--monitor",
            "none",
            "--checkpoint",
            s(&ck),
            "--size",
            "2GiB",
        ],
        &["--size"],
    );
    let o = fallow(&[
        "scrub",
        s(&target),
        "--monitor",
        "none",
        "--checkpoint",
        s(&ck),
        "--policy",
        "no-such-policy",
    ]);
    let e = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("from --policy") && !e.contains("fallow.toml"),
        "{e}"
    );
}

#[test]
fn an_output_from_the_config_is_named_by_its_key() {
    // the block scrub's checkpoint and log, from [scrub]
    let (d, target, cfg) = setup("[scrub]\ncheckpoint = \"notes.txt\"\n");
    std::fs::write(d.path().join("notes.txt"), "mine\n").unwrap();
    bad_input(
        &[
            "scrub",
            s(&target),
            "--monitor",
            "none",
            "--config",
            s(&cfg),
        ],
        &[
            &format!("{}: [scrub] checkpoint:", cfg.display()),
            "--overwrite",
        ],
    );
    std::fs::write(
        &cfg,
        "[scrub]\ncheckpoint = \"ck.json\"\nlog = \"data.img\"\n",
    )
    .unwrap();
    bad_input(
        &[
            "scrub",
            s(&target),
            "--monitor",
            "none",
            "--config",
            s(&cfg),
        ],
        &[
            &format!("{}: [scrub] log:", cfg.display()),
            "input of this command",
        ],
    );
    assert_eq!(std::fs::read(&target).unwrap(), vec![0u8; 1 << 20]);
    assert_eq!(
        std::fs::read_to_string(d.path().join("notes.txt")).unwrap(),
        "mine\n"
    );
}

/// `fallow peer serve` reads the `[peer]` table of the same file format:
/// its listen address, said on stderr with where it came from, a flag
/// winning over it, and a bad key's value named by file, table and key.
#[test]
fn a_peer_takes_its_settings_from_the_peer_table() {
    use std::io::Read as _;
    // a free loopback port, then given back for the node to take
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let text = format!(
        "[scrub]\nsize = \"1MiB\"\n[peer]\nlisten = \"127.0.0.1:{port}\"\nchunk_size = \"64KiB\"\n"
    );
    let (d, _target, cfg) = setup(&text);
    let app = d.path().join("app");
    std::fs::create_dir(&app).unwrap();
    std::fs::write(app.join("f.bin"), vec![5u8; 100_000]).unwrap();
    let dir = format!("app={}", app.display());
    let mut node = common::fallow_cmd(&["peer", "serve", "--config", s(&cfg), "--dir", &dir])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let addr = format!("127.0.0.1:{port}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        let o = fallow(&["peer", "status", "--peer", &addr, "--json"]);
        if o.status.success() {
            break common::json_of(&o);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no node on {addr}: {}",
            common::stderr(&o)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&node),
        rustix::process::Signal::INT,
    )
    .unwrap();
    common::wait_exit(&mut node, std::time::Duration::from_secs(20));
    let mut err = String::new();
    node.stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status["index"]["files"], 1, "{status}");
    let said = format!("listen {addr} ({}: [peer] listen)", cfg.display());
    assert!(err.contains(&said), "{said} in {err}");
    assert!(err.contains("chunk_size 64KiB ("), "{err}");

    // a bad value names the file, table and key; a flag's, the flag
    let (_d, _t, cfg) = setup("[peer]\ntimeout = \"soon\"\n");
    bad_input(
        &["peer", "serve", "--config", s(&cfg), "--dir", &dir],
        &[&format!("{}: [peer] timeout", cfg.display())],
    );
    bad_input(
        &["peer", "serve", "--chunk-size", "6KiB", "--dir", &dir],
        &["--chunk-size"],
    );
}
