//! The server's own root and what it holds: grants, generated files, programs and their
//! interpreters, Homebrew and virtualenv prefixes, the working directory.

use super::*;

#[test]
fn the_server_gets_its_own_root_holding_only_its_grants() {
    let plan = plan(&with_read("/srv/x"), &HostFacts::full_featured_root()).unwrap();
    let root = plan.root.as_ref().expect("a constructed root");
    assert_eq!(root.scratch_mb, 512);
    assert!(
        root.cgroup_view,
        "cgroup v2: the server's own cgroup is shown"
    );
    assert!(root.protected.contains(&PathBuf::from("/home/me")));
    assert!(root.generates(Path::new("/dev/fd")));
    assert_eq!(rule(&plan, "/usr").shown, Shown::Bind);
    assert_eq!(rule(&plan, "/dev/null").shown, Shown::Device);
    for constructed in [
        "/proc",
        "/sys/fs/cgroup",
        "/home/me/.local/state/airlock/servers/fs/home",
        "/home/me/.local/state/airlock/servers/fs/tmp",
    ] {
        assert_eq!(rule(&plan, constructed).shown, Shown::Constructed);
    }
    // airlock is root, the server nobody: the user's paths reach it through idmapped binds.
    assert_eq!(rule(&plan, "/srv/x").shown, Shown::IdmappedBind);
    let shown = plan.to_string();
    assert!(
        shown.contains("idmapped: files of its owner on disk appear as uid 65534's"),
        "{shown}"
    );
    let mut observed = plan.clone();
    observed.fs.iter_mut().for_each(|rule| {
        if rule.path == Path::new("/srv/x") {
            rule.owner = Some(Owner {
                uid: 1000,
                gid: 100,
            });
        }
    });
    let shown = observed.to_string();
    assert!(
        shown.contains("idmapped: files of its owner on disk (uid 1000 gid 100) appear as uid 65534's, so it reaches them as their owner; what it creates is uid 1000's on disk"),
        "{shown}"
    );
    assert!(shown.contains("disk: 512 MiB tmpfs"), "{shown}");
    let summary = plan.audit_summary();
    assert_eq!(summary.root, "constructed root");
    assert!(
        summary.memory.contains("cgroup v2 memory.max"),
        "{summary:?}"
    );
}

#[test]
fn without_user_namespaces_the_host_filesystem_is_filtered_by_landlock_and_said_so() {
    let host = HostFacts {
        user_namespaces: false,
        is_root: false,
        uid: 1000,
        gid: 1000,
        memory_cgroup: None,
        ..HostFacts::full_featured_root()
    };
    let plan = plan(&request("/usr/bin/python3", &[]), &host).unwrap();
    assert!(plan.root.is_none());
    assert_eq!(rule(&plan, "/proc").shown, Shown::Bind);
    assert_eq!(
        rule(&plan, "/home/me/.local/state/airlock/servers/fs/home").shown,
        Shown::Bind
    );
    assert!(
        plan.weaker_than_asked
            .iter()
            .any(|n| n.contains("no constructed root")),
        "{:?}",
        plan.weaker_than_asked
    );
    assert!(plan.disk_text().contains("NOT bounded"));
    assert!(!plan.namespaces.ipc);
    assert!(
        plan.to_string()
            .contains("SysV IPC and POSIX queues the host's (no user namespaces)"),
        "{plan}"
    );
}

#[test]
fn entering_the_working_directory_is_decided_by_the_directories_from_the_grant_down() {
    let mut req = with_read("/srv/x");
    req.cwd = Some(PathBuf::from("/srv/x/deep/er"));
    let planned = plan(&req, &HostFacts::full_featured_root()).unwrap();
    // `/srv` and `/` are the root's own directories (0755), not the host's.
    assert_eq!(
        planned.dirs_deciding_entry(),
        [
            Path::new("/srv/x/deep/er"),
            Path::new("/srv/x/deep"),
            Path::new("/srv/x")
        ]
    );
    // Without a root of its own, the server walks the host's path from `/`.
    let mut host = HostFacts::full_featured_root();
    host.user_namespaces = false;
    let planned = plan(&req, &host).unwrap();
    assert_eq!(planned.dirs_deciding_entry().last(), Some(&Path::new("/")));
    assert_eq!(planned.dirs_deciding_entry().len(), 5);
}

