"""Check an Apptainer definition file by running its build steps in a debootstrap chroot.

This is **test tooling, not a replacement for Apptainer**. Apptainer is not packaged for
Debian bookworm, so CI cannot run ``apptainer build``; this module does the parts of a build
that can go wrong in our definition files, the way Apptainer does them, so that a broken
``%post`` or ``%test`` is caught before anyone builds the real image:

1. parse the header and the sections, substitute ``{{ NAME }}`` build arguments from
   ``%arguments`` defaults and ``--build-arg`` values;
2. create the base system with ``debootstrap`` (cached under ``/var/cache/mpilab-debootstrap``
   as a tarball of the finished tree, so the second build starts in seconds);
3. run ``%setup`` on the host, copy ``%files``, run ``%post`` in a chroot with ``/proc``, ``/dev``
   and ``/sys`` mounted (always unmounted afterwards), with ``$APPTAINER_LABELS`` as Apptainer
   sets it;
4. write ``/.singularity.d/labels.json`` from ``%labels`` (and what ``%post`` appended to
   ``$APPTAINER_LABELS``) as Apptainer does before ``%test``, so that ``%test`` can check them;
5. source ``%environment`` and run ``%test``; run every ``%apprun`` script with ``--help``
   (what ``apptainer run --app NAME IMAGE --help`` does); then start ``%runscript`` in the
   background and check that JupyterLab answers on its port with the token.

``check(..., start_from=TREE)`` builds on top of a tree a previous check kept (``keep=``)
instead of a fresh base: it copies ``%files`` and runs ``%post``, ``%test`` and the apps again,
e.g. with another ``VARIANT`` build argument, in a fraction of a full build's time.

It does not make a SIF, set up user namespaces, or bind host directories. Where a real
``apptainer`` is installed, :func:`build_with_apptainer` builds and tests the real image instead.
It needs root (chroot, mount).
"""

import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

from mpilab.core.errors import LaunchError, ParseError, ToolMissing, UsageError

#: Sections Apptainer knows (``%app*`` sections take the app name as argument).
SECTIONS = (
    "setup", "files", "environment", "post", "runscript", "startscript", "test", "labels",
    "help", "arguments", "appinstall", "apprun", "appenv", "appfiles", "applabels", "apphelp",
    "apptest", "appstartscript",
)
CACHE_DIR = "/var/cache/mpilab-debootstrap"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
#: What is left out when the repository is staged as a build context.
STAGE_EXCLUDES = (".git", ".venv", ".venv-*", "build", "__pycache__", ".pytest_cache", "*.egg-info",
                  "results", "test-output", ".ipynb_checkpoints")

_ARG_RE = re.compile(r"{{\s*([A-Za-z_][A-Za-z0-9_]*)\s*}}")


@dataclasses.dataclass
class Section:
    """One ``%section`` of a definition file: name, argument (app name), first line, body."""

    name: str
    arg: str
    lineno: int
    lines: list  # (lineno, text) pairs of the body

    @property
    def body(self):
        """The section's text, as Apptainer hands it to the shell."""
        return "\n".join(text for _, text in self.lines) + "\n"


@dataclasses.dataclass
class Definition:
    """A parsed definition file."""

    path: str
    header: dict
    sections: list
    build_args: dict

    def section(self, name, arg=""):
        """Return the section called ``name`` (and ``arg``), or None."""
        for sec in self.sections:
            if sec.name == name and sec.arg == arg:
                return sec
        return None

    def apps(self):
        """Names of the apps declared by ``%app*`` sections, sorted."""
        return sorted({s.arg for s in self.sections if s.name.startswith("app")})

    def labels(self):
        """The ``%labels`` section as a dict."""
        sec = self.section("labels")
        out = {}
        for _, text in (sec.lines if sec else []):
            parts = text.strip().split(None, 1)
            if parts:
                out[parts[0]] = parts[1] if len(parts) > 1 else ""
        return out


