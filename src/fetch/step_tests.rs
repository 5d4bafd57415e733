#[test]
fn npm_is_found_in_absolute_path_entries_only() {
    let dir = tempfile::tempdir().unwrap();
    let npm = dir.path().join("npm");
    std::fs::write(&npm, "").unwrap();
    let path = |value: String| vec![("PATH".to_string(), value)];
    let both = path(format!("node_modules/.bin:{}", dir.path().display()));
    assert_eq!(npm_on_path(&both), Some(npm));
    // A relative entry is read against the server's working directory: never used, even
    // when it names a directory that holds an npm.
    let depth = std::env::current_dir().unwrap().components().count();
    let up = "../".repeat(depth);
    let relative = format!(
        "{up}{}",
        dir.path().display().to_string().trim_start_matches('/')
    );
    assert!(
        std::path::Path::new(&relative).join("npm").is_file(),
        "{relative}"
    );
    assert_eq!(npm_on_path(&path(relative)), None);
}
use super::*;

fn lines(text: &str) -> Vec<String> {
    text.lines().map(String::from).collect()
}

/// An `npx -y left-pad` server granted a directory, a passthrough secret and an `env` entry.
fn granted_server(granted: &std::path::Path) -> FetchPlan {
    let policy = crate::policy::load(&[], &[]).unwrap();
    let mut sandbox = policy.sandbox_for("pad").clone();
    let config = Origin {
        layer: Layer::Config,
        file: PathBuf::from("--allow-write"),
        line: None,
    };
    let granted = granted.display().to_string();
    for list in [&mut sandbox.read, &mut sandbox.write] {
        list.push(Sourced {
            value: granted.clone(),
            origin: config.clone(),
        });
    }
    sandbox.env.push(Sourced {
        value: "SECRET_TOKEN".into(),
        origin: config,
    });
    let parent_env: Vec<(String, String)> = [
        ("PATH", "/usr/bin:/bin"),
        ("HOME", "/home/me"),
        ("LANG", "C.UTF-8"),
        ("SECRET_TOKEN", "s3cr3t"),
        ("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let request = PlanRequest {
        server: "pad".into(),
        program: PathBuf::from("/usr/bin/npx"),
        args: vec!["-y".into(), "left-pad".into()],
        env: vec![("API_KEY".into(), "k3y".into())],
        cwd: None,
        sandbox,
        dirs: crate::sandbox::AirlockDirs::from_env(&parent_env, false),
        parent_env,
        resolved: Default::default(),
        fetches_packages: false,
    };
    FetchPlan {
        runner: Runner::Npx {
            packages: vec!["left-pad".into()],
        },
        request,
        host: crate::sandbox::HostFacts::full_featured_root(),
        real_cache: PathBuf::from("/home/me/.npm"),
        uid: 0,
    }
}

#[test]
fn the_install_gets_none_of_the_servers_grants_secrets_or_env() {
    let granted = tempfile::tempdir().unwrap();
    let fetch = granted_server(granted.path());
    let host = &fetch.host;
    let server = crate::sandbox::plan(&fetch.request, host).unwrap();
    let has_grant = |plan: &SandboxPlan| plan.fs.iter().any(|rule| rule.path == granted.path());
    let has_var = |plan: &SandboxPlan, name: &str| plan.env.iter().any(|(key, _)| key == name);
    // The server itself has them all.
    assert!(has_grant(&server));
    assert!(has_var(&server, "SECRET_TOKEN") && has_var(&server, "API_KEY"));
    let rule = NetRule::parse("registry.invalid:443").unwrap();
    let origin = Origin {
        layer: Layer::User,
        file: PathBuf::from("npm"),
        line: None,
    };
    let settings = vec![(
        "npm_config_registry".into(),
        "https://registry.invalid/".into(),
    )];
    let install = crate::sandbox::plan(
        &install_request(
            &fetch,
            vec![Sourced {
                value: rule,
                origin,
            }],
            settings,
        ),
        host,
    )
    .unwrap();
    assert!(!has_grant(&install), "{:#?}", install.fs);
    for secret in ["SECRET_TOKEN", "API_KEY"] {
        assert!(!has_var(&install, secret), "{secret}: {:?}", install.env);
    }
    // What it needs still reaches it: the search path, the locale, the registry, TLS trust.
    for needed in ["PATH", "LANG", "npm_config_registry", "SSL_CERT_FILE"] {
        assert!(has_var(&install, needed), "{needed}: {:?}", install.env);
    }
    assert_eq!(
        install.argv[1..],
        ["--yes", "--package=left-pad", "--", "/bin/true"]
    );
}

#[test]
fn a_failed_install_is_told_by_its_telling_line() {
    let npm = lines(
        "npm error code ECONNRESET\nnpm error network request to http://127.0.0.1:1/p failed, reason: read ECONNRESET\nnpm error network This is a problem related to network connectivity.\nnpm error A complete log of this run can be found in: /x.log",
    );
    assert_eq!(
        telling_line(&npm),
        "npm error network request to http://127.0.0.1:1/p failed, reason: read ECONNRESET"
    );
    let uv = lines(
        "Downloading x\n  × Failed to download `h11==0.16.0`\n  ├─▶ Failed to read from the distribution cache\n  ╰─▶ failed to rename file\n  help: `h11` was included because",
    );
    assert_eq!(
        telling_line(&uv),
        "Failed to download `h11==0.16.0`: Failed to read from the distribution cache: failed to rename file"
    );
    assert_eq!(
        telling_line(&lines("a\nb\nnpm error A complete log of this run")),
        "b"
    );
}

/// A registry that says it has no such package gets "check the name", not "check the network".
#[test]
fn a_package_the_registry_does_not_have_is_a_name_to_check() {
    let runner = Runner::Npx {
        packages: vec!["@scope/server-typo".into()],
    };
    let registries = vec!["registry.example".to_string()];
    let missing = InstallFailed::Exited {
        status: "exited with 1".into(),
        refused: Vec::new(),
        line: telling_line(&lines(
            "npm error code E404\nnpm error 404 Not Found - GET https://registry.example/@scope%2fserver-typo - Not found\nnpm error 404  '@scope/server-typo@*' is not in this registry.",
        )),
    };
    let fix = install_fix(&missing, &registries, &runner);
    assert!(
        fix.starts_with("check the package name and version (@scope/server-typo)"),
        "{fix}"
    );
    let unreachable = InstallFailed::Exited {
        status: "exited with 1".into(),
        refused: Vec::new(),
        line:
            "npm error network request to https://registry.example/x failed, reason: ECONNREFUSED"
                .into(),
    };
    let fix = install_fix(&unreachable, &registries, &runner);
    assert!(
        fix.starts_with("check that registry.example is reachable"),
        "{fix}"
    );
    assert!(
        fix.contains("only for a package you trust") && fix.contains("full rights"),
        "{fix}"
    );
}

/// An install whose script reached for another host (a binary from GitHub) failed for that, not
/// for the registry: the message names the host, and never offers running the script outside
/// airlock without saying what that costs.
#[test]
fn an_install_that_reached_for_other_hosts_says_so() {
    let runner = Runner::Npx {
        packages: vec!["electron".into()],
    };
    let registries = vec!["registry.example".to_string()];
    let why = InstallFailed::Exited {
        status: "exited with 1".into(),
        line: String::new(),
        refused: vec!["github.com".into()],
    };
    assert_eq!(
        why.to_string(),
        "exited with 1 after it tried to reach github.com, which the install step may not"
    );
    let fix = install_fix(&why, &registries, &runner);
    assert!(
        fix.starts_with("the install step reaches only registry.example, and this install also reached for github.com"),
        "{fix}"
    );
    assert!(!fix.contains("is reachable from this machine"), "{fix}");
    assert!(fix.contains("only for a package you trust"), "{fix}");
}