#[test]
fn check_says_when_the_working_directory_is_not_in_the_servers_root() {
    let mut req = with_read("/srv/x");
    req.cwd = Some(PathBuf::from("/root/project"));
    let shown = plan(&req, &HostFacts::full_featured_root())
        .unwrap()
        .to_string();
    assert!(
        shown.contains(
            "cwd: /root/project (not in the server's root: it starts in its private home"
        ),
        "{shown}"
    );
    let planned = plan(&req, &HostFacts::full_featured_root()).unwrap();
    assert_eq!(planned.starting_dir(), planned.private_home);
    req.cwd = Some(PathBuf::from("/srv/x"));
    let planned = plan(&req, &HostFacts::full_featured_root()).unwrap();
    assert_eq!(planned.starting_dir(), Path::new("/srv/x"));
    let shown = plan(&req, &HostFacts::full_featured_root())
        .unwrap()
        .to_string();
    assert!(shown.contains("cwd: /srv/x\n"), "{shown}");
    // The way to a grant: the server works there and may list it; `/` stays unlisted.
    req.cwd = Some(PathBuf::from("/srv"));
    let planned = plan(&req, &HostFacts::full_featured_root()).unwrap();
    assert_eq!(planned.cwd_leading_to_grants(), Some(Path::new("/srv")));
    assert!(
        planned.to_string().contains(
            "cwd: /srv (only leads to granted paths: the server may list it, nothing more)"
        ),
        "{planned}"
    );
    req.cwd = Some(PathBuf::from("/"));
    let planned = plan(&req, &HostFacts::full_featured_root()).unwrap();
    assert_eq!(planned.cwd_leading_to_grants(), None);
    req.cwd = Some(PathBuf::from("/srv/x/sub"));
    let planned = plan(&req, &HostFacts::full_featured_root()).unwrap();
    assert_eq!(planned.cwd_leading_to_grants(), None);
}

#[test]
fn a_generated_file_takes_the_place_of_a_bind() {
    let mut root = RootPlan::new(16, Vec::new(), false);
    assert!(!root.generates(Path::new("/etc/resolv.conf")));
    root.add_file(
        PathBuf::from("/etc/resolv.conf"),
        RootFileContent::Text {
            text: "nameserver 127.0.0.53\n".into(),
            mode: 0o644,
        },
    );
    root.add_file(
        PathBuf::from("/etc/resolv.conf"),
        RootFileContent::Text {
            text: "nameserver 127.0.0.1\n".into(),
            mode: 0o644,
        },
    );
    assert!(root.generates(Path::new("/etc/resolv.conf")));
    assert_eq!(
        root.files
            .iter()
            .filter(|f| f.path == Path::new("/etc/resolv.conf"))
            .count(),
        1
    );
}

#[test]
fn a_program_in_a_shared_bin_dir_is_granted_alone_with_the_programs_it_runs() {
    // uv's installer: ~/.local/bin/{uv,uvx}. Not ~/.local (it holds airlock's own state).
    let plan = plan(
        &request("/home/me/.local/bin/uvx", &["mcp-server-time"]),
        &HostFacts::full_featured_root(),
    )
    .unwrap();
    let readable = grants(&plan, FsAccess::ReadExec);
    assert!(
        readable.contains(&Path::new("/home/me/.local/bin/uvx")),
        "{readable:?}"
    );
    assert!(
        readable.contains(&Path::new("/home/me/.local/bin/uv")),
        "{readable:?}"
    );
    assert!(
        !readable.contains(&Path::new("/home/me/.local")),
        "{readable:?}"
    );
    assert!(
        !readable.contains(&Path::new("/home/me/.local/bin")),
        "{readable:?}"
    );
    let path = &plan.env.iter().find(|(k, _)| k == "PATH").unwrap().1;
    assert!(path.starts_with("/home/me/.local/bin:"), "{path}");
    assert!(
        plan.weaker_than_asked.is_empty(),
        "{:?}",
        plan.weaker_than_asked
    );
}

