use std::path::{Path, PathBuf};

use super::grants::install_prefix;
use super::*;
use crate::net::NetRule;
use crate::policy::{Feature, Layer, Limits, Network, Origin, Requirement, RunAs, Sourced};

fn sourced<T>(value: T) -> Sourced<T> {
    Sourced {
        value,
        origin: Origin {
            layer: Layer::Builtin,
            file: PathBuf::from("default.toml"),
            line: Some(1),
        },
    }
}

fn policy() -> SandboxPolicy {
    SandboxPolicy {
        network: sourced(Network::None),
        read: vec![],
        write: vec![],
        env: ["PATH", "LANG", "LC_*", "TZ", "TERM"]
            .iter()
            .map(|s| sourced(s.to_string()))
            .collect(),
        run_as: sourced(RunAs::Nobody),
        require: vec![],
        kill_timeout: sourced(3),
        limits: Limits {
            processes: sourced(256),
            memory_mb: sourced(4096),
            open_files: sourced(1024),
            file_size_mb: sourced(1024),
            disk_mb: sourced(512),
            cpu_seconds: None,
        },
        grant_args: sourced(crate::policy::GrantArgs::Write),
        locked: None,
    }
}

pub(super) fn request(program: &str, args: &[&str]) -> PlanRequest {
    let parent_env: Vec<(String, String)> = [
        ("PATH", "/usr/bin:/bin"),
        ("HOME", "/home/me"),
        ("LC_ALL", "C.UTF-8"),
        ("AWS_SECRET_ACCESS_KEY", "hunter2"),
        ("PROJECTS", "/home/me/projects"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let dirs = AirlockDirs::from_env(&parent_env, false);
    PlanRequest {
        server: "fs".to_string(),
        program: PathBuf::from(program),
        args: args.iter().map(|s| s.to_string()).collect(),
        env: vec![("API_TOKEN".to_string(), "t0k".to_string())],
        cwd: None,
        sandbox: policy(),
        dirs,
        parent_env,
        resolved: ResolvedPaths::default(),
        fetches_packages: false,
    }
}

fn grants(plan: &SandboxPlan, access: FsAccess) -> Vec<&Path> {
    plan.fs
        .iter()
        .filter(|r| r.access == access)
        .map(|r| r.path.as_path())
        .collect()
}

#[test]
fn default_plan_confines_hard() {
    let plan = plan(
        &request("/usr/bin/node", &["/srv/x/index.js"]),
        &HostFacts::full_featured_root(),
    )
    .unwrap();
    assert_eq!(plan.network, NetMode::None);
    assert_eq!(
        plan.namespaces,
        Namespaces {
            user: true,
            pid: true,
            net: true,
            // the server's own root (and the npm cache overlay in it)
            mount: true,
            // the memory cgroup
            cgroup: true,
            // SysV IPC and POSIX message queues of its own
            ipc: true,
            // its own host name
            uts: true,
        }
    );
    assert_eq!(
        plan.identity,
        Some(Identity {
            uid: NOBODY,
            gid: NOBODY
        })
    );
    let writable = grants(&plan, FsAccess::ReadWrite);
    assert!(writable.contains(&Path::new("/home/me/.local/state/airlock/servers/fs/home")));
    assert!(writable.contains(&Path::new("/home/me/.local/state/airlock/servers/fs/tmp")));
    for rule in &plan.fs {
        assert!(
            !Path::new("/etc/shadow").starts_with(&rule.path),
            "{rule:?} exposes /etc/shadow"
        );
        assert!(
            !Path::new("/home/me").starts_with(&rule.path),
            "{rule:?} exposes the home"
        );
    }
    assert!(plan.seccomp.deny_udp && plan.seccomp.deny_unix_sockets);
    assert!(
        plan.weaker_than_asked.is_empty(),
        "{:?}",
        plan.weaker_than_asked
    );
}

#[test]
fn environment_is_cleared_then_whitelisted() {
    let plan = plan(
        &request("/usr/bin/python3", &[]),
        &HostFacts::full_featured_root(),
    )
    .unwrap();
    let env: std::collections::BTreeMap<_, _> = plan.env.iter().cloned().collect();
    assert_eq!(env.get("PATH").map(String::as_str), Some("/usr/bin:/bin"));
    assert_eq!(env.get("LC_ALL").map(String::as_str), Some("C.UTF-8"));
    assert_eq!(env.get("API_TOKEN").map(String::as_str), Some("t0k"));
    assert_eq!(
        env.get("HOME").map(String::as_str),
        Some("/home/me/.local/state/airlock/servers/fs/home")
    );
    assert!(!env.contains_key("AWS_SECRET_ACCESS_KEY"));
    assert_eq!(
        env.get("PYTHONNOUSERSITE").map(String::as_str),
        Some("1"),
        "python profile applies"
    );
}

/// A variable whose value is a path the server is not granted is named (never its value); one
/// under a grant, the private dirs, or airlock's own are not.
#[test]
fn variables_naming_a_path_without_a_grant_are_named() {
    let mut req = with_read("/srv/data");
    req.env.extend([
        (
            "MEMORY_FILE_PATH".to_string(),
            "/home/me/mcp/memory.jsonl".to_string(),
        ),
        ("DATA_FILE".to_string(), "/srv/data/x.json".to_string()),
        ("SEARCH_PATH".to_string(), "/a:/b".to_string()),
        ("NAME".to_string(), "plain".to_string()),
    ]);
    let plan = plan(&req, &HostFacts::full_featured_root()).unwrap();
    assert_eq!(ungranted_env_paths(&plan), vec!["MEMORY_FILE_PATH"]);
    let plan = plan_for_npx();
    assert!(ungranted_env_paths(&plan).is_empty(), "{:?}", plan.env);
}

fn plan_for_npx() -> SandboxPlan {
    plan(
        &request(
            "/usr/bin/npx",
            &["-y", "@modelcontextprotocol/server-everything"],
        ),
        &HostFacts::full_featured_root(),
    )
    .unwrap()
}

#[test]
fn npx_sees_the_npm_cache_through_a_private_overlay() {
    let plan = plan(
        &request("/usr/bin/npx", &["-y", "pkg"]),
        &HostFacts::full_featured_root(),
    )
    .unwrap();
    let server = Path::new("/home/me/.local/state/airlock/servers/fs");
    let args = ["-y".to_string(), "pkg".to_string()];
    let pkg_store = crate::fetch::detect(Path::new("/usr/bin/npx"), None, &args)
        .unwrap()
        .store_name();
    assert!(pkg_store.starts_with("npx+pkg-"), "{pkg_store}");
    assert_eq!(
        plan.cache_overlays,
        vec![CacheOverlayPlan {
            name: "npm".into(),
            lower: "/home/me/.npm".into(),
            target: server.join("home/.npm"),
            mount: true,
            at_real_path: false,
            // airlock's private copy: what install steps fetched for this server's spec.
            layers: Some(server.join("packages/npm").join(pkg_store).join("layers")),
            upper_on_disk: None,
        }]
    );
    assert!(plan.namespaces.mount);
    // The real cache is not granted at all: the server sees it only through the overlay (whose
    // layers are on its scratch disk, never in the plan's rules).
    for rule in &plan.fs {
        assert!(!rule.path.starts_with("/home/me/.npm"), "{rule:?}");
    }
    let env: std::collections::BTreeMap<_, _> = plan.env.iter().cloned().collect();
    assert_eq!(
        env.get("npm_config_cache").map(String::as_str),
        server.join("home/.npm").to_str()
    );
    assert_eq!(
        env.get("npm_config_offline").map(String::as_str),
        Some("true")
    );
    assert!(!env.contains_key("npm_config_prefer_offline"));
    let shown = plan.to_string();
    assert!(
        shown.contains("overlay /home/me/.npm -> /home/me/.local/state/airlock/servers/fs/home/.npm (copy-on-write; the real cache is never written"),
        "{shown}"
    );
}

/// A path on the command line never grants the real cache the overlay stands for (a server
/// given `~/.npm` would otherwise write the real cache past its copy-on-write view).
#[test]
fn the_real_cache_on_the_command_line_is_not_granted() {
    let mut req = request("/usr/bin/npx", &["-y", "pkg", "/home/me/.npm/_cacache"]);
    req.resolved.arguments = vec![crate::sandbox::arguments::ArgumentPath {
        index: 2,
        written: "/home/me/.npm/_cacache".into(),
        path: "/home/me/.npm/_cacache".into(),
        canonical: "/home/me/.npm/_cacache".into(),
        is_dir: true,
    }];
    let plan = plan(&req, &HostFacts::full_featured_root()).unwrap();
    for rule in &plan.fs {
        assert!(!rule.path.starts_with("/home/me/.npm"), "{rule:?}");
    }
    assert_eq!(plan.arguments.len(), 1);
    assert_eq!(plan.arguments[0].access, None);
    assert!(
        plan.arguments[0].source.contains("the real npm cache"),
        "{:?}",
        plan.arguments[0]
    );
}

/// uv's tool environments name the cache by its absolute path: the overlay is mounted over the
/// real cache path, with no landlock rule on it in the plan (the helper grants it on the mounted
/// overlay only). As root too (changed with the constructed root: the directories leading to it
/// are the root's own, which nobody may traverse); without user namespaces nothing is mounted.
#[test]
fn uv_cache_overlay_is_mounted_over_the_real_path_with_a_mount_namespace() {
    let req = request("/opt/uv/bin/uvx", &["mcp-server-time"]);
    let user = HostFacts {
        is_root: false,
        uid: 1000,
        ..HostFacts::full_featured_root()
    };
    let user_plan = plan(&req, &user).unwrap();
    let [overlay] = user_plan.cache_overlays.as_slice() else {
        panic!("{:?}", user_plan.cache_overlays)
    };
    assert_eq!(overlay.lower, Path::new("/home/me/.cache/uv"));
    assert_eq!(overlay.target, overlay.lower);
    assert!(overlay.at_real_path && overlay.mount);
    for rule in &user_plan.fs {
        assert!(
            !rule.path.starts_with("/home/me/.cache"),
            "the real cache must not be granted before the overlay is on it: {rule:?}"
        );
    }
    let env: std::collections::BTreeMap<_, _> = user_plan.env.iter().cloned().collect();
    assert_eq!(
        env.get("UV_CACHE_DIR").map(String::as_str),
        Some("/home/me/.cache/uv")
    );
    assert!(
        user_plan
            .to_string()
            .contains("overlay /home/me/.cache/uv mounted over itself"),
        "{user_plan}"
    );

    // No user namespaces: nothing can be mounted, so the private empty cache in the private home.
    let no_userns = HostFacts {
        user_namespaces: false,
        ..user.clone()
    };
    let plan_no_ns = plan(&req, &no_userns).unwrap();
    assert!(!plan_no_ns.cache_overlays[0].at_real_path);
    assert!(
        plan_no_ns.cache_overlays[0]
            .target
            .ends_with("servers/fs/home/.cache/uv")
    );

    let as_root = plan(&req, &HostFacts::full_featured_root()).unwrap();
    assert!(as_root.cache_overlays[0].at_real_path);
    assert_eq!(
        as_root.cache_overlays[0].target,
        Path::new("/home/me/.cache/uv")
    );
}

#[test]
fn a_fetched_package_with_a_list_of_names_runs_from_the_cache_and_its_install_step_does_not() {
    let offline_vars = |req: &PlanRequest| {
        let plan = plan(req, &HostFacts::full_featured_root()).unwrap();
        let env: std::collections::BTreeMap<_, _> = plan.env.iter().cloned().collect();
        (
            env.get("npm_config_offline").cloned(),
            env.get("npm_config_prefer_offline").cloned(),
        )
    };
    let mut req = request("/usr/bin/npx", &["-y", "pkg"]);
    let names = vec![sourced(NetRule::parse("example.org").unwrap())];
    req.sandbox.network = sourced(Network::Allow(names));
    assert_eq!(offline_vars(&req), (Some("true".into()), None));
    // The install step reaches the registry its list names.
    req.fetches_packages = true;
    assert_eq!(offline_vars(&req), (None, Some("true".into())));
    // Any name on a port (the port-list form) reaches the registry too.
    req.fetches_packages = false;
    req.sandbox.network = sourced(Network::Allow(vec![sourced(NetRule::any_name(443))]));
    assert_eq!(offline_vars(&req), (None, Some("true".into())));

    // A command no install step serves keeps the network its list gives.
    let mut node = request("/usr/bin/node", &["/srv/server.js"]);
    node.sandbox.network = sourced(Network::Allow(vec![sourced(
        NetRule::parse("example.org").unwrap(),
    )]));
    assert_eq!(offline_vars(&node), (None, Some("true".into())));

    let mut uv = request("/usr/bin/uvx", &["mcp-server-time"]);
    uv.sandbox.network = sourced(Network::Allow(vec![sourced(
        NetRule::parse("example.org").unwrap(),
    )]));
    let plan = plan(&uv, &HostFacts::full_featured_root()).unwrap();
    assert!(
        plan.env
            .contains(&("UV_OFFLINE".to_string(), "1".to_string())),
        "{:?}",
        plan.env
    );
}

#[test]
fn npm_cache_env_follows_the_network_and_the_users_cache_var() {
    let mut req = request("/usr/bin/npx", &["-y", "pkg"]);
    req.sandbox.network = sourced(Network::Allow(vec![sourced(NetRule::any_name(443))]));
    req.parent_env
        .push(("npm_config_cache".into(), "/data/npm-cache".into()));
    let plan = plan(&req, &HostFacts::full_featured_root()).unwrap();
    let env: std::collections::BTreeMap<_, _> = plan.env.iter().cloned().collect();
    assert!(!env.contains_key("npm_config_offline"));
    assert_eq!(
        env.get("npm_config_prefer_offline").map(String::as_str),
        Some("true")
    );
    assert_eq!(plan.cache_overlays[0].lower, Path::new("/data/npm-cache"));
    assert!(env["npm_config_cache"].ends_with("servers/fs/home/.npm"));
}

#[test]
fn cache_overlay_without_user_namespaces_is_a_private_empty_cache() {
    let host = HostFacts {
        user_namespaces: false,
        ..HostFacts::full_featured_root()
    };
    let plan = plan(&request("/usr/bin/npx", &["-y", "pkg"]), &host).unwrap();
    assert!(!plan.namespaces.mount && !plan.cache_overlays[0].mount);
    assert!(
        plan.not_granted
            .iter()
            .any(|n| n.contains("private empty cache"))
    );
    assert!(!plan.fs.iter().any(|r| r.path.starts_with("/home/me/.npm")));
}

#[test]
fn cache_overlay_never_exposes_a_protected_path() {
    let mut req = request("/usr/bin/npx", &["-y", "pkg"]);
    req.parent_env
        .push(("npm_config_cache".into(), "/home/me".into()));
    let plan = plan(&req, &HostFacts::full_featured_root()).unwrap();
    assert!(plan.cache_overlays.is_empty());
    assert!(plan.not_granted.iter().any(|n| n.contains("protected")));
    assert!(
        !plan
            .env
            .iter()
            .any(|(k, v)| k == "npm_config_cache" && v == "/home/me")
    );
}

#[test]
fn grants_expand_and_never_cover_protected_paths() {
    let mut req = request("/usr/bin/node", &[]);
    req.sandbox
        .read
        .push(sourced("${env:PROJECTS}/notes".to_string()));
    req.sandbox.write.push(sourced("~/scratch".to_string()));
    let plan = plan(&req, &HostFacts::full_featured_root()).unwrap();
    assert!(grants(&plan, FsAccess::ReadExec).contains(&Path::new("/home/me/projects/notes")));
    assert!(grants(&plan, FsAccess::ReadWrite).contains(&Path::new("/home/me/scratch")));

    for bad in ["~", "/home", "~/.config", "/"] {
        let mut req = request("/usr/bin/node", &[]);
        req.sandbox.read.push(sourced(bad.to_string()));
        assert!(
            matches!(
                super::plan(&req, &HostFacts::full_featured_root()),
                Err(PlanError::GrantsProtected { .. })
            ),
            "{bad}"
        );
    }
}

#[test]
fn unmet_requirement_refuses() {
    let mut req = request("/usr/bin/node", &[]);
    req.sandbox.require.push(sourced(Requirement {
        feature: Feature::Landlock,
        min_version: Some(9),
        text: "landlock>=9".into(),
    }));
    let err = plan(&req, &HostFacts::full_featured_root()).unwrap_err();
    assert!(matches!(err, PlanError::Unmet { .. }), "{err}");
    req.sandbox.require[0].value.min_version = Some(6);
    assert!(plan(&req, &HostFacts::full_featured_root()).is_ok());
}

#[test]
fn weaker_hosts_are_reported() {
    let host = HostFacts {
        landlock_abi: 3,
        user_namespaces: false,
        is_root: false,
        uid: 1000,
        gid: 1000,
        ..HostFacts::full_featured_root()
    };
    let plan = plan(&request("/usr/bin/node", &[]), &host).unwrap();
    assert!(!plan.namespaces.pid && plan.identity.is_none());
    assert!(
        plan.weaker_than_asked
            .iter()
            .any(|n| n.contains("pid namespace"))
    );
    assert!(plan.weaker_than_asked.iter().any(|n| n.contains("ABI 3")));
}

#[test]
fn install_prefix_and_script_roots() {
    assert_eq!(
        install_prefix(Path::new("/r/.pyenv/versions/3.11.7/bin/python3.11")),
        Some(PathBuf::from("/r/.pyenv/versions/3.11.7"))
    );
    assert_eq!(
        install_prefix(Path::new("/opt/tool/run")),
        Some(PathBuf::from("/opt/tool"))
    );
    let homes = [PathBuf::from("/home/me")];
    let no_pkg = |_: &Path| false;
    assert_eq!(
        paths::script_root(
            Path::new("/home/me/p/node_modules/@s/srv/dist/index.js"),
            &homes,
            no_pkg
        ),
        Some(PathBuf::from("/home/me/p/node_modules"))
    );
    let pkg_at = |dir: &Path| dir == Path::new("/home/me/project");
    assert_eq!(
        paths::script_root(Path::new("/home/me/project/build/index.js"), &homes, pkg_at),
        Some(PathBuf::from("/home/me/project"))
    );
    assert_eq!(
        paths::script_root(Path::new("/home/me/server.py"), &homes, no_pkg),
        None,
        "never the home itself"
    );
    // The home reached through a link: its real path is the home too.
    let both = [PathBuf::from("/link/me"), PathBuf::from("/real/me")];
    assert_eq!(
        paths::script_root(Path::new("/real/me/server.py"), &both, no_pkg),
        None,
        "never the home's real path"
    );
}

#[test]
fn derived_grants_never_expose_the_home() {
    let mut req = request("/home/me/bin/tool", &[]);
    req.resolved.script_root = Some(PathBuf::from("/home/me"));
    let plan = plan(&req, &HostFacts::full_featured_root()).unwrap();
    assert!(!plan.fs.iter().any(|r| r.path == Path::new("/home/me")));
    assert!(!plan.not_granted.is_empty());
    assert!(
        plan.weaker_than_asked.is_empty(),
        "{:?}",
        plan.weaker_than_asked
    );
}

#[test]
fn allow_lists_get_a_namespace_the_hand_over_and_no_landlock_port() {
    let mut req = request("/usr/bin/node", &[]);
    let rules = ["api.github.com", "example.org:8443", "*:443"];
    req.sandbox.network = sourced(Network::Allow(
        rules
            .iter()
            .map(|r| sourced(NetRule::parse(r).unwrap()))
            .collect(),
    ));
    let p = plan(&req, &HostFacts::full_featured_root()).unwrap();
    assert!(p.namespaces.net && p.landlock.net_rules);
    assert!(!p.seccomp.deny_udp, "DNS to airlock's resolver is UDP");
    assert!(p.seccomp.deny_unix_sockets);
    let NetMode::Egress(egress) = &p.network else {
        panic!("{:?}", p.network)
    };
    assert_eq!(egress.allow.ports(), vec![80, 443, 8443]);
    assert!(
        p.seccomp.deny_fast_open,
        "a Fast Open send would connect past airlock"
    );
    assert!(
        p.seccomp.deny_listen,
        "a handed-over socket must not listen"
    );
    // airlock makes every connect: the server's own TCP connects are refused by landlock too.
    assert_eq!(p.network.connect_ports(), Some(vec![]));
    assert!(p.to_string().contains("every connect made by airlock"));
    let no_userns = HostFacts {
        user_namespaces: false,
        ..HostFacts::full_featured_root()
    };
    assert!(matches!(
        plan(&req, &no_userns),
        Err(PlanError::Unmet { .. })
    ));
    let old_kernel = HostFacts {
        connect_handover: false,
        ..HostFacts::full_featured_root()
    };
    match plan(&req, &old_kernel) {
        Err(PlanError::Unmet { unmet, have, .. }) => {
            assert!(unmet.contains("connect hand-over"), "{unmet}");
            assert!(have.contains("5.14"), "{have}");
        }
        other => panic!("{other:?}"),
    }
    req.sandbox.network = sourced(Network::Host);
    let p = plan(&req, &HostFacts::full_featured_root()).unwrap();
    assert!(!p.namespaces.net && !p.landlock.net_rules && !p.seccomp.deny_unix_sockets);
    assert!(p.weaker_than_asked.iter().any(|n| n.contains("host")));
    req.sandbox.network = sourced(Network::None);
    let p = plan(&req, &HostFacts::full_featured_root()).unwrap();
    assert!(p.namespaces.net && p.seccomp.deny_udp);
    assert_eq!(p.network.connect_ports(), Some(vec![]));
}

#[test]
fn plan_round_trips_through_json() {
    let plan = plan(
        &request("/usr/bin/node", &["a"]),
        &HostFacts::full_featured_root(),
    )
    .unwrap();
    let frame = confine::encode_plan(&plan).unwrap();
    let back: SandboxPlan = serde_json::from_slice(&frame[8..]).unwrap();
    assert_eq!(back, plan);
    assert!(plan.to_string().contains("network: none"));
}

/// A node server with a policy read grant.
pub(super) fn with_read(path: &str) -> PlanRequest {
    let mut req = request("/usr/bin/node", &[]);
    req.sandbox.read.push(sourced(path.to_string()));
    req
}

pub(super) fn rule<'a>(plan: &'a SandboxPlan, path: &str) -> &'a FsRule {
    plan.fs
        .iter()
        .find(|r| r.path == Path::new(path))
        .unwrap_or_else(|| panic!("no rule for {path}: {:#?}", plan.fs))
}

mod root;