def parse_build_args(items):
    """Turn ``["K=V", ...]`` into a dict.

    Parameters
    ----------
    items : list of str
        ``NAME=VALUE`` strings, as given to ``--build-arg``.

    Returns
    -------
    dict
    """
    out = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UsageError(f"bad --build-arg {item!r}; expected NAME=VALUE, e.g. VARIANT=instructor")
        out[name] = value
    return out


def parse(path, build_args=None):
    """Parse a definition file the way Apptainer reads it.

    Parameters
    ----------
    path : str
        The ``.def`` file.
    build_args : dict, optional
        Values for ``{{ NAME }}`` placeholders; they override the ``%arguments`` defaults.

    Returns
    -------
    Definition

    Raises
    ------
    ParseError
        An unknown section, a header line that is not ``Key: value``, a missing ``Bootstrap``,
        or a placeholder with no value; the message names the file and the line.
    """
    with open(path) as fh:
        raw = fh.read().splitlines()
    header, sections, current = {}, [], None
    for lineno, text in enumerate(raw, 1):
        m = re.match(r"^%(\S+)\s*(.*?)\s*$", text)
        if m:
            name = m.group(1).lower()
            if name not in SECTIONS:
                raise ParseError(
                    f"{path}:{lineno}: unknown section %{m.group(1)}; valid: "
                    + ", ".join("%" + s for s in sorted(SECTIONS)))
            arg = m.group(2)
            if name.startswith("app") and not arg:
                raise ParseError(f"{path}:{lineno}: %{name} needs an app name, e.g. %{name} mpilab")
            current = Section(name, arg, lineno, [])
            sections.append(current)
        elif current is not None:
            current.lines.append((lineno, text))
        elif text.strip() and not text.lstrip().startswith("#"):
            key, sep, value = text.partition(":")
            if not sep or not key.strip():
                raise ParseError(f"{path}:{lineno}: header line {text!r} is not 'Key: value'")
            header[key.strip().lower()] = value.strip()
    if "bootstrap" not in header:
        raise ParseError(f"{path}: no 'Bootstrap:' header line")
    values = {}
    args_sec = next((s for s in sections if s.name == "arguments"), None)
    for lineno, text in (args_sec.lines if args_sec else []):
        if text.strip() and not text.strip().startswith("#"):
            key, sep, value = text.partition("=")
            if not sep:
                raise ParseError(f"{path}:{lineno}: %arguments line {text!r} is not NAME=default")
            values[key.strip()] = value.strip()
    values.update(build_args or {})

    def subst(lineno, text):
        def one(m):
            if m.group(1) not in values:
                raise ParseError(f"{path}:{lineno}: build argument {m.group(1)!r} has no value; "
                                 f"give --build-arg {m.group(1)}=... or a default in %arguments")
            return values[m.group(1)]
        return _ARG_RE.sub(one, text)

    header = {k: subst(0, v) for k, v in header.items()}
    for sec in sections:
        sec.lines = [(n, subst(n, t)) for n, t in sec.lines]
    return Definition(path, header, sections, values)


def stage_context(repo, dest):
    """Copy the repository to ``dest`` without VCS, venvs and build products.

    Parameters
    ----------
    repo, dest : str
        Source checkout and the (new) build-context directory.
    """
    shutil.copytree(repo, dest, ignore=shutil.ignore_patterns(*STAGE_EXCLUDES), symlinks=True)
    return dest


