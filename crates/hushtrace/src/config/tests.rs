//! Unit tests of the settings and their parsers.

use super::from_env::{parse_globs, parse_size, parse_switch, without_output};
use super::*;

#[test]
fn a_variable_without_output_is_refused_naming_both() {
    let none = without_output(|_| None).unwrap();
    assert!(none.is_none());
    // Empty counts as unset.
    assert!(without_output(|_| Some("".into())).unwrap().is_none());
    let e = without_output(|n| (n == env::RELAY).then(|| "net://collector".into()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("HUSHTRACE_RELAY=\"net://collector\"") && e.contains("without HUSHTRACE_OUTPUT"),
        "{e}"
    );
    for var in env::VARS.iter().filter(|v| v.name != env::OUTPUT) {
        let e = without_output(|n| (n == var.name).then(|| "x".into())).unwrap_err();
        assert!(e.to_string().contains(var.name), "{e}");
    }
}

/// The environment of [`Config::from_vars`]: `HUSHTRACE_OUTPUT=/tmp/x` and `vars`.
fn vars(vars: &[(&'static str, &str)]) -> Result<Option<(Config, Raw)>, Error> {
    let vars: Vec<(&str, String)> = vars.iter().map(|(n, v)| (*n, v.to_string())).collect();
    Config::from_vars(|name| {
        if name == env::OUTPUT {
            return Some("/tmp/x".into());
        }
        vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.into())
    })
}

#[test]
fn on_off_switches_share_one_parser() {
    let on = ["1", "on", "true", "yes", " YES ", "On", "TRUE"];
    let off = ["0", "off", "false", "no", "", " 0 ", "OFF", "No"];
    for var in [env::RELAY_ONLY, env::DIRECT_IO] {
        for (words, want) in [(&on[..], true), (&off[..], false)] {
            for v in words {
                assert_eq!(parse_switch(var, v, "1 or 0").unwrap(), want, "{var}={v:?}");
            }
        }
        let e = parse_switch(var, "maybe", "1 or 0")
            .unwrap_err()
            .to_string();
        assert!(e.contains(var) && e.contains("\"maybe\""), "{e}");
    }
}

#[test]
fn consumer_sched_texts_round_trip_and_bad_ones_say_why() {
    let cfg = |v: &[(&'static str, &str)]| vars(v).unwrap().unwrap().0;
    for (text, want) in [
        ("", ConsumerSched::Inherit),
        ("inherit", ConsumerSched::Inherit),
        ("fifo:1", ConsumerSched::Fifo(1)),
        (" FIFO:99 ", ConsumerSched::Fifo(99)),
        ("rr:50", ConsumerSched::RoundRobin(50)),
        ("nice:-20", ConsumerSched::Nice(-20)),
        ("nice: 19", ConsumerSched::Nice(19)),
    ] {
        assert_eq!(text.parse::<ConsumerSched>(), Ok(want), "{text:?}");
        assert_eq!(want.to_string().parse::<ConsumerSched>(), Ok(want));
    }
    for (text, why) in [
        ("fifo:0", "1 to 99"),
        ("rr:100", "1 to 99"),
        ("nice:20", "-20 to 19"),
        ("nice:-21", "-20 to 19"),
        ("fifo", "expected"),
        ("deadline:5", "expected"),
        ("fifo:high", "expected"),
        ("fifo:99999999999999999999", "expected"),
    ] {
        let e = text.parse::<ConsumerSched>().unwrap_err();
        assert!(e.contains(why), "{text:?}: {e}");
    }
    let c = cfg(&[(env::CONSUMER_SCHED, "rr:3")]);
    assert_eq!(c.consumer_sched, ConsumerSched::RoundRobin(3));
    assert_eq!(
        cfg(&[]).consumer_sched,
        ConsumerSched::Inherit,
        "inherit by default"
    );
    let e = vars(&[(env::CONSUMER_SCHED, "fifo:0")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("HUSHTRACE_CONSUMER_SCHED=\"fifo:0\"") && e.contains("1 to 99"),
        "{e}"
    );
    // A builder value out of range (the enum's fields are wider than the ranges).
    for bad in [
        ConsumerSched::Fifo(0),
        ConsumerSched::RoundRobin(100),
        ConsumerSched::Nice(20),
    ] {
        let c = Config {
            consumer_sched: bad,
            ..Config::default()
        };
        assert!(c.validate(&Raw::default()).is_err(), "{bad:?}");
    }
}

#[test]
fn consumer_cpus_are_a_taskset_list() {
    let cfg = |v: &[(&'static str, &str)]| vars(v).unwrap().unwrap().0;
    assert_eq!(parse_cpu_list("0"), Ok(vec![0]));
    assert_eq!(parse_cpu_list(" 3, 0-1 ,1"), Ok(vec![0, 1, 3]));
    assert_eq!(parse_cpu_list("1023"), Ok(vec![1023]));
    for bad in ["", "a", "1-0", "0,", "-1", "2-", "1024", "0-2000"] {
        assert!(parse_cpu_list(bad).is_err(), "{bad:?}");
    }
    assert_eq!(
        cfg(&[(env::CONSUMER_CPUS, "0-1")]).consumer_cpus,
        Some(vec![0, 1])
    );
    assert_eq!(cfg(&[(env::CONSUMER_CPUS, " ")]).consumer_cpus, None);
    let e = vars(&[(env::CONSUMER_CPUS, "0-x")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("HUSHTRACE_CONSUMER_CPUS=\"0-x\""), "{e}");
    for bad in [vec![], vec![0, 1024]] {
        let c = Config {
            consumer_cpus: Some(bad.clone()),
            ..Config::default()
        };
        assert!(c.validate(&Raw::default()).is_err(), "{bad:?}");
    }
}

#[test]
fn direct_io_from_the_environment() {
    let cfg = |v: &[(&'static str, &str)]| vars(v).unwrap().unwrap().0;
    assert!(!cfg(&[]).direct_io, "off by default");
    assert!(!Config::default().direct_io);
    for v in ["1", "on", "yes", "true"] {
        assert!(cfg(&[(env::DIRECT_IO, v)]).direct_io, "{v:?}");
    }
    for v in ["0", "off", "no", "false", ""] {
        assert!(!cfg(&[(env::DIRECT_IO, v)]).direct_io, "{v:?}");
    }
    let e = vars(&[(env::DIRECT_IO, "fast")]).unwrap_err().to_string();
    assert!(
        e.contains("HUSHTRACE_DIRECT_IO=\"fast\"") && e.contains("page cache"),
        "{e}"
    );
    // Both switches through the same parser, in the same environment.
    let (c, _) = vars(&[
        (env::RELAY, "net://127.0.0.1"),
        (env::RELAY_ONLY, "on"),
        (env::DIRECT_IO, "yes"),
    ])
    .unwrap()
    .unwrap();
    assert!(c.relay_only && c.direct_io);
    let e = vars(&[(env::RELAY_ONLY, "maybe")]).unwrap_err().to_string();
    assert!(
        e.contains("HUSHTRACE_RELAY_ONLY=\"maybe\"") && e.contains("relay only"),
        "{e}"
    );
    // Without HUSHTRACE_OUTPUT, HUSHTRACE_DIRECT_IO alone is refused like the others.
    let e = Config::from_vars(|n| (n == env::DIRECT_IO).then(|| "1".into()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("HUSHTRACE_DIRECT_IO") && e.contains("without HUSHTRACE_OUTPUT"));
}

#[test]
fn relay_only_values() {
    // relay-only without a relay is refused, naming what is missing
    let cfg = Config {
        relay_only: true,
        ..Config::default()
    };
    let e = cfg.validate(&Raw::default()).unwrap_err().to_string();
    assert!(e.contains("needs a relay"), "{e}");
}

#[test]
fn limits_name_the_value_and_the_limit() {
    let cfg = Config {
        num_subbufs: 65536,
        ..Config::default()
    };
    let e = cfg.validate(&Raw::default()).unwrap_err().to_string();
    assert!(e.contains("65536") && e.contains("4096"), "{e}");
    let cfg = Config {
        read_timer: Duration::from_millis(u64::MAX),
        ..Config::default()
    };
    let e = cfg.validate(&Raw::default()).unwrap_err().to_string();
    assert!(e.contains("60000 ms"), "{e}");
    let cfg = Config {
        subbuf_size: 128 << 20,
        num_subbufs: 64,
        ..Config::default()
    };
    let e = cfg.validate(&Raw::default()).unwrap_err().to_string();
    assert!(e.contains("4 GiB"), "{e}");
    assert!(Config::default().validate(&Raw::default()).is_ok());
}

#[test]
fn sizes_take_suffixes_and_reject_garbage() {
    assert_eq!(parse_size("X", "64k").unwrap(), 65536);
    assert_eq!(parse_size("X", " 2M ").unwrap(), 2 << 20);
    let e = parse_size("X", "18446744073709551616")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("X=") && e.contains("18446744073709551616"),
        "{e}"
    );
    assert!(parse_size("X", "-1").is_err());
}

#[test]
fn enable_globs() {
    assert_eq!(
        parse_globs("-*, app:*,-app:noisy").unwrap(),
        vec![
            ("*".to_string(), false),
            ("app:*".to_string(), true),
            ("app:noisy".to_string(), false)
        ]
    );
    let e = parse_globs("app:*,-").unwrap_err().to_string();
    assert!(e.contains("HUSHTRACE_ENABLE"), "{e}");
}

#[test]
fn policy_values() {
    assert_eq!(Policy::parse_env(None).unwrap(), Policy::Zero);
    assert_eq!(Policy::parse_env(Some("log".into())).unwrap(), Policy::Log);
    let e = Policy::parse_env(Some("sometimes".into()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("HUSHTRACE_NO_SYSCALL_POLICY") && e.contains("sometimes"));
}