#[test]
fn homebrew_grants_the_keg_and_its_libraries_never_the_prefix_or_var() {
    let mut req = request("/home/linuxbrew/.linuxbrew/bin/node", &["server.js"]);
    req.resolved.program_canonical = Some(PathBuf::from(
        "/home/linuxbrew/.linuxbrew/Cellar/node/22.1.0/bin/node",
    ));
    req.resolved.runtime.homebrew_prefix = Some(PathBuf::from("/home/linuxbrew/.linuxbrew"));
    let plan = plan(&req, &HostFacts::full_featured_root()).unwrap();
    let readable = grants(&plan, FsAccess::ReadExec);
    for granted in [
        "/home/linuxbrew/.linuxbrew/bin/node",
        "/home/linuxbrew/.linuxbrew/Cellar/node/22.1.0",
        "/home/linuxbrew/.linuxbrew/Cellar",
        "/home/linuxbrew/.linuxbrew/lib",
    ] {
        assert!(
            readable.contains(&Path::new(granted)),
            "{granted}: {readable:?}"
        );
    }
    for rule in &plan.fs {
        assert!(
            !Path::new("/home/linuxbrew/.linuxbrew/var/postgres").starts_with(&rule.path),
            "{rule:?}"
        );
    }
}

#[test]
fn a_scripts_interpreter_is_granted_and_first_on_path() {
    // nvm's npx: a script whose first line is `#!/usr/bin/env node`, found on PATH in nvm's bin.
    let mut req = request(
        "/home/me/.nvm/versions/node/v20.1.0/bin/npx",
        &["-y", "pkg"],
    );
    req.resolved.program_canonical = Some(PathBuf::from(
        "/home/me/.nvm/versions/node/v20.1.0/lib/node_modules/npm/bin/npx-cli.js",
    ));
    req.resolved.runtime.interpreter = Some(PathBuf::from(
        "/home/me/.nvm/versions/node/v20.1.0/bin/node",
    ));
    let plan = plan(&req, &HostFacts::full_featured_root()).unwrap();
    let readable = grants(&plan, FsAccess::ReadExec);
    assert!(
        readable.contains(&Path::new("/home/me/.nvm/versions/node/v20.1.0")),
        "{readable:?}"
    );
    let path = &plan.env.iter().find(|(k, _)| k == "PATH").unwrap().1;
    assert_eq!(
        path,
        "/home/me/.nvm/versions/node/v20.1.0/bin:/usr/bin:/bin"
    );
}

/// A virtualenv's `pyvenv.cfg` may lie in a write grant: a base whose prefix is a Homebrew prefix
/// (its `var/` holds other programs' data) is not granted whole.
#[test]
fn a_venv_base_in_a_shared_prefix_is_not_granted_whole() {
    let brew = tempfile::tempdir().unwrap();
    for dir in ["Cellar", "bin", "var/postgres"] {
        std::fs::create_dir_all(brew.path().join(dir)).unwrap();
    }
    let mut req = request("/home/me/p/.venv/bin/python", &["server.py"]);
    req.resolved.venv_base = Some(brew.path().join("bin"));
    let planted = plan(&req, &HostFacts::full_featured_root()).unwrap();
    assert!(
        !planted.fs.iter().any(|rule| rule.path == brew.path()),
        "{planted}"
    );
    // An interpreter's own prefix is granted.
    let own = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(own.path().join("bin")).unwrap();
    req.resolved.venv_base = Some(own.path().join("bin"));
    let planted = plan(&req, &HostFacts::full_featured_root()).unwrap();
    assert!(
        planted.fs.iter().any(|rule| rule.path == own.path()),
        "{planted}"
    );
}