def _run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def base_tree(root, suite="bookworm", mirror=DEFAULT_MIRROR, cache_dir=CACHE_DIR, log=print):
    """Create a Debian base system in ``root``, from the cache if possible.

    The first call runs ``debootstrap --variant=minbase`` and keeps a tarball of the finished
    tree in ``cache_dir``; later calls unpack it.

    Returns
    -------
    bool
        True if the cache was used.
    """
    if shutil.which("debootstrap") is None:
        raise ToolMissing("debootstrap is not installed; apt-get install debootstrap")
    key = hashlib.sha1(f"{suite} {mirror}".encode()).hexdigest()[:10]
    tarball = os.path.join(cache_dir, f"{suite}-minbase-{key}.tar")
    os.makedirs(root, exist_ok=True)
    os.makedirs(cache_dir, exist_ok=True)
    # builds side by side: the first one debootstraps, the others wait for its tarball
    with open(os.path.join(cache_dir, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(tarball):
            _run(["tar", "-C", root, "-xpf", tarball])
            return True
        log(f"debootstrap {suite} from {mirror} (first build; cached afterwards in {tarball})")
        _run(["debootstrap", "--variant=minbase", suite, root, mirror], stdout=subprocess.DEVNULL)
        _run(["tar", "-C", root, "-cpf", tarball + ".part", "."])
        os.replace(tarball + ".part", tarball)
    return False


class _Mounts:
    """Mount /proc, /dev, /sys into a chroot; always unmount on exit."""

    def __init__(self, root):
        self.root, self.done = root, []

    def __enter__(self):
        try:
            for fs, target, opts in (("proc", "proc", ["-t", "proc"]),
                                     ("sysfs", "sys", ["-t", "sysfs"]),
                                     ("/dev", "dev", ["--rbind"]),):
                path = os.path.join(self.root, target)
                os.makedirs(path, exist_ok=True)
                _run(["mount", *opts, fs, path])
                self.done.append(path)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for path in reversed(self.done):
            if subprocess.run(["umount", "-R", path]).returncode != 0:
                subprocess.run(["umount", "-R", "-l", path])
        self.done = []


def _script(root, name, body):
    path = os.path.join(root, ".mpilab-check", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(body)
    return "/.mpilab-check/" + name


def _failing_line(sec, trace):
    """Map the last ``+ cmd`` trace line of ``sh -x`` to a line of the section."""
    cmds = [t[2:].strip() for t in trace.splitlines() if t.startswith("+ ")]
    if not cmds:
        return None
    last = cmds[-1]
    for lineno, text in sec.lines:
        if text.strip() and (text.strip() == last or last.split()[0] in text
                             and all(w in text for w in last.split()[:3])):
            best = (lineno, text.strip())
            if text.strip() == last:
                return best
    return best if "best" in locals() else (None, last)


#: Environment variables naming a CA bundle; when the host sets one (a site TLS proxy), the
#: bundle is copied into the chroot and the same variables point at the copy.
CA_VARS = ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
_HOST_CA = "/.mpilab-check/host-ca.crt"


def _chroot_env(extra=None):
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": "/root", "LANG": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive",
           "TERM": "dumb"}
    for var in CA_VARS:
        if os.environ.get(var):
            env[var] = _HOST_CA
    env.update(extra or {})
    return env


def _copy_host_ca(root):
    """Copy the host's CA bundle into the chroot when the host names one (see CA_VARS)."""
    for var in CA_VARS:
        src = os.environ.get(var)
        if src and os.path.isfile(src):
            os.makedirs(os.path.join(root, ".mpilab-check"), exist_ok=True)
            shutil.copy2(src, os.path.join(root, _HOST_CA.lstrip("/")))
            return


def run_section(root, defn, sec, env_extra=None, with_environment=False, log=print, timeout=3600):
    """Run one script section (``%post``, ``%test``) in the chroot with ``sh -e -x``.

    Raises
    ------
    LaunchError
        Naming the section, its line in the definition file and the failing command.
    """
    script = _script(root, sec.name + ".sh", sec.body)
    pre = ". /.mpilab-check/environment.sh; " if with_environment else ""
    cmd = ["chroot", root, "/bin/sh", "-c", f"{pre}exec /bin/sh -e -x {script}"]
    log(f"running %{sec.name} ({len(sec.lines)} lines) in the chroot")
    proc = subprocess.Popen(cmd, env=_chroot_env(env_extra), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace")
    out = []
    for line in proc.stdout:
        out.append(line)
        if os.environ.get("MPILAB_CHECK_VERBOSE"):
            log(line.rstrip())
    rc = proc.wait(timeout=timeout)
    if rc != 0:
        trace = "".join(out)
        where = _failing_line(sec, trace)
        tail = "".join(out[-15:])
        if where and where[0]:
            raise LaunchError(f"{defn.path}:{where[0]}: %{sec.name} failed (exit {rc}) at "
                              f"{where[1]!r}\n--- last output ---\n{tail}")
        raise LaunchError(f"{defn.path}:{sec.lineno}: %{sec.name} failed (exit {rc})"
                          f"\n--- last output ---\n{tail}")
    return "".join(out)


def files_entries(defn, context):
    """The ``%files`` entries as ``(source path, destination)``; check every source exists.

    Raises
    ------
    ParseError
        Naming the line of a source that does not exist.
    """
    sec = defn.section("files")
    out = []
    for lineno, text in (sec.lines if sec else []):
        parts = text.split()
        if not parts or parts[0].startswith("#"):
            continue
        src = os.path.join(context, parts[0])
        if not os.path.exists(src):
            raise ParseError(f"{defn.path}:{lineno}: %files source {parts[0]!r} does not exist "
                             f"(looked in build context {context})")
        out.append((src, parts[1] if len(parts) > 1 else parts[0]))
    return out


def copy_files(root, defn, context):
    """Copy ``%files`` entries (``src [dest]``, relative to ``context``) into the chroot."""
    for src, dest in files_entries(defn, context):
        target = os.path.join(root, dest.lstrip("/"))
        if os.path.isdir(src):
            shutil.copytree(src, target, symlinks=True, dirs_exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(src, target)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_runscript(root, defn, log=print, timeout=180):
    """Start ``%runscript`` (JupyterLab) in the background and GET ``/api/status`` with the token.

    Returns
    -------
    dict
        ``port`` and the HTTP ``status`` answered.
    """
    sec = defn.section("runscript")
    if sec is None:
        raise ParseError(f"{defn.path}: no %runscript section")
    port, token = _free_port(), hashlib.sha1(os.urandom(16)).hexdigest()
    script = _script(root, "runscript.sh", sec.body)
    cmd = ["chroot", root, "/bin/sh", "-c",
           f". /.mpilab-check/environment.sh; exec /bin/sh {script} --port {port} --ip 127.0.0.1"]
    logf = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(cmd, env=_chroot_env({"JUPYTER_TOKEN": token}), stdout=logf,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/api/status?token={token}"
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:
                    log(f"%runscript: JupyterLab answered {resp.status} on port {port}")
                    return {"port": port, "status": resp.status}
            except OSError:
                time.sleep(1)
        logf.seek(0)
        raise LaunchError(f"{defn.path}:{sec.lineno}: %runscript did not answer on {url} "
                          f"(exit {proc.poll()})\n--- output ---\n{logf.read()[-3000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        logf.close()


#: Where Apptainer keeps a build's metadata inside the image, and the file ``%post`` appends
#: labels to (``$APPTAINER_LABELS``).
LABELS_JSON = "/.singularity.d/labels.json"
BUILD_LABELS = "/.build.labels"


def write_labels(root, defn):
    """Write ``/.singularity.d/labels.json`` as Apptainer does after ``%post``.

    The labels that ``%post`` appended to ``$APPTAINER_LABELS`` (``name value`` lines) come
    first; a ``%labels`` entry does not replace one of them (Apptainer only warns).

    Returns
    -------
    dict
        The labels written.
    """
    labels = {}
    dynamic = os.path.join(root, BUILD_LABELS.lstrip("/"))
    if os.path.exists(dynamic):
        with open(dynamic) as fh:
            for line in fh:
                parts = line.strip().split(None, 1)
                if parts:
                    labels[parts[0]] = parts[1] if len(parts) > 1 else ""
        os.remove(dynamic)
    for key, value in defn.labels().items():
        labels.setdefault(key, value)
    path = os.path.join(root, LABELS_JSON.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(labels, fh, indent="\t", sort_keys=True)
    return labels


def run_apps(root, defn, log=print, timeout=300):
    """Run each ``%apprun`` script with ``--help`` in the chroot, as ``apptainer run --app``.

    The script runs with ``%environment`` and the app's ``%appenv`` sourced.

    Returns
    -------
    dict
        App name -> first line of its output.

    Raises
    ------
    LaunchError
        Naming the app, its ``%apprun`` line and its exit code, with the end of its output.
    """
    done = {}
    for sec in defn.sections:
        if sec.name != "apprun":
            continue
        script = _script(root, f"app-{sec.arg}.sh", sec.body)
        pre = ". /.mpilab-check/environment.sh; "
        appenv = defn.section("appenv", sec.arg)
        if appenv:
            pre += f". {_script(root, f'appenv-{sec.arg}.sh', appenv.body)}; "
        cmd = ["chroot", root, "/bin/sh", "-c", f"{pre}exec /bin/sh {script} --help"]
        log(f"running app {sec.arg} --help in the chroot")
        try:
            proc = subprocess.run(cmd, env=_chroot_env(), capture_output=True, text=True,
                                  errors="replace", timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LaunchError(f"{defn.path}:{sec.lineno}: %apprun {sec.arg}: '--help' did not "
                              f"finish within {timeout} s") from None
        out = proc.stdout + proc.stderr
        if proc.returncode != 0:
            raise LaunchError(f"{defn.path}:{sec.lineno}: %apprun {sec.arg}: '--help' failed "
                              f"(exit {proc.returncode})\n--- last output ---\n{out[-2000:]}")
        done[sec.arg] = next((ln.strip() for ln in out.splitlines() if ln.strip()), "")
    return done


def run_tests(root, defn, log=print):
    """Run ``%test`` (with ``%environment``) and every app's ``--help`` in a built tree.

    Mounts ``/proc``, ``/dev`` and ``/sys`` for the time of the run.

    Returns
    -------
    dict
        The apps' first output lines (:func:`run_apps`).

    Raises
    ------
    LaunchError
        From the failing section or app, naming its line.
    """
    with _Mounts(root):
        if defn.section("test"):
            run_section(root, defn, defn.section("test"), with_environment=True, log=log)
        return run_apps(root, defn, log=log)


def du(path):
    """``du -sh`` of ``path`` (staying on its file system)."""
    out = subprocess.run(["du", "-shx", path], capture_output=True, text=True).stdout
    return out.split()[0] if out else "?"


def check(def_path, build_args=None, context=None, keep=None, base=None, log=print,
          runscript=True, start_from=None):
    """Build a definition file in a chroot; run its ``%test``, its apps and its ``%runscript``.

    Parameters
    ----------
    def_path : str
        The definition file.
    build_args : dict, optional
        ``{{ NAME }}`` values.
    context : str, optional
        Directory ``%files`` sources are relative to (Apptainer: the build's working
        directory). Default: the current directory.
    keep : str, optional
        Build the chroot here and leave it; default a temporary directory, removed afterwards.
    base : str, optional
        A tarball of a base tree to start from instead of debootstrap (fast tests).
    runscript : bool
        Also start ``%runscript`` and check JupyterLab answers.
    start_from : str, optional
        A tree that an earlier check built and kept (``keep=``): build on top of it, in place,
        instead of a fresh base. ``%files`` are copied and ``%post``, ``%test`` and the apps
        run again; ``%setup`` is not rerun. Used to check another build argument (the
        instructor ``VARIANT``) without a second full build.

    Returns
    -------
    dict
        ``seconds`` (build through %test and the apps), ``build_seconds`` (through %post),
        ``size`` (``du -sh`` of the chroot), ``cached_base``, ``labels`` (labels.json),
        ``runscript`` (port, status), ``apps`` (names) and ``app_help`` (their first lines).
    """
    if os.geteuid() != 0:
        raise ToolMissing("the chroot check needs root (chroot, mount); run it as root or in CI")
    defn = parse(def_path, build_args)
    context = os.path.abspath(context or os.getcwd())
    boot = defn.header["bootstrap"].lower()
    if boot != "debootstrap":
        raise UsageError(f"Bootstrap: {defn.header['bootstrap']!r} is not supported by the "
                         "checker; valid: debootstrap")
    files_entries(defn, context)
    if start_from and not os.path.isdir(os.path.join(start_from, "etc")):
        raise UsageError(f"start_from={start_from!r} is not a tree an earlier check kept "
                         "(no etc/ in it); give the keep= directory of a finished check")
    t0 = time.monotonic()
    root = start_from or keep or tempfile.mkdtemp(prefix="mpilab-chroot-", dir="/var/tmp")
    try:
        if start_from:
            cached = True
        elif base:
            os.makedirs(root, exist_ok=True)
            _run(["tar", "-C", root, "-xpf", base])
            cached = True
        else:
            cached = base_tree(root, defn.header.get("osversion", "bookworm"),
                               defn.header.get("mirrorurl", DEFAULT_MIRROR), log=log)
        shutil.copy2("/etc/resolv.conf", os.path.join(root, "etc/resolv.conf"))
        _copy_host_ca(root)
        env = {"APPTAINER_ROOTFS": root}
        setup = defn.section("setup")
        if setup and not start_from:
            _run(["/bin/sh", "-e", "-x", "-c", setup.body], env={**os.environ, **env})
        copy_files(root, defn, context)
        envsec = defn.section("environment")
        _script(root, "environment.sh", envsec.body if envsec else "")
        with _Mounts(root):
            if defn.section("post"):
                run_section(root, defn, defn.section("post"), log=log,
                            env_extra={"APPTAINER_LABELS": BUILD_LABELS,
                                       "SINGULARITY_LABELS": BUILD_LABELS})
        built = time.monotonic() - t0
        labels = write_labels(root, defn)
        app_help = run_tests(root, defn, log=log)
        tested = time.monotonic() - t0
        if runscript:
            with _Mounts(root):
                served = check_runscript(root, defn, log=log)
        else:
            served = None
        result = {"seconds": round(tested, 1), "build_seconds": round(built, 1),
                  "size": du(root), "cached_base": cached, "runscript": served,
                  "labels": labels, "apps": defn.apps(), "app_help": app_help,
                  "root": root if (keep or start_from) else None}
        log(f"{def_path}: built and tested in {result['seconds']} s "
            f"(%post done at {result['build_seconds']} s), chroot size {result['size']}")
        return result
    finally:
        if not (keep or start_from):
            shutil.rmtree(root, ignore_errors=True)


def build_with_apptainer(def_path, build_args=None, context=None, out=None):
    """Build the real image with ``apptainer build --fakeroot`` and run ``apptainer test``.

    Returns
    -------
    str
        Path of the SIF image.
    """
    exe = shutil.which("apptainer")
    if exe is None:
        raise ToolMissing("apptainer is not installed; see containers/README.md")
    out = out or os.path.splitext(os.path.basename(def_path))[0] + ".sif"
    cmd = [exe, "build", "--fakeroot", "--force"]
    for k, v in (build_args or {}).items():
        cmd += ["--build-arg", f"{k}={v}"]
    _run(cmd + [os.path.abspath(out), os.path.abspath(def_path)], cwd=context)
    _run([exe, "test", os.path.abspath(out)])
    return out