#[test]
fn the_python_project_a_server_comes_from_is_found_three_ways() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let project = home.join("projects/srv");
    std::fs::create_dir_all(project.join("src/srv")).unwrap();
    std::fs::write(
        project.join("pyproject.toml"),
        "[project]\nname = \"srv\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(project.join(".venv/bin")).unwrap();
    std::fs::write(project.join(".venv/pyvenv.cfg"), "home = /nowhere\n").unwrap();
    std::fs::write(project.join(".venv/bin/python"), "").unwrap();
    let words = |line: &str| -> Vec<String> { line.split_whitespace().map(String::from).collect() };
    let inspect = |program: &Path, args: &str, cwd: &Path| {
        ResolvedPaths::inspect(program, &words(args), Some(cwd), &[], Some(&home))
    };
    let uv = Path::new("/usr/bin/uv");
    // uv's project directory, relative to where the host starts it.
    let found = inspect(uv, "--directory projects/srv run -m srv", &home);
    assert_eq!(found.project_root.as_deref(), Some(project.as_path()));
    // uv runs the project's own .venv.
    assert_eq!(found.venv_root, Some(project.join(".venv")));
    // The project a .venv sits in (an editable install), from anywhere.
    let python = project.join(".venv/bin/python");
    let found = inspect(&python, "-m srv", Path::new("/"));
    assert_eq!(found.project_root.as_deref(), Some(project.as_path()));
    // A `-m` module in the project the server starts in.
    let python3 = Path::new("/usr/bin/python3");
    let found = inspect(python3, "-m srv", &project);
    assert_eq!(found.project_root.as_deref(), Some(project.as_path()));
    let found = inspect(python3, "-m other", &project);
    assert_eq!(found.project_root, None);
    // Nothing else makes a project: a directory that is no project, a module name that walks
    // the filesystem, a server's own `--project` or `--directory` (after its script), another
    // program's, a system path, the home.
    std::fs::create_dir_all(home.join("loose/srv")).unwrap();
    assert_eq!(
        inspect(python3, "-m srv", &home.join("loose")).project_root,
        None
    );
    assert_eq!(inspect(python3, "-m ../..", &project).project_root, None);
    assert_eq!(inspect(python3, "-m .srv", &project).project_root, None);
    let script = project.join("s.py");
    std::fs::write(&script, "").unwrap();
    let other = home.join("loose");
    let after_script = format!("run {} --project {}", script.display(), other.display());
    assert_eq!(
        inspect(uv, &after_script, &home).project_root,
        None,
        "the server's own --project"
    );
    let node_line = format!("/srv/s.js --project {}", other.display());
    assert_eq!(
        inspect(Path::new("/usr/bin/node"), &node_line, &home).project_root,
        None
    );
    assert_eq!(
        inspect(uv, "--project /etc run x.py", &home).project_root,
        None
    );
    assert_eq!(
        inspect(uv, "--directory /var/lib run x.py", &home).project_root,
        None
    );
    let link = dir.path().join("etc-link");
    std::os::unix::fs::symlink("/etc", &link).unwrap();
    let through_link = format!("--directory {} run x.py", link.display());
    assert_eq!(inspect(uv, &through_link, &home).project_root, None);
    std::fs::write(home.join("pyproject.toml"), "").unwrap();
    std::fs::create_dir_all(home.join(".venv/bin")).unwrap();
    std::fs::write(home.join(".venv/pyvenv.cfg"), "home = /nowhere\n").unwrap();
    assert_eq!(
        inspect(&home.join(".venv/bin/python"), "-m srv", Path::new("/")).project_root,
        None,
        "never the home"
    );
}

/// The brief view counts only the system paths exactly as every server gets them: a policy's
/// grant of one (here an idmapped bind, root's files reached as their owner) is listed with
/// both reasons, in both views.
#[test]
fn the_brief_view_lists_a_system_path_the_policy_also_grants() {
    let plan = plan(&with_read("/etc/ssl"), &HostFacts::full_featured_root()).unwrap();
    let ssl = plan
        .fs
        .iter()
        .find(|rule| rule.path == Path::new("/etc/ssl"))
        .unwrap();
    assert_eq!(ssl.shown, Shown::IdmappedBind);
    assert!(
        ssl.reason.starts_with("TLS certificates; also: "),
        "{}",
        ssl.reason
    );
    for view in [plan.to_string(), format!("{plan:#}")] {
        assert!(
            view.contains("read  /etc/ssl  (TLS certificates; also: "),
            "{view}"
        );
    }
    let brief = plan.to_string();
    assert!(
        brief.contains("system 27 paths every server gets alike"),
        "{brief}"
    );
    assert!(!brief.contains("/etc/ld.so.cache"), "{brief}");
    assert!(format!("{plan:#}").contains("read  /etc/ld.so.cache  (dynamic linker cache;"));
}
